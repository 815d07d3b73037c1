#!/usr/bin/env bash
# `npm run test:heavy`: every test file with a heavy case (one that takes HEAVY from
# test/helpers/heavy.ts, directly or through test/helpers/bench-run.ts), with the heavy cases on.
# Each file in its own process, not in shards: some measure their process's memory.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(grep -lE "from '\.\./helpers/(heavy|bench-run)\.js'" test/*/*.test.ts)
FLEETGATE_HEAVY_TESTS=1 exec node --import tsx --test --test-concurrency=2 --test-timeout=400000 "${files[@]}"
