"""A run's results as markdown (header, targets, one table per scenario) and as bar charts
(if matplotlib imports); `save` writes a run's files: every measurement, the summary
(results.py) and its renderings."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from .analysis import targets, usable_cores
from .results import EXPLAIN_ROWS, corpus_lists, count, dumps, raw_path, store_lists, summarize


def fmt(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def pct(n: float, d: float) -> str:
    return "—" if not d else f"{100 * n / d:.0f} %"


def split_load_note(meta: dict[str, Any]) -> str:
    """How nvcc-split's --load-average was set, for the report's header line."""
    load = meta.get("split_load_average")
    if load is None:  # results of nvcc-split before --load-average
        return "; no load limit (nvcc-split before --load-average)"
    if load == "auto":
        if meta.get("split_jobs") == "jobserver":
            return "; no load limit (the jobserver shares the cores)"
        cores = usable_cores(meta)
        return (
            f"; the steps of every file share nvcc-split's slot pool of {cores} slots "
            "(its default without a jobserver)"
        )
    if float(load) == 0:
        return "; no load limit (--load-average 0)"
    return f"; --load-average {load}"


def render_markdown(results: dict[str, Any]) -> str:
    """The report of a result, full or its summary (results.summarize): a header saying
    what ran where, the targets, then a section for each scenario measured (and the
    chart's note, if it was not written)."""
    meta = results.get("meta", {})
    if not meta:
        return "(no results yet)\n"
    summary = summarize(results)
    a = summary["analysis"]
    corpus = meta.get("corpus", {})
    lines = [
        *header(summary, meta),
        *targets_section(a, meta),
        *scenario_1(a["s1"], meta, count_builds=unequal_builds(a, meta)),
        *scenario_2(a["s2"], meta),
        *scenario_3(a["s3"], meta),
        *overhead(a["s1"], a["s2"], n_sources(corpus)),
    ]
    if meta.get("png"):
        lines.append(f"Chart: {meta['png']}\n")
    return "\n".join(lines) + "\n"


def machine_line(meta: dict[str, Any]) -> str:
    """The machine and tools a run's meta records, in one line (the summaries of
    `run.py farm` and `run.py team`)."""
    mach = meta.get("machine", {})
    tools = [str(meta[k]) for k in ("nvcc_version", "gcc_version", "bazel_version") if meta.get(k)]
    python = f", Python {mach['python']}" if mach.get("python") else ""
    return (
        f"{mach.get('cores')} cores ({mach.get('cpu_model')}), {mach.get('memory')}{python}; "
        + ("; ".join(tools) or "tools not recorded")
    )


def n_sources(corpus: dict[str, Any]) -> int:
    return count(corpus.get("ggml_files")) + count(corpus.get("examples"))


def ggml_only(meta: dict[str, Any]) -> bool:
    """Whether the run's Bazel targets are the ggml library alone (no examples)."""
    return list(meta.get("bazel_targets") or []) == ["//bench/ggml:ggml_cuda"]


def header(summary: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The title and what ran: when, on what machine and compilers, which files, archs,
    parallelism, repeats, Bazel targets, shards and merged files."""
    mach = meta.get("machine", {})
    corpus = meta.get("corpus", {})
    L = [f"# Benchmark results: {meta.get('label')}\n"]
    if meta.get("smoke"):
        L.append(
            "> **SMOKE RUN — not representative.** Two light files, two archs, one "
            "repeat: it checks that the benchmark runs end to end; its numbers say "
            "nothing about the split's speed.\n"
        )
    L.append(f"- date: {meta.get('date')}; command: `{meta.get('command')}`")
    L.append(
        f"- machine: {mach.get('cores')} cores ({mach.get('cpu_model')}), "
        f"{mach.get('memory')}"
        + (f", load average at start {mach['load_at_start']}" if mach.get("load_at_start") else "")
    )
    L.append(
        f"- {meta.get('nvcc_version')}; {meta.get('gcc_version')}"
        + (f"; {meta['bazel_version']}" if meta.get("bazel_version") else "")
    )
    L.append(
        f"- corpus: {count(corpus.get('ggml_files'))} ggml-cuda files "
        f"({corpus.get('ggml_version_dir')}), {count(corpus.get('examples'))} example "
        f"files; heaviest: `{corpus.get('heaviest')}`; CCCL users: "
        f"{count(corpus.get('cccl_sources'))}"
    )
    L.append(
        f"- archs: {','.join(meta.get('archs', []))}; warm rebuild for "
        f"{','.join(meta.get('warm_archs', []))}; pool of {meta.get('jobs')} files "
        f"(make -j{meta.get('jobs')}); nvcc-split -j {meta.get('split_j')} per file "
        + (
            f"on the pool's jobserver ({meta.get('jobs')} slots shared by files and steps)"
            if meta.get("split_jobs") == "jobserver"
            else f"({meta.get('split_jobs')})"
        )
        + split_load_note(meta)
        + f"; nvcc -t {len(meta.get('archs', []))}"
    )
    unequal = unequal_builds(summary["analysis"], meta)
    L.append(
        f"- repeats measured: {'up to ' if unequal else ''}{summary['repeats']['1,3']} "
        f"(scenarios 1, 3), {summary['repeats']['2']} (scenario 2); medians, range in "
        "brackets" + ("; each config's count in scenario 1's notes" if unequal else "")
    )
    if meta.get("bazel_targets"):
        L.append(
            f"- Bazel targets: {' '.join(meta['bazel_targets'])} (the same ggml files "
            "as a cuda_library"
            + (")" if ggml_only(meta) else ", plus the examples' binaries and tests)")
        )
    if meta.get("provenance"):
        L.append(f"- measurements: {meta['provenance']}")
    if meta.get("bazel_skipped"):
        L.append(f"- Bazel: skipped ({meta['bazel_skipped']})")
    if meta.get("shard"):
        i, n = meta["shard"]
        L.append(f"- **shard {i}/{n}** of the corpus only: merge the shards (--merge)")
    if meta.get("shards_merged"):
        L.append(
            f"- shards {', '.join(meta['shards_merged'])} merged: each ran at full "
            "parallelism, one after the other; their wall and CPU seconds are summed"
        )
    if meta.get("merged_from"):
        L.append(f"- merged from: {', '.join(meta['merged_from'])}")
    L.append("")
    return L


def targets_section(a: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The targets' table (analysis.targets), or a line saying none was measured."""
    L = ["## Targets\n"]
    rows = targets(a, meta)
    if rows:
        L.append("| target | measured | verdict |\n|---|---|---|")
        L += [f"| {t} | {m} | {v} |" for t, m, v in rows]
    else:
        L.append("(not measured in this run)")
    L.append("")
    return L


def unequal_builds(a: dict[str, Any], meta: dict[str, Any]) -> bool:
    """Whether a result merged from several runs (--merge) has configs with unequal
    numbers of builds in scenario 1 (the medians' count: a cold build of scenario 3
    counts too), so that the header's repeat count is not every row's."""
    return bool(meta.get("merged_from")) and len({d.get("n") for d in a["s1"].values()}) > 1


def scenario_1(s1: dict[str, Any], meta: dict[str, Any], count_builds: bool = False) -> list[str]:
    """Scenario 1: wall, CPU (and its ratio to plain nvcc's) and peak RSS per config;
    with `count_builds` (`unequal_builds`), each row's number of builds."""
    if not s1:
        return []
    L = ["## 1. Whole corpus, full parallelism\n"]
    L.append(
        "CPU: user+sys of every process tree (wait4); for Bazel, of the actions "
        "(the server's reaped children) plus the client. Peak RSS: the largest "
        "process tree's maximum (not measured under Bazel).\n"
    )
    L.append("| config | wall s | CPU s | CPU ÷ nvcc | peak RSS MiB | notes |")
    L.append("|---|---|---|---|---|---|")
    base = s1.get("nvcc", {}).get("cpu_s", (None,))[0]
    for config, d in s1.items():
        w, wr = d["wall_s"]
        c, cr = d["cpu_s"]
        ratio = f"{c / base:.3f}" if c and base and not config.startswith("bazel") else "—"
        notes = [f"{d['n']} build{'s' if d['n'] != 1 else ''}"] if count_builds else []
        if wr:
            notes.append(f"wall {wr}")
        if d.get("server_cpu_s") is not None:
            notes.append(f"Bazel server {d['server_cpu_s']:.0f} CPU s")
        if d.get("driver_cpu_s") is not None:
            notes.append(f"nvcc-split's own CPU {d['driver_cpu_s']:.1f} s")
        if d.get("tools_cpu_s") is not None:
            notes.append(f"its steps' tools {d['tools_cpu_s']:.1f} s")
        if d.get("critical_path_s") is not None:
            notes.append(f"critical path {d['critical_path_s']:.1f} s")
        if d["failed"]:
            notes.append(f"FAILED: {', '.join(d['failed'][:4])}")
        if d["passthrough"]:
            notes.append(f"not split (ran nvcc): {', '.join(d['passthrough'][:4])}")
        L.append(
            f"| {config} | {fmt(w)} | {fmt(c)} | {ratio} | "
            f"{fmt(d['peak_rss_mib'], 0)} | {'; '.join(notes)} |"
        )
    if any(c.startswith("bazel") for c in s1):
        L.append(
            "\nBazel rows build the same files and their static library (one CppArchive "
            "action) besides."
            if ggml_only(meta)
            else "\nBazel rows build more than the other rows (linking, the examples' test "
            "binaries): compare bazel-mono with bazel-split only."
        )
    L.append("")
    return L


def scenario_2(s2: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Scenario 2: the heaviest file's lower bounds, and each config's wall against them."""
    if not any(k in s2 for k in ("nvcc", "split")):
        return []
    b = s2.get("bound")
    L = [f"## 2. The heaviest file: `{meta.get('corpus', {}).get('heaviest')}`\n"]
    if b:
        L.append(
            f"Lower bound (the issue's formula) = slowest arch's device preprocess + "
            f"cicc + ptxas ({b['slowest_arch']}: "
            f"{b['arch_chains_s'].get(b['slowest_arch'], 0):.1f} s) + host chain "
            f"(host preprocess + cudafe++ + fatbinary + host compile: "
            f"{b['host_chain_s']:.1f} s) = **{b['formula_s']:.1f} s**; the DAG's "
            f"longest path {fmt(b['dag_s'])} s (the host chain runs beside the "
            f"device chains); on {meta.get('jobs')} cores no schedule beats "
            f"{b['cores_s']:.1f} s (the steps' {b['steps_total_s']:.1f} CPU s over "
            f"the cores). Step times: nvcc-split -j 1, medians over repeats.\n"
        )
        L.append(
            "Per-arch chains (s): "
            + ", ".join(f"{k} {v:.1f}" for k, v in b["arch_chains_s"].items())
            + "\n"
        )
    L.append("| config | wall s | CPU s | wall ÷ bound | wall ÷ bound on these cores |")
    L.append("|---|---|---|---|---|")
    for name in ("nvcc", "nvcc-t", "split", "split-j1"):
        if name not in s2:
            continue
        w, wr = s2[name]["wall_s"]
        c, _ = s2[name]["cpu_s"]
        r1 = f"{w / b['formula_s']:.2f}" if b and w and b["formula_s"] else "—"
        r2 = f"{w / b['cores_s']:.2f}" if b and w and b["cores_s"] else "—"
        label = {
            "nvcc-t": f"nvcc -t {len(meta.get('archs', []))}",
            "split": f"nvcc-split -j {meta.get('jobs')}",
            "split-j1": "nvcc-split -j 1",
        }.get(name, name)
        L.append(f"| {label} | {fmt(w)}{f' ({wr})' if wr else ''} | {fmt(c)} | {r1} | {r2} |")
    L.append("")
    return L


def scenario_3(s3: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Scenario 3: what each cache is, the cold, warm and incremental builds' table, then
    the notes on what hit and why steps missed."""
    if not s3:
        return []
    L = [
        f"## 3. Cache: cold for {','.join(meta.get('archs', []))}, then "
        f"{','.join(meta.get('warm_archs', []))} only\n"
    ]
    L.append(
        "- split: nvcc-split's local cache (`--cache-dir`), hits per step from its "
        "`--table`; per-arch steps = device preprocess, cicc, ptxas."
    )
    L.append(
        "- mono-cache: plain nvcc behind a whole-command cache keyed like ccache's "
        "preprocessor mode (the command without -o + the digest of `nvcc -E`); its "
        "'steps' are whole files. Another arch set is another command: 0 hits by "
        "construction."
    )
    if any(c.startswith("bazel") for c in s3):
        L.append(
            "- bazel-*: `--disk_cache`, a fresh one per repeat; the warm build follows "
            "`bazel clean`; hits = spawns the execution log marks as remote cache hits."
        )
    L.append(
        "- incremental: a comment appended to the heaviest file, that file rebuilt "
        "for all archs with the cache of the cold build (Bazel: the whole target "
        "set, no clean). Steps: nvcc-split's cached steps (the host compile always "
        "runs besides); mono-cache: whole files; Bazel: spawns in the execution "
        "log (actions its action cache skipped, as their inputs did not change, "
        "are not there).\n"
    )
    L += cache_table(s3)
    L += cache_notes(s3, meta.get("corpus", {}))
    L.append("")
    return L


def cache_table(s3: dict[str, Any]) -> list[str]:
    """Scenario 3's table: one row per config."""
    L = [
        "| config | cold wall s | warm wall s | warm ÷ cold | per-arch hits | "
        "per-arch hits, non-CCCL | all cached steps | incremental wall s | "
        "incremental steps |"
    ]
    L.append("|---|---|---|---|---|---|---|---|---|")
    for config, row in s3.items():
        cold, warm, inc = row.get("cold", {}), row.get("warm", {}), row.get("incremental", {})
        cw, ww = cold.get("wall_s"), warm.get("wall_s")
        ratio = f"{100 * ww / cw:.0f} %" if cw and ww else "—"
        L.append(
            f"| {config} | {fmt(cw)} | {fmt(ww)} | {ratio} | {hits(warm, 'per_arch')} | "
            f"{hits(warm, 'per_arch_non_cccl')} | {hits(warm, 'cached')} | "
            f"{fmt(inc.get('wall_s'))} | {ran(inc)} |"
        )
    return L


def ran(d: dict[str, Any]) -> str:
    """A phase's cached steps: how many hit and how many ran."""
    if "cached" not in d:
        return "—"
    h, n = d["cached"]
    return f"{h} hit, {n - h} ran"


def hits(d: dict[str, Any], key: str) -> str:
    """A phase's hit rate of `key`'s steps: hits/all (percent)."""
    if key not in d:
        return "—"
    h, n = d[key]
    return f"{h}/{n} ({pct(h, n)})" if n else "0/0"


def cache_notes(s3: dict[str, Any], corpus: dict[str, Any]) -> list[str]:
    """Below scenario 3's table: the sources that read __CUDA_ARCH_LIST__, the warm
    builds' steps by kind, why nvcc-split's steps missed, and Bazel's spawns."""
    L: list[str] = []
    al = count(corpus.get("arch_list_sources"))
    if al:
        L.append(
            f"\n{al} of the {n_sources(corpus)} sources read `__CUDA_ARCH_LIST__` (nvcc "
            "defines it as the build's archs; CCCL's headers and ggml's common.cuh "
            "use it): their device preprocessed text changes with the arch set, so "
            "under nvcc's own semantics their device preprocess and cicc cannot hit "
            "across arch sets; ptxas can, where the PTX comes out the same."
        )
    for config in ("split", "mono-cache"):
        bk = s3.get(config, {}).get("warm", {}).get("by_kind")
        if bk:
            L.append(
                f"\n{config} warm build, steps by kind: "
                + ", ".join(
                    f"{k} {v.get('hit', 0)} hit/{sum(v.values()) - v.get('hit', 0)} not"
                    for k, v in bk.items()
                )
            )
    for config in ("split",):
        for phase in ("warm", "incremental"):
            misses = s3.get(config, {}).get(phase, {}).get("explain") or []
            if misses:
                L.append(
                    f"\nWhy {config}'s cached steps missed ({phase}; "
                    "`nvcc-split --explain`, last repeat):\n"
                )
                L.append("| step | reason | count | example |\n|---|---|---|---|")
                for x in misses[:EXPLAIN_ROWS]:
                    ex = x["example"].replace("|", "\\|")
                    L.append(f"| {x['kind']} | {x['reason']} | {x['count']} | `{ex}` |")
    for config in ("bazel-split", "bazel-mono"):
        sp = s3.get(config, {}).get("warm", {}).get("spawns")
        if sp:
            L.append(
                f"\n{config} warm build, spawns by mnemonic: "
                + ", ".join(
                    f"{k} {v.get('hit', 0)} hit/{v.get('run', 0)} run" for k, v in sp.items()
                )
            )
    return L


def overhead(s1: dict[str, Any], s2: dict[str, Any], files: int) -> list[str]:
    """Section 4: nvcc-split's CPU over plain nvcc's, the corpus's (scenario 1) and the
    heaviest file's (scenario 2)."""
    if not ("split" in s1 and "nvcc" in s1 and s1["nvcc"]["cpu_s"][0]):
        return []
    c, n = s1["split"]["cpu_s"][0], s1["nvcc"]["cpu_s"][0]
    L = ["## 4. Overhead\n"]
    L.append(
        f"Total CPU of nvcc-split ÷ plain nvcc (scenario 1, cold cache, so it "
        f"includes hashing and storing every step): **{c / n:.3f}** "
        f"({c - n:+.1f} CPU s over {files} files). "
        "It adds nvcc's `--dryrun` per file, a Python driver, and cache keys and "
        "writes; the host compile is not cached.\n"
    )
    if "split-j1" in s2 and "nvcc" in s2:
        c1, n1 = s2["split-j1"]["cpu_s"][0], s2["nvcc"]["cpu_s"][0]
        if c1 and n1:
            L.append(
                f"On the heaviest file alone (scenario 2, no cache): nvcc-split -j 1 "
                f"CPU ÷ nvcc CPU = {c1 / n1:.3f}.\n"
            )
    return L


def render_png(results: dict[str, Any], path: pathlib.Path) -> str:
    """The bar charts of a result, full or its summary; an empty string when written,
    else why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "not written: matplotlib is not installed (`python3 -m pip install matplotlib`)"
    a = summarize(results)["analysis"]
    meta = results.get("meta", {})
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    title = f"{meta.get('label')} — {meta.get('machine', {}).get('cores')} cores"
    if meta.get("smoke"):
        title += " — SMOKE RUN, not representative"
    fig.suptitle(title)
    ax = axes[0]
    names = list(a["s1"])
    if names:
        x = range(len(names))
        walls = [a["s1"][n]["wall_s"][0] or 0 for n in names]
        cpus = [a["s1"][n]["cpu_s"][0] or 0 for n in names]
        ax.bar([i - 0.2 for i in x], walls, 0.4, label="wall s")
        ax.bar([i + 0.2 for i in x], cpus, 0.4, label="CPU s")
        ax.set_xticks(list(x), names, rotation=20)
        ax.set_ylabel("seconds")
        ax.set_title("1. whole corpus, full parallelism")
        ax.legend()
    ax = axes[1]
    s2 = [n for n in ("nvcc", "nvcc-t", "split", "split-j1") if n in a["s2"]]
    if s2:
        ax.bar(s2, [a["s2"][n]["wall_s"][0] or 0 for n in s2])
        b = a["s2"].get("bound")
        if b:
            ax.axhline(b["formula_s"], color="red", linestyle="--", label="lower bound")
            ax.axhline(b["cores_s"], color="gray", linestyle=":", label="bound on these cores")
            ax.legend(loc="lower right")
        ax.set_ylabel("wall s")
        ax.set_title("2. heaviest file")
    ax = axes[2]
    s3 = list(a["s3"])
    if s3:
        x = range(len(s3))
        for off, phase in ((-0.27, "cold"), (0, "warm"), (0.27, "incremental")):
            ax.bar(
                [i + off for i in x],
                [a["s3"][c].get(phase, {}).get("wall_s") or 0 for c in s3],
                0.27,
                label=phase,
            )
        ax.set_xticks(list(x), s3, rotation=20)
        ax.set_ylabel("wall s")
        ax.set_title(f"3. cache: cold, warm ({','.join(meta.get('warm_archs', []))}), edit")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return ""


def save(out: pathlib.Path, label: str, results: dict[str, Any], chart: bool = False) -> str:
    """Write `out`/raw/<label>/<label>.json (every measurement, where load_full looks:
    --raw-dir does not move it), `out`/<label>.json (the summary) and .md, and with
    `chart` the .png; returns why the chart was not written, or ''."""
    note = ""
    if chart:
        note = render_png(results, out / f"{label}.png")
        if note:
            results["meta"]["png"] = note
    raw = raw_path(out / f"{label}.json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(results, indent=1) + "\n")
    summary = summarize(results)
    store_lists(out, corpus_lists(results.get("meta", {})))
    (out / f"{label}.json").write_text(dumps(summary) + "\n")
    (out / f"{label}.md").write_text(render_markdown(summary))
    return note
