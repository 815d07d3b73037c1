#!/usr/bin/env bash
# The end-to-end tests talk to real peers: Prometheus (promtool for the alert rules), headless
# Chromium for the status page, and PostgreSQL (the Batch API's shared store; the tests start their
# own cluster). Install them from Debian's packages when they are missing. The Python client suite's
# `openai` package goes into .venv (scripts/ensure-python-sdk.sh).
set -euo pipefail
"$(dirname "$0")/ensure-python-sdk.sh"
missing=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
[ -x /usr/bin/chromium ] || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "fleetgate tests need Debian packages: ${missing[*]}" >&2
if ! command -v apt-get >/dev/null 2>&1; then
  echo "apt-get not found: install ${missing[*]} (prometheus, promtool, /usr/bin/chromium) by hand" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "run as root or install: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}" >&2
