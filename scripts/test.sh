#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the test suite: lint, the Python and
# Starlark unit tests, fidelity against nvcc, Bazel analysis tests and real builds.
# Extra arguments go to pytest (e.g. `-k fidelity`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m ruff check tools tests
python3 -m pytest -ra "$@"
