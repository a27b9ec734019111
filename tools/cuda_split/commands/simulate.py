"""`cuda-split simulate`: replay a Bazel build's action graph on N workers.

The graph comes from an execution log (`--execution_log_json_file`: each spawn's inputs
and outputs; an action depends on the actions that wrote its inputs) or from `bazel
aquery --output=jsonproto` (every action of the targets, run or not). The durations
come from the log itself where it has them (`walltime` of Bazel 5 and 6, `metrics` of
Bazel 7), else from a
`--profile` trace of the same build (a log without them; the trace's "action
processing" events are matched to spawns by progress message, in order). Actions of an
aquery graph that were not measured take the median duration of measured actions of the
same mnemonic and arch (`--arch`), else of the same mnemonic.

The replay is a list scheduler: whenever a worker is free it starts a ready action,
by `--order`:
  fifo           (default) the action that has waited longest, ties in the order the
                 logged build handed them over (execlog.spawn_queued: Bazel 7's
                 `startTime` less the spawn's queue and input fetch; else the log's
                 order): what Bazel and a FIFO backend such as BuildGrid do, Bazel
                 handing over every ready action at once with `--jobs` high
  critical-path  the ready action with the longest chain still behind it, what an ideal
                 backend with enough queue depth would do: a bound, not a prediction
An action holds its worker for its run and, where Bazel 7's log has them, the worker's
input fetch and output upload (execlog.spawn_seconds). It assumes no other per-action
cost (add `--overhead-ms` for the client's side of a remote round trip). It prints, per
worker count, the projected wall, the critical path (the wall with unlimited workers)
and the total work.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import json
import statistics
import sys
from collections.abc import Iterable, Sequence

from cuda_split.commands.execlog import read_log, read_text, spawn_queued, spawn_seconds

PROG = "cuda-split simulate"
ORDERS = ("fifo", "critical-path")


@dataclasses.dataclass
class Action:
    key: str  # the first output's path
    mnemonic: str
    progress: str
    inputs: list[str]
    outputs: list[str]
    seconds: float | None = None
    arch: str = ""
    queued: float | None = None  # when the logged build handed it over (seconds since the epoch)


@dataclasses.dataclass(frozen=True)
class Projection:
    workers: int
    wall: float
    critical_path: float
    work: float

    @property
    def utilisation(self) -> float:
        return self.work / (self.wall * self.workers) if self.wall else 0.0


def _arch_of(args: Sequence[str]) -> str:
    for i, a in enumerate(args):
        if a == "--arch" and i + 1 < len(args):
            return args[i + 1]
    return ""


def read_execution_log(path: str) -> list[Action]:
    """The spawns of an execution log (execlog.read_log), with their seconds and start
    where the log has them (execlog.spawn_queued, spawn_seconds)."""
    actions = []
    for spawn in read_log(path):
        outputs = [o["path"] for o in spawn.get("actualOutputs", [])] or list(
            spawn.get("listedOutputs", [])
        )
        if not outputs:
            continue
        actions.append(
            Action(
                key=outputs[0],
                mnemonic=str(spawn.get("mnemonic", "")),
                progress=str(spawn.get("progressMessage", "")),
                inputs=[i["path"] for i in spawn.get("inputs", [])],
                outputs=outputs,
                seconds=spawn_seconds(spawn),
                arch=_arch_of(spawn.get("commandArgs", [])),
                queued=spawn_queued(spawn),
            )
        )
    return actions


def read_aquery(path: str) -> list[Action]:
    """The actions of `bazel aquery --output=jsonproto` (inputs expanded from its
    depset table)."""
    doc = json.loads(read_text(path))
    artifacts = {a["id"]: a for a in doc.get("artifacts", [])}
    fragments = {f["id"]: f for f in doc.get("pathFragments", [])}
    sets = {d["id"]: d for d in doc.get("depSetOfFiles", [])}

    def path_of(artifact_id: int) -> str:
        art = artifacts[artifact_id]
        if "execPath" in art:
            return art["execPath"]
        parts = []
        frag = fragments.get(art.get("pathFragmentId"))
        while frag:
            parts.append(frag["label"])
            frag = fragments.get(frag.get("parentId"))
        return "/".join(reversed(parts))

    memo: dict[int, list[str]] = {}

    def expand(set_id: int) -> list[str]:
        if set_id not in memo:
            d = sets[set_id]
            files = [path_of(a) for a in d.get("directArtifactIds", [])]
            for t in d.get("transitiveDepSetIds", []):
                files += expand(t)
            memo[set_id] = files
        return memo[set_id]

    actions = []
    for a in doc.get("actions", []):
        outputs = [path_of(o) for o in a.get("outputIds", [])]
        if not outputs:
            continue
        inputs = [p for s in a.get("inputDepSetIds", []) for p in expand(s)]
        actions.append(
            Action(
                key=outputs[0],
                mnemonic=a.get("mnemonic", ""),
                progress="",
                inputs=inputs,
                outputs=outputs,
                arch=_arch_of(a.get("arguments", [])),
            )
        )
    return actions


def profile_durations(path: str) -> dict[str, list[float]]:
    """Seconds of each action of a `--profile` trace, by progress message, in start
    order."""
    doc = json.loads(read_text(path))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    found: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "action processing" and e.get("ph") == "X":
            found.setdefault(e["name"], []).append((float(e["ts"]), float(e["dur"]) / 1e6))
    return {name: [d for _, d in sorted(v)] for name, v in found.items()}


def execution_wall(path: str) -> float | None:
    """Seconds from the "Build artifacts" phase marker of a `--profile` trace to "Complete
    build": the measured wall of the build's execution phase."""
    doc = json.loads(read_text(path))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    marks = {
        e["name"]: float(e["ts"])
        for e in events
        if isinstance(e, dict) and e.get("cat") == "build phase marker"
    }
    if "Build artifacts" in marks and "Complete build" in marks:
        return (marks["Complete build"] - marks["Build artifacts"]) / 1e6
    return None


