"""The rules a replay schedules by, as data: each ranks a waiting step by its chain (the
seconds of the longest path from it to its process's end, `slots.chains`) and breaks ties
its own way; they differ in which seconds the chain is made of (the package docstring says
what each stands for)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .load import Process


@dataclass(frozen=True)
class Policy:
    name: str
    # What breaks a tie between two processes' best steps of equal chain (the lower
    # first): read when a slot is given, so it sees the steps started before.
    ties: Callable[[Process], tuple]
    # The seconds the chains take as known, from each step's measured seconds (`known`):
    # None, every step's the pool's estimate.
    known: Callable[[Process, dict[int, float]], dict[int, float] | None]

    def order(self, chain: float, proc: Process) -> tuple:
        """The key a process's best waiting step (of chain `chain`) ranks by: the longest
        chain first, to the millisecond, then `ties`."""
        return (-round(chain * 1000), *self.ties(proc))


def _estimated(proc: Process, known: dict[int, float]) -> None:
    return None


def _once_ready(proc: Process, known: dict[int, float]) -> dict[int, float]:
    return {i: t for i, t in known.items() if proc.steps[i].deps <= proc.done}


def _all_known(proc: Process, known: dict[int, float]) -> dict[int, float]:
    return known


POLICIES: dict[str, Policy] = {
    policy.name: policy
    for policy in (
        Policy("pid", ties=lambda p: (p.pid,), known=_estimated),
        Policy("held", ties=lambda p: (len(p.running), p.pid), known=_estimated),
        Policy("ready", ties=lambda p: (p.pid,), known=_once_ready),
        Policy("known", ties=lambda p: (p.pid,), known=_all_known),
    )
}
RULES = tuple(POLICIES)
