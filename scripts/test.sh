#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the test suite: lint, the Python and
# Starlark unit tests, fidelity against nvcc, Bazel analysis tests and real builds.
# pytest and ruff run from this checkout's .venv/ (which setup.sh makes), so the tests'
# subprocesses (`sys.executable -m cuda_split...`) import this checkout's package.
# Extra arguments go to pytest (e.g. `-k fidelity`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
.venv/bin/python -m pytest -ra "$@"