def attach_profile(actions: list[Action], durations: dict[str, list[float]]) -> None:
    """Sets each action's seconds from the trace, matching by progress message; actions
    with the same message take the durations in order."""
    taken: dict[str, int] = {}
    for a in actions:
        if a.seconds is not None:
            continue
        runs = durations.get(a.progress, [])
        i = taken.get(a.progress, 0)
        if i < len(runs):
            a.seconds = runs[i]
            taken[a.progress] = i + 1


def estimate_missing(actions: list[Action], measured: Iterable[Action]) -> int:
    """Gives unmeasured actions the median of measured ones of the same mnemonic and
    arch, else of the same mnemonic, else 0. Returns how many were estimated."""
    by_kind: dict[tuple[str, str], list[float]] = {}
    by_mnemonic: dict[str, list[float]] = {}
    for m in measured:
        if m.seconds is not None:
            by_kind.setdefault((m.mnemonic, m.arch), []).append(m.seconds)
            by_mnemonic.setdefault(m.mnemonic, []).append(m.seconds)
    estimated = 0
    for a in actions:
        if a.seconds is None:
            same = by_kind.get((a.mnemonic, a.arch)) or by_mnemonic.get(a.mnemonic) or [0.0]
            a.seconds = statistics.median(same)
            estimated += 1
    return estimated


def dependencies(actions: Sequence[Action]) -> list[list[int]]:
    """For each action, the indices of the actions that wrote its inputs."""
    writer = {}
    for i, a in enumerate(actions):
        for out in a.outputs:
            writer[out] = i
    deps = []
    for i, a in enumerate(actions):
        deps.append(sorted({writer[p] for p in a.inputs if p in writer and writer[p] != i}))
    return deps


