"""What a ggml file's host side costs, against the sizes of the files it reads: the data
behind nvcc-split's SECONDS_PER_MB (tools/cuda_split/slots.py).

For each file, `nvcc --keep` with ggml's flags for the given archs (files at once, as a
build would), then fatbinary and the host compile are run again from nvcc's own `--dryrun`
in the kept directory and timed, and the sizes of the kept files are summed by suffix.
One JSON line a file on stdout (and `--out`):

    python3 benchmarks/host_sizes.py --corpus-dir <ggml> --nvcc /usr/local/cuda/bin/nvcc \\
        --work /tmp/keep --out host-sizes.jsonl
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench.configs import gencodes  # noqa: E402
from bench.corpus import read_list  # noqa: E402

import corpus  # noqa: E402  (tests/corpus.py)

SUFFIXES = (
    ".cubin",
    ".ptx",
    ".fatbin",
    ".fatbin.c",
    ".cudafe1.cpp",
    ".cudafe1.stub.c",
    ".cpp1.ii",
    ".cpp4.ii",
)
# nvcc's dryrun lines that set variables rather than run a tool.
_SETTINGS = ("_", "PATH=", "LIBRARIES=", "INCLUDES=", "LD_LIBRARY_PATH=", "TOP=", "CICC_")


def measure(
    nvcc: str,
    ggml: pathlib.Path,
    src: str,
    flags: list[str],
    keep: pathlib.Path,
    env: dict[str, str],
):
    keep.mkdir(parents=True, exist_ok=True)
    cmd = [nvcc, "-c", src, "-o", str(keep / "x.o"), *flags, "--keep", "--keep-dir", str(keep)]
    start = time.monotonic()
    subprocess.run(cmd, cwd=ggml, check=True, capture_output=True, env=env)
    result: dict[str, object] = {"src": src, "total": time.monotonic() - start}
    dry = subprocess.run([*cmd, "--dryrun"], cwd=ggml, capture_output=True, text=True, env=env)
    for line in dry.stderr.splitlines():
        line = line.removeprefix("#$ ")
        if line.startswith(_SETTINGS):
            continue
        if line.startswith("fatbinary") or '"fatbinary"' in line:
            name = "fatbinary"
        elif ("gcc" in line or "g++" in line) and "cudafe1.cpp" in line and " -E " not in line:
            name = "host_compile"
        else:
            continue
        start = time.monotonic()
        rc = subprocess.run(line, shell=True, cwd=ggml, capture_output=True, env=env).returncode
        result[f"{name}_s"] = time.monotonic() - start
        result[f"{name}_rc"] = rc
    sizes: dict[str, int] = {}
    for path in keep.iterdir():
        for suffix in SUFFIXES:
            if path.name.endswith(suffix):
                sizes[suffix] = sizes.get(suffix, 0) + path.stat().st_size
    result["sizes"] = sizes
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], fromfile_prefix_chars="@")
    p.add_argument("--corpus-dir", required=True, help="an unpacked ggml directory")
    p.add_argument("--nvcc", default="nvcc", help="the nvcc (default: nvcc on PATH)")
    p.add_argument("--subset", default=str(REPO / "benchmarks" / "subset.txt"))
    p.add_argument("--archs", default="sm_75,sm_80,sm_86,sm_89,sm_90")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="files at once")
    p.add_argument("--work", required=True, help="where the kept files go")
    p.add_argument("--out", default="", help="also write the lines here")
    args = p.parse_args(argv)
    ggml = pathlib.Path(args.corpus_dir).resolve()
    flags = [*gencodes(args.archs.split(",")), *corpus.ggml_cuda_flags()]
    # Tools nvcc names without a directory (fatbinary) are found next to it; this
    # process's own environment stays as it is.
    env = dict(os.environ)
    if os.sep in args.nvcc:
        nvcc_dir = os.path.dirname(os.path.abspath(args.nvcc))
        env["PATH"] = nvcc_dir + os.pathsep + env.get("PATH", "")
    work = pathlib.Path(args.work)
    sources = read_list(pathlib.Path(args.subset))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(measure, args.nvcc, ggml, s, flags, work / s.replace("/", "_"), env)
            for s in sources
        ]
        lines = [json.dumps(f.result()) for f in futures]
    print("\n".join(lines))
    if args.out:
        pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
