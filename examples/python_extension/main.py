"""Loads the `dot` extension module built by Bazel and checks a dot product on the GPU.

    python3 examples/python_extension/main.py bazel-bin/examples/python_extension/dot.so

Prints OK and exits 0 when the GPU's result is right; exits 77 when there is no CUDA
device (the examples' "no device" code), 1 on a wrong result.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys

EXIT_NO_DEVICE = 77


def load(path: str):
    """The extension module at `path` (any file name: Bazel's output is `dot.so`)."""
    loader = importlib.machinery.ExtensionFileLoader("dot", path)
    spec = importlib.util.spec_from_file_location("dot", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    dot = load(argv[1])
    xs = [float(i) for i in range(1000)]
    ys = [2.0] * len(xs)
    try:
        got = dot.dot(xs, ys)
    except RuntimeError as e:
        if str(e).startswith("no CUDA device"):
            print(e, file=sys.stderr)
            return EXIT_NO_DEVICE
        raise
    want = sum(x * y for x, y in zip(xs, ys, strict=True))
    print(f"dot = {got} (expected {want}), kernel launches: {dot.launches()}")
    if got != want or dot.launches() != 1:
        print("FAIL", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
