#!/usr/bin/env bash
# Usage: scripts/fetch-node.sh MAJOR DIR
# Fetches the newest Node MAJOR.x binary for this machine from the npm registry (the
# node-linux-<arch> package: bin/node only, no npm) into DIR and prints the folder holding `node`,
# for PATH. No Docker engine and no network other than the npm registry.
set -euo pipefail
major=$1
dir=$2
package="node-linux-$(node -p process.arch)"
mkdir -p "$dir"
tarball=$(cd "$dir" && npm pack --silent --no-audit --no-fund "$package@$major")
tar -xzf "$dir/$tarball" -C "$dir" package/bin/node package/package.json
rm "$dir/$tarball"
version=$("$dir/package/bin/node" --version)
case $version in
  "v$major".*) ;;
  *) echo "fetch-node: $package@$major gave node $version" >&2; exit 1 ;;
esac
echo "$dir/package/bin"
