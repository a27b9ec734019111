"""`cuda-split audit`'s command line (the package docstring says what it reports)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .report import format_report, gpu_check
from .verdict import audit, parse_gpu

PROG = "cuda-split audit"
DEFAULT_GPUS = "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_120"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="What a binary will do on each GPU: run SASS, JIT-compile PTX, or fail.",
    )
    p.add_argument("files", nargs="+", help="executables, shared libraries, objects, archives")
    p.add_argument("--gpus", default=DEFAULT_GPUS, help=f"GPUs to check (default {DEFAULT_GPUS})")
    p.add_argument(
        "--require",
        choices=("sass", "sass-or-ptx"),
        default="sass-or-ptx",
        help="what each GPU must get for exit status 0 (default sass-or-ptx)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-o", "--output", help="also write the text report to this file")
    p.add_argument(
        "--check-gpu",
        metavar="SM_XY",
        help="only check that this GPU can run FILES (--require): exit status 1 and a "
        "message naming --subject, the GPU and what each file carries when it cannot",
    )
    p.add_argument("--subject", default="", help="with --check-gpu: who asks for the GPU")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.check_gpu:
        try:
            ok, message = gpu_check(
                args.files, args.check_gpu, args.require, args.subject or "the test"
            )
        except ValueError as err:
            print(f"{PROG}: {err}", file=sys.stderr)
            return 2
        if not ok:
            print(message, file=sys.stderr)
        if args.output:
            with open(args.output, "w") as f:
                f.write((message or f"{args.check_gpu}: runs {' '.join(args.files)}") + "\n")
        return 0 if ok else 1
    try:
        gpus = [parse_gpu(t) for t in args.gpus.split(",") if t.strip()]
    except ValueError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    data, ok = audit(args.files, gpus, args.require)
    text = format_report(data, args.require)
    if args.json:
        json.dump({"require": args.require, "ok": ok, "files": data}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(text)
        print(f"--require {args.require}: {'met' if ok else 'NOT met'}")
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + f"\n--require {args.require}: {'met' if ok else 'NOT met'}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
