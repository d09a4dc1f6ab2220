#!/usr/bin/env bash
# Drives the official Kubernetes JavaScript client (@kubernetes/client-node
# from npm, installed under target/) through scripts/js_client_session.mjs
# against the standalone harness API server over TLS. Fails if node, npm or
# the client cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v node >/dev/null && command -v npm >/dev/null || { echo "node and npm are needed" >&2; exit 1; }
# 1.x: the newest line that runs on the machines' Node.js 20 (2.x pulls an
# undici that needs a newer Node.js and fails at import).
version="^1.4.0"
dir="${CARGO_TARGET_DIR:-target}/js-client"
mkdir -p "$dir"
if ! (cd "$dir" && node -e 'require("@kubernetes/client-node/package.json")' 2>/dev/null) \
  || [ "$(cat "$dir/.version" 2>/dev/null)" != "$version" ]; then
  rm -rf "$dir/node_modules" "$dir/package-lock.json"
  (cd "$dir" && echo '{"private": true, "type": "module"}' >package.json \
    && npm install --silent --no-audit --no-fund "@kubernetes/client-node@$version")
  echo "$version" >"$dir/.version"
fi
cp scripts/js_client_session.mjs "$dir/session.mjs"

# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
start_harness_server

node "$dir/session.mjs"
