#!/usr/bin/env bash
# The Python client suite (test/integration/python-sdk.test.ts) runs the real `openai` package, the
# client fleetgate's users write their generation scripts with. Install it into .venv (git-ignored)
# from test/python/requirements.txt when it is missing, through pip's own configuration (on the
# image: its local package index, no other network). --retries 0: an index that cannot be reached
# is passed over at once instead of retried for minutes. Prints the openai version.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
requirements=test/python/requirements.txt
check() { "$venv/bin/python" -c 'import openai, httpx; print("python openai", openai.__version__, "httpx", httpx.__version__)' 2>/dev/null; }
if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$venv/requirements.txt" && check; then exit 0; fi

command -v python3 >/dev/null 2>&1 || { echo "python3 not found: the Python client suite needs it (3.9 or later)" >&2; exit 1; }
echo "installing the Python client suite's packages into $venv ($(python3 --version))" >&2
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --retries 0 -r "$requirements" 2> >(grep -v '^WARNING' >&2)
cp "$requirements" "$venv/requirements.txt"
check || { echo "$venv: openai and httpx did not install" >&2; exit 1; }
