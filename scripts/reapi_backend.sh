#!/usr/bin/env bash
# Runs a real REAPI backend on this machine until Ctrl-C/SIGTERM: BuildGrid (CAS,
# ActionCache, Execution, Bots) on 127.0.0.1, its PostgreSQL, and workers whose actions
# cannot see any CUDA install the script finds on the machine (so undeclared SDK inputs
# fail). A part that dies (a worker killed or stopped) is restarted, with a line in the
# output, while the rest keeps serving. State (CAS, action cache, logs) in --state-dir
# DIR, kept, or in a temporary directory removed on exit. Prints the Bazel flags to use;
# --daemon then returns, leaving it in the background (--stop --pid-file FILE stops it);
# see docs/remote.md. --gpu-worker: a worker offering that GPU, for GPU tests only (CPU
# workers see no GPU). Needs root (the workers use mount namespaces).
#   bash scripts/reapi_backend.sh [--port 50051] [--workers N] [--state-dir DIR]
#                                 [--gpu-worker ARCH[:DEVICES]|auto]...
#                                 [--hide PATH]... [--no-hide]
#                                 [--daemon] [--log FILE] [--pid-file FILE]
#   bash scripts/reapi_backend.sh --stop --pid-file FILE
# The work is done by tests/reapi/backend.py (the tests' harness) and tests/reapi/worker.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/reapi_setup.sh"
exec python3 "$ROOT/tests/reapi/backend.py" "$@"