def simulate(
    actions: Sequence[Action], workers: int, overhead: float = 0.0, order: str = "fifo"
) -> Projection:
    """List-schedules `actions` on `workers` in `order` (ORDERS: the module's docstring)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    n = len(actions)
    cost = [(a.seconds or 0.0) + overhead for a in actions]
    deps = dependencies(actions)
    users: list[list[int]] = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    # Longest chain from each action to the end (its "bottom level"), in reverse
    # topological order.
    topo = _topological(deps)
    tail = [0.0] * n
    for i in reversed(topo):
        tail[i] = cost[i] + max((tail[u] for u in users[i]), default=0.0)
    # The logged build's order: those with a time by when it handed them over, then the
    # rest as logged.
    logged = sorted(
        range(n), key=lambda i: (actions[i].queued is None, actions[i].queued or 0.0, i)
    )
    rank = {i: r for r, i in enumerate(logged)}

    def key(i: int, ready_at: float) -> tuple[float, float, int]:
        if order == "critical-path":
            return (-tail[i], 0.0, i)
        return (ready_at, rank[i], i)

    waiting = [len(ds) for ds in deps]
    ready = [key(i, 0.0) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    running: list[tuple[float, int]] = []
    now = 0.0
    idle = workers
    done = 0
    while done < n:
        while ready and idle:
            i = heapq.heappop(ready)[2]
            heapq.heappush(running, (now + cost[i], i))
            idle -= 1
        now, i = heapq.heappop(running)
        idle += 1
        done += 1
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, key(u, now))
    return Projection(workers, now, max(tail, default=0.0), sum(cost))


def _topological(deps: Sequence[Sequence[int]]) -> list[int]:
    n = len(deps)
    users: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(d) for d in deps]
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    order = [i for i in range(n) if waiting[i] == 0]
    for i in order:
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                order.append(u)
    if len(order) != n:
        raise ValueError("the action graph has a cycle")
    return order


def format_table(label: str, projections: Sequence[Projection]) -> str:
    lines = [f"{label}: {len(projections) and projections[0].work:.1f} s of work"]
    lines.append(f"  {'workers':>7}  {'wall (s)':>9}  {'critical path (s)':>17}  {'busy':>5}")
    for p in projections:
        lines.append(
            f"  {p.workers:>7}  {p.wall:>9.1f}  {p.critical_path:>17.1f}  {p.utilisation:>5.0%}"
        )
    return "\n".join(lines)


def _workers(text: str) -> list[int]:
    try:
        counts = [int(w) for w in text.split(",") if w]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers wants N[,N...], got '{text}'") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"--workers wants positive counts, got '{text}'")
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("log", help="execution log (--execution_log_json_file) of the build")
    p.add_argument("--workers", type=_workers, default=[2, 16, 64, 256], help="N[,N...]")
    p.add_argument("--profile", help="--profile trace of the same build (durations)")
    p.add_argument(
        "--aquery",
        help="aquery --output=jsonproto of the targets: replay its graph, with the "
        "durations measured in LOG (unmeasured actions: medians by mnemonic and arch)",
    )
    p.add_argument("--overhead-ms", type=float, default=0.0, help="added to every action")
    p.add_argument(
        "--order",
        choices=ORDERS,
        default="fifo",
        help="which ready action a free worker starts (default fifo: the one waiting "
        "longest, as Bazel and BuildGrid do; critical-path: the longest chain first)",
    )
    p.add_argument("--label", default="", help="name of the build in the output")
    p.add_argument("--json", metavar="FILE", help="also write the projections as JSON")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        measured = read_execution_log(args.log)
        if args.profile:
            attach_profile(measured, profile_durations(args.profile))
        unmeasured = [a for a in measured if a.seconds is None]
        actions = measured
        estimated = 0
        if args.aquery:
            actions = read_aquery(args.aquery)
            known = {a.key: a for a in measured if a.seconds is not None}
            for a in actions:
                if a.key in known:
                    a.seconds, a.queued = known[a.key].seconds, known[a.key].queued
            estimated = estimate_missing(actions, measured)
        elif unmeasured:
            print(
                f"{PROG}: {len(unmeasured)} of {len(measured)} spawns have no duration "
                f"(Bazel 4's log has none: pass --profile); e.g. {unmeasured[0].progress!r}",
                file=sys.stderr,
            )
            return 2
        projections = [
            simulate(actions, w, args.overhead_ms / 1000, args.order) for w in args.workers
        ]
    except (OSError, ValueError, KeyError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    label = args.label or args.log
    if estimated:
        label += f" ({estimated} of {len(actions)} action durations estimated)"
    print(format_table(label, projections))
    measured = execution_wall(args.profile) if args.profile and not args.aquery else None
    if measured:
        print(f"measured: {measured:.1f} s (the profile's execution phase)")
        for pr in projections:
            print(f"  {pr.workers} workers: projection {pr.wall / measured - 1:+.0%} of it")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "label": label,
                    "actions": len(actions),
                    "estimated": estimated,
                    "order": args.order,
                    "projections": [dataclasses.asdict(pr) for pr in projections],
                    "measured_execution_s": measured,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
