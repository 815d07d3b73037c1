#!/usr/bin/env bash
# Usage: scripts/image-smoke.sh
# Replays the Dockerfile's steps in a scratch directory with the `node` first on PATH (CI puts Node
# 22 there, the image's runtime; no Docker engine needed): the build stage's `npm run build`, then
# the runtime stage's `npm ci --omit=dev` with dist/ and config/ copied in and `fleetgate` linked
# onto PATH. Starts `fleetgate serve` there on loopback, probes /livez as the image's HEALTHCHECK
# does, stops it with SIGTERM by its PID, and exits 0 only if it answered and stopped cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
version=$(node -p "require('./package.json').version")
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fleetgate-image.XXXXXX")
app=$scratch/app
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
echo "image smoke: node $(node --version), scratch $scratch"

# Build stage: compile src/ with the full dependency set (the repository's, already installed).
node "$repo/node_modules/typescript/bin/tsc" -p tsconfig.build.json --outDir "$app/dist"

# Runtime stage.
cp package.json package-lock.json "$app/"
(cd "$app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error)
cp -R config "$app/config"
mkdir "$scratch/bin"
ln -s "$app/dist/cli/index.js" "$scratch/bin/fleetgate"
chmod +x "$app/dist/cli/index.js"
export PATH="$scratch/bin:$PATH" NODE_ENV=production
cd "$app"
[ ! -e "$app/node_modules/typescript" ] || { echo "image smoke: dev dependencies were installed" >&2; exit 1; }

reported=$(fleetgate --version)
[ "$reported" = "fleetgate $version" ] || { echo "image smoke: --version said '$reported'" >&2; exit 1; }

# The shipped config's backends (127.0.0.1:30000-30006) need not listen: /livez answers without them.
fleetgate serve --listen 127.0.0.1:0 >"$scratch/serve.log" 2>&1 &
pid=$!
url=""
for _ in $(seq 1 150); do
  url=$(grep -o '"url":"http://127.0.0.1:[0-9]*"' "$scratch/serve.log" | head -n 1 | cut -d'"' -f4 || true)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
if [ -z "$url" ]; then
  echo "image smoke: fleetgate serve did not report its address within 30 s; its output:" >&2
  cat "$scratch/serve.log" >&2
  exit 1
fi
answer=$(node -e "fetch('$url/livez').then(async (r) => { console.log(r.status, await r.text()); process.exit(r.ok ? 0 : 1); }, (e) => { console.log(e.message); process.exit(1); })") || {
  echo "image smoke: GET $url/livez failed: $answer" >&2
  exit 1
}
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" -eq 0 ] || { echo "image smoke: fleetgate serve exited $status after SIGTERM" >&2; exit 1; }
echo "image smoke: OK: fleetgate $version on node $(node --version) (npm ci --omit=dev, dist/ and config/ copied in) answered GET $url/livez: $answer; SIGTERM: exit 0"
