"""`python -m cuda_split.driver`: nvcc-split."""

import sys

from cuda_split.driver.cli import main

sys.exit(main())
