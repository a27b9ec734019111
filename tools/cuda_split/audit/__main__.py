"""Runs `cuda-split audit`: `python3 -B -S -E <tools>/cuda_split/audit ARGS` (what the rules
run, with no package installed) or `python3 -m cuda_split.audit ARGS`."""

import os
import sys

if not __package__:  # run as a directory: put its tools/ on sys.path for the package
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cuda_split.audit.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
