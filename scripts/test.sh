#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the test suite: lint, the Python and
# Starlark unit tests, fidelity against nvcc, Bazel analysis tests and real builds.
# pytest and ruff run from this checkout's .venv/ (which setup.sh makes), so the tests'
# subprocesses (`sys.executable -m cuda_split...`) import this checkout's package.
#
#   bash scripts/test.sh            everything (what CI runs), on every core
#   bash scripts/test.sh --quick    the quick tier: the tests that need no Bazel, no CUDA
#                                   SDK and no REAPI backend (marker `unit`), in about a
#                                   minute; a test that uses them unmarked fails there
#
# Extra arguments go to pytest (e.g. `-k fidelity`, `-m nvcc`, `-n 0` for one process).
# TEST_WORKERS sets pytest-xdist's worker count (default: auto, one per core); each
# worker runs whole test modules, so a module's fixtures (a build, an SDK) are made once.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [[ "${1:-}" == "--quick" ]]; then
    quick=1
    shift
fi
if ((quick)); then
    bash scripts/setup.sh --quick
else
    bash scripts/setup.sh
fi
# .venv/bin first: the tests' `bazel` is the one set-up chose (.venv/bin/bazel).
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
# Whole modules per worker, longest first (tests/module_seconds.json; tests/conftest.py).
workers=(-n "${TEST_WORKERS:-auto}" --dist loadfile --no-loadscope-reorder)
if ((quick)); then
    CUDA_SPLIT_QUICK_TIER=1 exec .venv/bin/python -m pytest -ra "${workers[@]}" -m unit \
        --durations=10 "$@"
fi
exec .venv/bin/python -m pytest -ra "${workers[@]}" --durations=25 "$@"
