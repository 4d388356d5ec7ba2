"""How far a workflow has got: its steps by outcome, and an estimate of the time left
from the durations of similar finished processes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from veglia.engine.calcjob.history import similar_durations, similar_durations_of
from veglia.orm.process_nodes import ProcessNode
from veglia.storage.times import as_utc, format_seconds

# format_seconds lives with the times, so that commands without the engine (pipeline show)
# write durations alike; it stays importable from here.
__all__ = ["ESTIMATE_SAMPLES", "Progress", "Step", "format_seconds", "step_of", "workflow_progress"]

#: The latest similar runs an estimate averages: enough for a mean, and a running step's
#: history is read for each kind of step at each look (a live web page: every second).
ESTIMATE_SAMPLES = 100


@dataclass(frozen=True)
class Progress:
    done: int
    running: int
    failed: int
    elapsed: float
    #: Seconds left, and what the estimate rests on; None when there is no estimate, and
    #: ``basis`` then says why.
    remaining: float | None = None
    basis: str = ""

    @property
    def summary(self) -> str:
        return f"{self.done} done, {self.running} running, {self.failed} failed"

    @property
    def elapsed_text(self) -> str:
        return format_seconds(self.elapsed)


@dataclass(frozen=True)
class Step:
    """What the estimate needs of a step; a list query gives it for a whole workflow
    without loading each step as a node (see :func:`step_of`)."""

    pk: int
    process_type: str | None
    similarity_key: str | None
    is_terminated: bool
    is_finished_ok: bool
    ctime: datetime | None
    mtime: datetime | None


def step_of(node: ProcessNode) -> Step:
    return Step(
        node.pk,
        node.process_type,
        node.similarity_key,
        node.is_terminated,
        node.is_finished_ok,
        node.ctime,
        node.mtime,
    )


def _elapsed(node: ProcessNode | Step, now: datetime) -> float:
    start = as_utc(node.ctime) if node.ctime else now
    end = as_utc(node.mtime) if node.is_terminated and node.mtime else now
    return max(0.0, (end - start).total_seconds())


def workflow_progress(node: ProcessNode, steps: Sequence[Step] | None = None) -> Progress:
    """Steps (the processes the workflow called, or ``steps`` when the caller read them
    already) and the time left.

    The estimate is the longer of: the mean duration of similar finished workflows minus
    the time this one has run (0 once it has run longer: overdue), and, for each running
    step, the mean duration of processes like it minus the time it has run. A step that has
    run longer than those says nothing of the time left, so a workflow without finished
    runs like it of its own has no estimate then, rather than one of 0 s.
    """

    now = datetime.now(timezone.utc)
    children = [step_of(child) for child in node.called] if steps is None else steps
    done = sum(1 for c in children if c.is_finished_ok)
    running = sum(1 for c in children if not c.is_terminated)
    failed = len(children) - done - running
    elapsed = _elapsed(node, now)
    if node.is_terminated:
        return Progress(done, running, failed, elapsed)
    estimates: list[tuple[float, str]] = []
    past: list[int] = []
    history = similar_durations(node.process_type, node.similarity_key, ESTIMATE_SAMPLES)
    if history is not None:
        estimates.append(
            (max(0.0, history.mean - elapsed), f"{history.count} similar finished runs")
        )
    # One query for all kinds of running step, not one per step: a workflow runs many alike.
    running_kinds = [(c.process_type, c.similarity_key) for c in children if not c.is_terminated]
    history_of = similar_durations_of(running_kinds, ESTIMATE_SAMPLES)
    for child in children:
        if child.is_terminated:
            continue
        kind_history = history_of[(child.process_type, child.similarity_key)]
        if kind_history is None:
            continue
        left = kind_history.mean - _elapsed(child, now)
        if left > 0:
            estimates.append((left, f"{kind_history.count} finished steps like process {child.pk}"))
        else:
            past.append(child.pk)
    if not estimates:
        why = (
            f"process {', '.join(map(str, past))} has run longer than similar finished steps"
            if past
            else "nothing similar has finished"
        )
        return Progress(done, running, failed, elapsed, basis=why)
    remaining, basis = max(estimates)
    return Progress(done, running, failed, elapsed, remaining, basis)
