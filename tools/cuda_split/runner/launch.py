"""The step runner's entry point: checks the interpreter's version, then runs main.py.

Every step action runs `<python> -B -S -E tools/cuda_split/runner/launch.py @params`, the
interpreter being the toolchain's `python` field. An interpreter older than the runner
needs fails here with one line, exit code 2, instead of a traceback from a module that
uses newer syntax. So this file keeps to syntax every Python parses (2.7 and 3.x): no
annotations, no f-strings, no `from __future__ import annotations`.
"""

import os
import sys

# The oldest Python the step runner runs on (pyproject.toml's requires-python).
NEEDED = (3, 11)

# For tests only: a version ("3.9.2") to check instead of the interpreter's own. Not a
# PYTHON* variable, so -E keeps it; the actions' environment never sets it.
FAKE_VERSION_VAR = "CUDA_SPLIT_TEST_PYTHON_VERSION"


def _version():
    fake = os.environ.get(FAKE_VERSION_VAR)
    if fake:
        return tuple(int(part) for part in fake.split("."))
    return tuple(sys.version_info[:3])


def check_version():
    """The one line to print where the interpreter is too old, else None."""
    version = _version()
    if version[:2] >= NEEDED:
        return None
    return "cuda_split: the step runner needs Python >= {}; {} is {}".format(
        ".".join(str(v) for v in NEEDED),
        sys.executable or "the interpreter",
        ".".join(str(v) for v in version),
    )


def main():
    message = check_version()
    if message:
        sys.stderr.write(message + "\n")
        return 2
    # Run as a script: import `cuda_split` from the directory two above this file.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from cuda_split.runner import main as runner_main

    return runner_main.main()


if __name__ == "__main__":
    sys.exit(main())
