"""`python -m cuda_split.commands`: the `cuda-split` command."""

import sys

from cuda_split.commands import main

sys.exit(main())
