#!/usr/bin/env bash
# Runs a real REAPI backend on this machine until Ctrl-C: BuildGrid (CAS, ActionCache,
# Execution, Bots) on 127.0.0.1, its PostgreSQL, and workers whose actions cannot see the
# host's CUDA installs (so undeclared SDK inputs fail). Prints the Bazel flags to use;
# see docs/remote.md. Needs root (the workers use mount namespaces).
#   bash scripts/reapi_backend.sh [--port 50051] [--workers N] [--root DIR] [--no-hide]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/reapi_setup.sh"
exec python3 "$ROOT/tests/reapi/backend.py" "$@"
