"""One benchmark run: the set-up (workspace copy, corpus, Bazel's server), scenarios 1 to 3
for every configuration and repeat, and the result files written after each measurement
(benchmarks/README.md says what each scenario measures)."""

from __future__ import annotations

import argparse
import collections
import compileall
import datetime
import os
import pathlib
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import REPO, say
from .configs import (
    BAZEL_TARGETS,
    CONFIGS,
    SMOKE_BAZEL_TARGETS,
    Bazel,
    Ctx,
    bazel_ggml_build,
    compile_task,
)
from .corpus import (
    EXAMPLE_FLAGS,
    GGML_PKG,
    SMOKE_EXAMPLES,
    SMOKE_FILES,
    SUBSET_FILE,
    Job,
    copy_ggml,
    copy_workspace,
    ggml_flags_and_sources,
    read_list,
    resolve_ggml,
    sample_sources,
    scan_source,
)
from .measure import find_nvcc, first_line, jobserver_module, machine_info, run_pool
from .replay import driver_cpu, longest_path, tools_cpu
from .report import save
from .steps import explain_summary, read_graph_edges, read_table, table_summary


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.archs = args.archs.split(",")
        self.warm_archs = args.warm_archs.split(",")
        self.out = pathlib.Path(args.out).resolve()
        self.raw = pathlib.Path(args.raw_dir or self.out / "raw").resolve() / args.label
        shutil.rmtree(self.raw, ignore_errors=True)
        self.raw.mkdir(parents=True)
        base = pathlib.Path(args.work_dir or tempfile.gettempdir()).resolve()
        self.work = base / f"rules_cuda_split_bench-{args.label}"
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.ws = self.work / "ws"
        self.results: dict[str, Any] = {"measurements": []}
        self.nvcc = find_nvcc(args.nvcc)
        env = dict(os.environ)
        env["PATH"] = f"{pathlib.Path(self.nvcc).parent}:{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO / "tools"), env.get("PYTHONPATH", "")) if p
        )
        # nvcc-split's bytecode, as an install writes it: else, where Python may not
        # write it (PYTHONDONTWRITEBYTECODE), every compile pays about 0.08 CPU s to
        # compile cuda_split's sources.
        compileall.compile_dir(str(REPO / "tools" / "cuda_split"), quiet=1)
        # Run under make, the benchmark would hand make's jobserver on: only
        # --split-jobs jobserver gives one (its own).
        for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
            env.pop(name, None)
        self.ctx = Ctx(
            self.nvcc,
            env,
            args.jobs,
            args.split_jobs,
            args.split_load_average,
            self.raw,
            self.work,
            split_remote=args.split_remote,
            split_remote_host=args.split_remote_host_compile,
        )
        self.bazel: Bazel | None = None

    # -- set-up --------------------------------------------------------------------------

    def setup(self) -> None:
        args = self.args
        say(f"work dir {self.work}")
        copy_workspace(self.ws)
        ggml_src = resolve_ggml(args, self.work)
        say(f"corpus: {ggml_src}")
        ggml = self.ws / GGML_PKG
        copy_ggml(ggml_src, ggml)
        flags, all_sources = ggml_flags_and_sources(ggml)
        if args.smoke:
            chosen = list(SMOKE_FILES)
        elif args.subset == "full":
            chosen = list(all_sources)
        else:
            path = SUBSET_FILE if args.subset == "subset" else pathlib.Path(args.subset)
            chosen = read_list(path)
        if args.sample:
            chosen = sample_sources(all_sources, args.sample, args.seed, read_list(SUBSET_FILE))
            say(f"sample of {len(chosen)} files, seed {args.seed}: {' '.join(chosen)}")
        if args.files:
            chosen = chosen[: args.files]
        if args.shard:
            # Every N-th file from the I-th: shards of about equal weight, as the list
            # runs from heavy to light. The examples go with shard 1.
            i, n = args.shard
            chosen = chosen[i - 1 :: n]
        heaviest = args.heaviest or (chosen[0] if args.smoke else read_list(SUBSET_FILE)[0])
        missing = [s for s in {*chosen, heaviest} if not (ggml / s).is_file()]
        if missing:
            sys.exit(f"not in the corpus: {missing}")
        search = [ggml / "src", ggml / "include"]
        self.jobs_list = [
            Job(f"ggml:{s}", s, ggml, flags, *scan_source(ggml / s, search)) for s in chosen
        ]
        self.heaviest = Job(
            f"ggml:{heaviest}", heaviest, ggml, flags, *scan_source(ggml / heaviest, search)
        )
        if args.smoke:
            examples = list(SMOKE_EXAMPLES)
        elif args.examples == "all":
            examples = sorted(
                p.relative_to(self.ws).as_posix() for p in (self.ws / "examples").rglob("*.cu")
            )
        elif args.examples == "none":
            examples = []
        else:
            examples = args.examples.split(",")
        if args.shard and args.shard[0] != 1:
            examples = []
        for ex in examples:
            extra = [f for prefix, fl in EXAMPLE_FLAGS.items() if ex.startswith(prefix) for f in fl]
            self.jobs_list.append(
                Job(ex, ex, self.ws, ["-I.", *extra], *scan_source(self.ws / ex, [self.ws]))
            )
        # A Bazel package of the same ggml files, for bazel-mono and bazel-split.
        (ggml / "BUILD.bazel").write_text(bazel_ggml_build(chosen, flags))
        self.results["meta"] = machine_info(self.nvcc) | {
            "label": args.label,
            "smoke": bool(args.smoke),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": shlex.join([os.path.relpath(sys.argv[0]), *sys.argv[1:]]),
            "archs": self.archs,
            "warm_archs": self.warm_archs,
            "jobs": args.jobs,
            "split_jobs": args.split_jobs,
            "split_load_average": args.split_load_average,
            "split_remote": args.split_remote,
            "split_remote_host_compile": args.split_remote_host_compile,
            "slots": os.environ.get("CUDA_SPLIT_SLOTS", ""),
            "split_j": self.ctx.split_j(self.archs),
            "throughput": args.throughput_probe,
            "repeats": args.repeats,
            "critical_repeats": args.critical_repeats,
            "subset": "smoke" if args.smoke else args.subset,
            "shard": list(args.shard) if args.shard else None,
            "corpus": {
                "ggml_version_dir": ggml_src.name,
                "ggml_source": str(ggml_src),
                "ggml_files": chosen,
                "examples": examples,
                "heaviest": self.heaviest.name,
                "cccl_sources": [j.name for j in self.jobs_list if j.cccl],
                "arch_list_sources": [j.name for j in self.jobs_list if j.arch_list],
                "ggml_flags": flags,
            },
        }
        wants_bazel = any(c.startswith("bazel") for c in args.configs_list) and (
            "1" in args.scenarios or "3" in args.scenarios
        )
        if not args.no_bazel and wants_bazel:
            if shutil.which("bazel"):
                self.bazel = Bazel(
                    self.ws,
                    self.work / "bazel-output-base",
                    args.jobs,
                    self.raw,
                    keep_exec_logs=args.keep_exec_logs,
                )
                targets = SMOKE_BAZEL_TARGETS if args.smoke else BAZEL_TARGETS
                self.bazel_targets = list(args.bazel_targets or targets)
                self.results["meta"]["bazel_targets"] = self.bazel_targets
                self.results["meta"]["bazel_version"] = first_line(["bazel", "--version"])
                self.results["meta"]["bazel_flags"] = list(args.bazel_flags_list)
                self.results["meta"]["bazel_disk_cache"] = not args.no_bazel_disk_cache
                say("bazel: warming up the server (loading and analysis)")
                p = self.bazel.call(
                    "build",
                    "--nobuild",
                    *self.bazel_flags(self.first_bazel_mode(), self.archs),
                    *self.bazel_targets,
                    log=self.raw / "bazel-warmup.log",
                )
                if p.rc != 0:
                    sys.exit(f"bazel failed: see {self.raw / 'bazel-warmup.log'}")
            else:
                say("no bazel on PATH: Bazel configurations skipped")
                self.results["meta"]["bazel_skipped"] = "no bazel on PATH"
        self.save()

    def bazel_flags(self, mode: str, archs: Sequence[str]) -> list[str]:
        """The flags of every build of `mode` for `archs`, --bazel-flags last."""
        return [
            f"--//cuda:archs={','.join(archs)}",
            f"--//cuda:compile_mode={mode}",
            *self.args.bazel_flags_list,
        ]

    def first_bazel_mode(self) -> str:
        """The compile mode of the first Bazel build (what the warm-up analyses)."""
        configs = [c for c in CONFIGS if c in self.args.configs_list]
        configs = configs[self.args.first_repeat % len(configs) :] + configs
        return next((c.split("-", 1)[1] for c in configs if c.startswith("bazel")), "split")

    # -- bookkeeping ---------------------------------------------------------------------

    def record(self, m: dict[str, Any]) -> None:
        self.results["measurements"].append(m)
        files = m.get("files", {})
        say(
            f"  {m['scenario']}/{m['config']}/{m['phase']} r{m['repeat']}: "
            f"wall {m['wall_s']:.1f} s, CPU {m.get('cpu_s') or 0:.1f} s"
            + (f", FAILED {m['failed']}" if m.get("failed") else "")
            + (f" ({len(files)} files)" if files else "")
        )
        self.save()

    def save(self, chart: bool = False) -> str:
        """The summary, .md (and with `chart` the .png) in --out, every measurement in
        --out's raw/<label>/ (report.save); why the chart was not written, or ''."""
        return save(self.out, self.args.label, self.results, chart)

    def run_corpus(
        self,
        scenario: str,
        config: str,
        phase: str,
        repeat: int,
        jobs: Sequence[Job],
        archs: Sequence[str],
        **kw: Any,
    ) -> dict[str, Any]:
        run_id = f"s{scenario}-{config}-{phase}-r{repeat}"
        say(
            f"scenario {scenario}: {config} {phase} ({len(jobs)} files, {','.join(archs)}, "
            f"repeat {repeat + 1})"
        )
        table = self.raw / "tables" / f"{run_id}.csv" if config == "split" else None
        if config == "split" and "trace" not in kw:
            kw["trace"] = self.raw / "traces" / f"{run_id}.jsonl"
            kw["trace"].parent.mkdir(parents=True, exist_ok=True)
            kw["trace"].unlink(missing_ok=True)
        if table:
            table.parent.mkdir(parents=True, exist_ok=True)
            table.unlink(missing_ok=True)
        server = None
        if config == "split" and self.ctx.split_jobs == "jobserver":
            # make -jJ's jobserver: J - 1 tokens beside the pool's implicit slot.
            server = jobserver_module().Server(max(0, self.args.jobs - 1))
            kw["makeflags"] = server.makeflags(self.args.jobs)
        try:
            tasks = [
                (j.name, compile_task(self.ctx, config, j, archs, run_id, table=table, **kw))
                for j in jobs
            ]
            m = run_pool(tasks, self.args.jobs, server.auth if server else "")
            if server is not None:
                m["jobserver_tokens"] = server.tokens
                m["jobserver_tokens_returned"] = server.available()
                if server.available() != server.tokens:
                    say(
                        f"warning: the jobserver got {server.available()} of its "
                        f"{server.tokens} tokens back"
                    )
        finally:
            if server is not None:
                server.close()
        m.update(scenario=scenario, config=config, phase=phase, repeat=repeat, archs=list(archs))
        if self.args.shard and scenario != "2":
            # Shards of one corpus add up (--merge); scenario 2 is one file, whole.
            m["shard"] = list(self.args.shard)
        if config == "split":
            m["split_j"] = kw.get("j") or self.ctx.split_j(archs)
            cccl = {j.src for j in jobs if j.cccl}
            al = {j.src for j in jobs if j.arch_list}
            m["steps"] = table_summary(read_table(table), cccl, al) if table else {}
            if kw.get("explain"):
                m["explain"] = explain_summary(self.raw / "logs" / run_id)
            if kw.get("trace") and kw["trace"].is_file():
                m["longest_path_s"] = round(longest_path([kw["trace"]]), 3)
                own = driver_cpu([kw["trace"]])
                if own is not None:
                    m["driver_cpu_s"] = round(own, 3)
                used = tools_cpu([kw["trace"]])
                if used is not None:
                    m["tools_cpu_s"] = round(used, 3)
        if config == "mono-cache":
            c = collections.Counter(f.get("cache", "?") for f in m["files"].values())
            nc = collections.Counter(
                m["files"][j.name].get("cache", "?") for j in jobs if not j.cccl
            )
            nal = collections.Counter(
                m["files"][j.name].get("cache", "?") for j in jobs if not j.arch_list
            )
            m["steps"] = {
                "whole_command": dict(c),
                "whole_command_non_cccl": dict(nc),
                "whole_command_no_arch_list": dict(nal),
            }
        shutil.rmtree(self.work / "obj" / run_id, ignore_errors=True)
        return m

    # -- scenarios -----------------------------------------------------------------------

    def edit(self, job: Job) -> Callable[[], None]:
        """Append a comment to a source (an edit that leaves its preprocessed text as
        it was); returns the undo."""
        path = job.cwd / job.src
        before = path.read_bytes()
        path.write_bytes(before + f"\n// benchmark edit {time.time_ns()}\n".encode())
        return lambda: path.write_bytes(before)

    def scenarios_1_3(self, repeat: int) -> None:
        s1, s3 = "1" in self.args.scenarios, "3" in self.args.scenarios
        configs = [c for c in CONFIGS if c in self.args.configs_list]
        if not self.bazel:
            configs = [c for c in configs if not c.startswith("bazel")]
        if s3 and not s1:
            configs = [c for c in configs if c in ("split", "bazel-mono", "bazel-split")]
        if s3 and "nvcc" in self.args.configs_list:
            configs.append("mono-cache")
        if not configs:
            return
        # Rotate the order from one repeat to the next (drifting load hits each in turn).
        configs = configs[repeat % len(configs) :] + configs[: repeat % len(configs)]
        for config in configs:
            if config.startswith("bazel"):
                self.bazel_runs(config, repeat, s1, s3)
            elif config in ("split", "mono-cache"):
                self.cache_runs(config, repeat, "1" if s1 and config == "split" else "3", s3)
            elif config == "split-log":
                if s1:
                    self.log_run(repeat)
            elif config == "split-nocache":
                if s1:
                    m = self.run_corpus("1", "split", "nocache", repeat, self.jobs_list, self.archs)
                    m["config"] = "split-nocache"
                    self.record(m)
            else:
                self.record(
                    self.run_corpus("1", config, "full", repeat, self.jobs_list, self.archs)
                )

    def log_run(self, repeat: int) -> None:
        """nvcc-split with an empty cache but the durations its split build just before
        noted (`durations/` of that build's cache): a build after an edit of a header
        every file includes, where every step misses and the weights are the last
        build's. Scenario 1, phase `log`."""
        noted = sorted(
            (self.work / "cache").glob("split-r*/durations"), key=lambda p: p.stat().st_mtime
        )
        if not noted:
            raise SystemExit("run.py: --configs split-log needs split's build before it")
        cache = self.work / "cache" / f"split-log-r{repeat}"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(noted[-1], cache / "durations")
        m = self.run_corpus("1", "split", "log", repeat, self.jobs_list, self.archs, cache=cache)
        m["config"] = "split-log"
        self.record(m)
        shutil.rmtree(cache, ignore_errors=True)

    def cache_runs(self, config: str, repeat: int, cold_scenario: str, s3: bool) -> None:
        """Cold (empty cache, all archs, every file), then with the warm cache: an edit of
        the heaviest file rebuilt alone, and every file for --warm-archs."""
        cache = self.work / "cache" / f"{config}-r{repeat}"
        shutil.rmtree(cache, ignore_errors=True)
        self.record(
            self.run_corpus(
                cold_scenario, config, "cold", repeat, self.jobs_list, self.archs, cache=cache
            )
        )
        if not s3:
            return
        if any(j.name == self.heaviest.name for j in self.jobs_list):
            self.incremental(config, repeat, cache)
        self.record(
            self.run_corpus(
                "3",
                config,
                "warm",
                repeat,
                self.jobs_list,
                self.warm_archs,
                cache=cache,
                explain=True,
            )
        )
        shutil.rmtree(cache, ignore_errors=True)

    def incremental(self, config: str, repeat: int, cache: pathlib.Path) -> None:
        """The heaviest file edited (a comment appended), rebuilt alone with the warm
        cache; nvcc-split with -j --jobs, as the build has nothing else to do."""
        undo = self.edit(self.heaviest)
        try:
            self.record(
                self.run_corpus(
                    "3",
                    config,
                    "incremental",
                    repeat,
                    [self.heaviest],
                    self.archs,
                    cache=cache,
                    explain=True,
                    j=self.args.jobs if config == "split" else None,
                )
            )
        finally:
            undo()

    def bazel_runs(self, config: str, repeat: int, s1: bool, s3: bool) -> None:
        """bazel clean; a cold build with an empty disk cache; then (scenario 3) an edit
        of the heaviest ggml file rebuilt incrementally, and after bazel clean a build for
        --warm-archs from the disk cache."""
        assert self.bazel is not None
        mode = config.split("-", 1)[1]
        disk = self.work / "disk-cache" / f"{config}-r{repeat}"
        shutil.rmtree(disk, ignore_errors=True)
        base = [] if self.args.no_bazel_disk_cache else [f"--disk_cache={disk}"]
        log = self.raw / "logs" / f"bazel-clean-{config}-r{repeat}.log"

        def build(scenario: str, phase: str, archs: Sequence[str]) -> None:
            run_id = f"s{scenario}-{config}-{phase}-r{repeat}"
            say(f"scenario {scenario}: {config} {phase} ({','.join(archs)}, repeat {repeat + 1})")
            assert self.bazel is not None
            m = self.bazel.build(
                self.bazel_targets, [*base, *self.bazel_flags(mode, archs)], run_id
            )
            m.update(
                scenario=scenario, config=config, phase=phase, repeat=repeat, archs=list(archs)
            )
            self.record(m)

        self.bazel.call("clean", log=log)
        build("1" if s1 else "3", "cold", self.archs)
        if not s3:
            return
        heavy = self.ws / GGML_PKG / self.heaviest.src
        before = heavy.read_bytes()
        heavy.write_bytes(before + f"\n// benchmark edit {time.time_ns()}\n".encode())
        try:
            build("3", "incremental", self.archs)
        finally:
            heavy.write_bytes(before)
        self.bazel.call("clean", log=log)
        build("3", "warm", self.warm_archs)
        shutil.rmtree(disk, ignore_errors=True)

    def scenario_2(self, repeat: int) -> None:
        """The heaviest file alone: nvcc, nvcc -t, nvcc-split -j J, and nvcc-split -j 1
        (its step times give the critical-path lower bound)."""
        job = [self.heaviest]
        runs: list[tuple[str, dict[str, Any]]] = [
            ("nvcc", {}),
            ("nvcc-t", {}),
            ("split", {"j": self.args.jobs}),
            ("split-j1", {"j": 1}),
        ]
        # --configs picks them too (split: both nvcc-split runs).
        runs = [r for r in runs if r[0].removesuffix("-j1") in self.args.configs_list]
        if not runs:
            return
        runs = runs[repeat % len(runs) :] + runs[: repeat % len(runs)]
        for name, kw in runs:
            config = "split" if name.startswith("split") else name
            graph = self.raw / "tables" / f"s2-{name}-r{repeat}.dot"
            graph.parent.mkdir(parents=True, exist_ok=True)
            if config == "split":
                kw["graph"] = graph
            m = self.run_corpus("2", config, name, repeat, job, self.archs, **kw)
            m["config"] = name
            if config == "split":
                table = self.raw / "tables" / f"s2-split-{name}-r{repeat}.csv"
                m["step_rows"] = [
                    {k: r[k] for k in ("step", "kind", "arch", "seconds", "cache")}
                    for r in read_table(table)
                ]
                m["edges"] = read_graph_edges(graph)
            self.record(m)

    def run(self) -> None:
        self.setup()
        args = self.args
        if "1" in args.scenarios or "3" in args.scenarios:
            for r in range(args.first_repeat, args.first_repeat + args.repeats):
                self.scenarios_1_3(r)
        if "2" in args.scenarios:
            for r in range(args.first_repeat, args.first_repeat + args.critical_repeats):
                self.scenario_2(r)
        if self.bazel:
            self.bazel.call("shutdown", log=self.raw / "bazel-shutdown.log")
        note = self.save(chart=True)
        if not args.keep_work:
            shutil.rmtree(self.work, ignore_errors=True)
        say(
            f"wrote {self.out / args.label}.json (summary), .md"
            + ("" if note else ", .png")
            + f"; every measurement: {self.out / 'raw' / args.label / args.label}.json"
        )
