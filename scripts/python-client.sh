#!/usr/bin/env bash
# Drives the official Kubernetes Python client (`pip install kubernetes`, in a
# virtualenv under target/) through scripts/python_client_session.py against
# the standalone harness API server over TLS. Fails if the client cannot be
# installed.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CARGO_TARGET_DIR:-target}/python-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import kubernetes' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check kubernetes
fi

# shellcheck source=lib/harness-server.sh
source scripts/lib/harness-server.sh
start_harness_server

"$venv/bin/python" scripts/python_client_session.py
