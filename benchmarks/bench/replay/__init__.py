"""Replay an nvcc-split build's trace as the slot pool would schedule it, by another rule.

    python3 benchmarks/run.py replay TRACE.jsonl [TRACE.jsonl ...] [--cores 16]
        [--workers N --overhead S|traced --files-at-once J]   # a remote build on N workers
        [--trace-workers M] [--shared-host THROUGHPUT.json]   # (see "Remote traces")
        [--stretch-scale C]

run.py's own runs write their traces to results/raw/<label>/traces/ (not committed).

A build's `--trace` (one JSON line per step: its process, source, kind, arch, start, end,
and, where the trace has them, its index, deps and the bytes it wrote) holds every step's measured
duration. The replay runs the same steps again on `--cores` slots, in simulated time: each
file's process arrives when its first step started, a step starts once its deps are done
and a slot is free, and takes the seconds it took. Free slots go as the pool gives them
(`cuda_split.driver.slots`): to the waiting step with the longest remaining chain across the
processes. The rules replayed:

    pid    nvcc-split's: chains of each process's `slots.Estimates` (the defaults, what
           its own steps have run, the other processes' medians, the sizes written), ties
           to the lower pid
    held   the same chains, ties to the process holding fewer slots, then the lower pid
           (every file gets a step running early; tried, and worse than pid on most
           traces)
    ready  an oracle for what a build can learn as it goes: a step ranks by the seconds
           it took as soon as it can start (its deps are done), the steps after it by
           the pool's estimates; as if every cicc's weight were known when its file's
           preprocess ends, and every ptxas and host step's from the files before it.
           What no rule without earlier durations can beat by much
    known  every step ranked by the seconds it took (`slots.chains`' `known`), as when
           the cache's durations of an earlier build that took the same are there

Prints the replayed wall of each rule against the trace's own and the bound (the steps'
seconds ÷ cores, or the longest file's critical path if longer): what a rule would have
bought on that build, without a machine to run it.

Remote traces. In a `--remote-exec` build's trace a remote step's seconds are the
client's: the upload, the backend's queue and the run on a worker. Replayed on fewer
workers than it had, its queue would be counted twice. nvcc-split writes
each remote step's seconds on its worker (`worker_s`, from the result's metadata), and the
replay takes those; the rest of its client seconds, the upload, the backend's dispatch and
the download, hold no worker and come back with `--overhead traced` (per kind, the median
over the traces; about 1 s a step on issue 31's machine; with `--trace-workers M`, over
the steps sent while at most M remote steps were under way, which cannot have queued). For
traces without them, `--trace-workers M` (the workers the trace's backend had) takes each
remote step's run back out, as a first-come first-served backend of M workers ran it: a
step reaches a worker when it was sent or when the worker that ran the earliest-ending
step before it became free, whichever is later (issue 31: at 8 workers the steps' client
seconds were 6.3 times their runs). Workers of one machine also slow each other down (at
45 remote steps at once each took 1.33 times its seconds at 8), and the client's steps by
as much where the client is on that machine too (its 2 cores' steps took 268 s at 60
workers, 204 s at 8). `--shared-host` takes `throughput.py`'s measurement of that machine
(a compile's wall at k copies ÷ its wall alone), divides each step's seconds by the
stretch at the number of steps under way around it in the trace and multiplies them by the
stretch at the number under way when it starts in the replay. Workers of their own
machines (a build farm) need neither. The probe's copies of one cicc-heavy compile slow
each other about twice as much as a build's mixed steps do: `--stretch-scale` scales the
slowdown (issue 31's whole-backend builds at 8-60 workers fit 0.55, `fit_scale`).

Traces written before the deps were recorded get them from the kinds (nvcc 13's plan:
cudafe++ after the host preprocess, cicc after its arch's device preprocess and cudafe++'s
module id, ptxas after its arch's cicc, fatbinary after every ptxas and cicc, the host
compile last); without sizes, the host side ranks by the defaults.

The package, by concern: `records` reads the traces, `remote` models the backend (the
workers' runs, round trips, a shared machine's stretch), `load` groups the steps into
processes, `policies` holds the rules as data, `schedule` replays them, `cli` is
`run.py replay`.
"""

# The package's names, as run.py, the scenarios and the tests use them.
from .cli import main  # noqa: F401
from .load import Process, Step, critical_path, load, longest_path  # noqa: F401
from .policies import POLICIES, RULES, Policy  # noqa: F401
from .records import driver_cpu, measured, steps_of, tools_cpu  # noqa: F401
from .remote import REMOTE_KINDS, Stretch, fit_scale, remote_kinds_of, remote_runs, round_trips  # noqa: F401
from .schedule import _median_without, replay  # noqa: F401
