"""`cuda-split`: the project's command-line tools, a subcommand each.

cuda-split explain OLD.json NEW.json   why each CUDA action hit or missed (explain.py)
cuda-split save-params LOG --execroot DIR   copy a build's params files aside for explain
cuda-split arch-list BAZEL_BIN         sources whose device code reads the arch list
cuda-split simulate LOG --workers N    a build's action graph replayed on N workers
cuda-split audit FILE...               what a binary will do on each GPU (cuda_split/audit/)
cuda-split profile TRACE_OR_DIR...     where the compile time goes, from cicc/ptxas traces
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# Subcommand -> (module, whether its main() takes the subcommand's name as argv[0]).
COMMANDS = {
    "explain": ("cuda_split.commands.explain", True),
    "save-params": ("cuda_split.commands.explain", True),
    "arch-list": ("cuda_split.commands.explain", True),
    "simulate": ("cuda_split.commands.simulate", False),
    "audit": ("cuda_split.audit.cli", False),
    "profile": ("cuda_split.commands.profile", False),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    name = args[0]
    if name not in COMMANDS:
        print(
            f"cuda-split: unknown command '{name}'; commands: {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    module, with_name = COMMANDS[name]
    return importlib.import_module(module).main(args if with_name else args[1:])


if __name__ == "__main__":
    sys.exit(main())
