"""ADD_ADD(type=f16, type_addend=f32, ne=[64,5,4,3]): how often does it miss by chance?

test-backend-ops builds out = add(add(a, b), c) with a (and so the intermediate) in f16, b
and c in f32, all drawn uniform in [-1, 1] from a fresh std::random_device seed each run.
The CPU backend runs the two ADDs as two nodes, rounding a + b to f16 and then the sum
with c to f16 again; CUDA fuses them (binbcast.cu: the sum in f32, one rounding to f16).
Both are exact IEEE operations in every optimisation level (no -ffast-math in ggml-cpu),
so the difference between the backends comes from the double rounding alone, and its
normalised MSE (test-backend-ops' nmse, against the CPU's output) is a random variable of
the inputs. This draws it TRIALS times and prints its spread and how often it exceeds the
test's threshold (1e-7).

    python3 docs/gpu/ggml/addadd_sim.py [TRIALS] [SEED]
"""

from __future__ import annotations

import argparse
import random
import struct

N = 64 * 5 * 4 * 3
THRESHOLD = 1e-7


def f32(x: float) -> float:
    """x rounded to the nearest float32 (ties to even)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def f16(x: float) -> float:
    """x rounded to the nearest float16 (ties to even, as F16C and __float2half do)."""
    return struct.unpack("e", struct.pack("e", x))[0]


def one_nmse(rng: random.Random) -> float:
    """test-backend-ops' nmse(cpu, cuda) for one draw of a, b, c."""
    num = den = 0.0
    for _ in range(N):
        a = f16(f32(rng.uniform(-1, 1)))
        b = f32(rng.uniform(-1, 1))
        c = f32(rng.uniform(-1, 1))
        cpu = f16(f32(f16(f32(a + b)) + c))
        cuda = f16(f32(f32(a + b) + c))
        num += (cpu - cuda) ** 2
        den += cpu * cpu
    return num / den


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trials", type=int, nargs="?", default=4000, help="draws (default 4000)")
    parser.add_argument("seed", type=int, nargs="?", default=1, help="Python's seed (default 1)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    errs = sorted(one_nmse(rng) for _ in range(args.trials))
    mean = sum(errs) / len(errs)
    sd = (sum((e - mean) ** 2 for e in errs) / len(errs)) ** 0.5
    over = sum(e > THRESHOLD for e in errs)
    print(
        f"{args.trials} draws: NMSE mean {mean:.3g}, sd {sd:.3g}, max {errs[-1]:.3g}; "
        f"over {THRESHOLD:g}: {over} ({100 * over / len(errs):.2f} %)"
    )


if __name__ == "__main__":
    main()
