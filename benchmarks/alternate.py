#!/usr/bin/env python3
"""What nvcc-split adds to one compile's CPU, with nothing else different: one source,
the same steps one at a time, nvcc and nvcc-split alternated.

A build's CPU seconds compare nvcc-split with nvcc only as far as the two keep the same
cores busy for the same time and the machine's speed holds still; on the machines here
it drifts by 10-30 % within minutes (benchmarks/README.md). This takes both away: each
round runs plain nvcc, then nvcc-split with `-j 1 --no-slot-pool` (its steps in a row,
as nvcc runs them) once per configuration, so that every nvcc-split run has an nvcc run
just before it and just after; it reports each configuration's CPU (wait4 of the process
tree: user + sys) against the mean of those two nvcc runs, the median of the rounds, and
nvcc-split's own CPU from its --trace (its threads, start-up and imports).

    python3 benchmarks/alternate.py --nvcc /usr/local/cuda/bin/nvcc --corpus-dir DIR \
        [--source src/ggml-cuda/softmax.cu] [--rounds 5] [--out F]

Pin it to cores with `taskset -c 2 python3 ...` (its children inherit the affinity).
Standard library only (it runs on the device machine with a bare python3).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH = pathlib.Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from bench.corpus import ggml_flags_and_sources  # noqa: E402
from pool_replay import driver_cpu  # noqa: E402

ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")
# nvcc-split's configurations: name -> its options (CACHE: an empty cache of the run).
CONFIGS = {
    "split-nocache": ["--no-cache"],
    "split": ["--cache-dir", "CACHE"],
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nvcc", required=True, help="the nvcc to run and to split")
    p.add_argument("--corpus-dir", required=True, help="the unpacked ggml directory")
    p.add_argument("--source", default="src/ggml-cuda/softmax.cu", help="relative to it")
    p.add_argument("--rounds", type=int, default=5, help="rounds of alternation (at least 1)")
    p.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help=f"nvcc-split's configurations, comma-separated: {', '.join(CONFIGS)}",
    )
    p.add_argument("--out", default="", help="write the runs and the summary as JSON here")
    args = p.parse_args(argv)
    args.configs = args.configs.split(",")
    if bad := [c for c in args.configs if c not in CONFIGS]:
        p.error(f"--configs: unknown {', '.join(bad)} (accepted: {', '.join(CONFIGS)})")
    if args.rounds < 1:
        p.error(f"--rounds wants at least 1, got {args.rounds}")
    return args


def measure(argv: list[str], cwd: pathlib.Path, env: dict[str, str]) -> dict[str, float]:
    """Run `argv` to its end: wall, user and sys seconds of its process tree."""
    t0 = os.times().elapsed
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"alternate: {argv[0]} exited {p.returncode}")
    return {
        "wall_s": round(os.times().elapsed - t0, 3),
        "user_s": round(ru.ru_utime, 3),
        "sys_s": round(ru.ru_stime, 3),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
    }


def summarize(runs: list[dict], configs: list[str]) -> dict[str, dict[str, float]]:
    """Per configuration: the median CPU, and the median over rounds of its CPU against
    the mean of the nvcc runs just before and after it (runs in order of running)."""
    out: dict[str, dict[str, float]] = {}
    nvcc_at = [i for i, r in enumerate(runs) if r["config"] == "nvcc"]
    for config in ["nvcc", *configs]:
        mine = [(i, r) for i, r in enumerate(runs) if r["config"] == config]
        row = {"cpu_s": statistics.median(r["cpu_s"] for _, r in mine)}
        if config != "nvcc":
            ratios = []
            for i, r in mine:
                before = [j for j in nvcc_at if j < i]
                after = [j for j in nvcc_at if j > i]
                if before and after:
                    around = (runs[before[-1]]["cpu_s"] + runs[after[0]]["cpu_s"]) / 2
                    ratios.append(r["cpu_s"] / around)
            if ratios:
                row["paired_ratio"] = statistics.median(ratios)
            own = [r["driver_cpu_s"] for _, r in mine if r.get("driver_cpu_s") is not None]
            if own:
                row["driver_cpu_s"] = statistics.median(own)
        out[config] = {k: round(v, 4) for k, v in row.items()}
    return out


def markdown(summary: dict[str, dict[str, float]], rounds: int) -> str:
    lines = [
        f"| config | CPU s (median of {rounds}) | ÷ nvcc around it (median) "
        "| nvcc-split's own CPU s |",
        "|---|---|---|---|",
    ]
    for config, row in summary.items():
        ratio = f"{row['paired_ratio']:.3f}" if "paired_ratio" in row else "—"
        own = f"{row['driver_cpu_s']:.2f}" if "driver_cpu_s" in row else "—"
        lines.append(f"| {config} | {row['cpu_s']:.2f} | {ratio} | {own} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ggml = pathlib.Path(args.corpus_dir).resolve()
    flags, _ = ggml_flags_and_sources(ggml)
    gencode = [f"-gencode=arch=compute_{a[3:]},code={a}" for a in ARCHS]
    work = pathlib.Path(tempfile.mkdtemp(prefix="alternate-"))
    nvcc_args = [*flags, *gencode, "-c", args.source, "-o", str(work / "x.o")]
    env = dict(os.environ)
    paths = (str(REPO / "tools"), env.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    # cuda_split's bytecode, as an install writes it (else each run compiles its sources).
    compileall.compile_dir(str(REPO / "tools" / "cuda_split"), quiet=1)
    driver = [sys.executable, "-m", "cuda_split.driver", "--nvcc", args.nvcc, "-j", "1"]
    driver.append("--no-slot-pool")
    runs: list[dict] = []
    measure([args.nvcc, *nvcc_args], ggml, env)  # warm-up, not counted
    for n in range(args.rounds):
        order = ["nvcc", *(args.configs if n % 2 == 0 else reversed(args.configs))]
        for config in order:
            if config == "nvcc":
                argv = [args.nvcc, *nvcc_args]
            else:
                cache = work / "cache"
                shutil.rmtree(cache, ignore_errors=True)
                trace = work / "trace.jsonl"
                trace.unlink(missing_ok=True)
                opts = [str(cache) if o == "CACHE" else o for o in CONFIGS[config]]
                argv = [*driver, *opts, "--trace", str(trace), "--", *nvcc_args]
            run = measure(argv, ggml, env) | {"config": config, "round": n}
            if config != "nvcc":
                run["driver_cpu_s"] = driver_cpu([work / "trace.jsonl"])
            runs.append(run)
            print(json.dumps(run), flush=True)
    runs.append(measure([args.nvcc, *nvcc_args], ggml, env) | {"config": "nvcc", "round": -1})
    summary = summarize(runs, args.configs)
    text = markdown(summary, args.rounds)
    print(text, end="")
    if args.out:
        doc = {"source": args.source, "archs": list(ARCHS), "runs": runs, "summary": summary}
        pathlib.Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
