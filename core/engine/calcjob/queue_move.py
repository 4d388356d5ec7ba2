"""Moving a job to a queue with a longer time limit before it outlives its own (VRPipe's
use case 12c, issue #33).

- A **pending** job whose similar jobs took longer (mean + 1 SD of their run time, see
  :func:`~veglia.engine.calcjob.history.recommend`) than its queue's wall-time limit is moved
  to the available queue with the shortest limit that fits, with a time limit covering that
  (never less than it asked for, never more than the new queue allows).
- A **running** job past ``MOVE_AT`` of what ends it (its queue's limit, or its own wall-time
  request when that is shorter) whose similar jobs took longer is moved the same way where
  the batch system can move a running job (LSF), and otherwise left alone with a report line.

Each outcome, a move or the reason there was none, is a report line and an entry of the
node's ``queue_moves`` attribute, once per state: a job is never moved twice for the same
reason, and a failed move is not tried again at the next poll. The restart policy
(``core.restart``) still handles a job the batch system killed for its time anyway.

Cheap per poll: the queues are read once per job (the node's, else the computer's, at most
one scheduler command per computer every ``QUEUES_TTL`` seconds), the history once per job
and only where there are queues; in between, a running job's poll compares two numbers.

On by default; off for a computer with ``move_jobs`` set to no, or for one job with the
option ``move_queue = False`` (see docs/pipelines.md, "Moving a job to a longer queue").
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from veglia.engine.calcjob.history import recommend
from veglia.engine.calcjob.queues import choose_queue, queues_from_attribute, queues_of
from veglia.engine.runner import get_runner
from veglia.exceptions import TransportError
from veglia.orm import attributes as attr
from veglia.schedulers import JobInfo, JobState, QueueInfo, SchedulerError

if TYPE_CHECKING:
    from veglia.engine.calcjob.owner import OwningJob
    from veglia.orm.computers import Computer

__all__ = ["MOVE_AT", "QUEUES_TTL", "QueueMoves"]

LOGGER = logging.getLogger("veglia.engine")

#: The share of what ends a running job after which it is moved, when it will need more.
MOVE_AT = 0.8
#: Seconds the queues a scheduler listed are reused for the other jobs of its computer.
QUEUES_TTL = 300.0

_PENDING, _RUNNING = "pending", "running"
#: Queues the scheduler listed, by computer UUID: (monotonic time, queues).
_listed: dict[str, tuple[float, list[QueueInfo]]] = {}


class QueueMoves:
    """A job's queue moves (``CalcJob.runtime.queue_moves``): the states decided (each
    once), and what deciding them read once per process."""

    def __init__(self, job: OwningJob) -> None:
        self.job = job
        #: The states decided, "pending" and "running"; None until the first poll reads them.
        self.decided: set[str] | None = None
        self.expected: tuple[int, int] | None = None  # (seconds, samples)
        self.expected_read = False
        self.queues: list[QueueInfo] | None = None
        self.deadline: float | None = None  # running: the elapsed seconds at which to decide
        self.limit: int | None = None  # running: what ends it
        self.limit_is_request = False

    def _decided(self) -> set[str]:
        if self.decided is None:
            job = self.job
            node = job.node
            assert node is not None
            # After a restart: the states decided before it stay decided.
            done = {entry.get("state") for entry in node.get_attribute(attr.QUEUE_MOVES) or []}
            explicit = job.options.get("move_queue")  # the job's word wins over its computer's
            enabled = explicit if explicit is not None else job.computer.get_property("move_jobs")
            if not enabled:
                done |= {_PENDING, _RUNNING}
            self.decided = done
        return self.decided

    def quiet_for(self, last_job_info: dict[str, Any] | None) -> float:
        """Seconds during which :meth:`consider` has nothing to do for the job as last
        polled (``last_job_info``, the node's attribute): ``math.inf`` when its state is
        decided, 0 when the next poll must look again."""
        if not last_job_info:
            return 0.0
        info = JobInfo.from_attributes(last_job_info)
        state = {JobState.QUEUED: _PENDING, JobState.RUNNING: _RUNNING}.get(info.state)
        if state is None:
            return math.inf
        if self.decided is None:
            return 0.0
        if state in self.decided:
            return math.inf
        node = self.job.node
        elapsed = _elapsed(node, info) if node is not None else None
        if state == _PENDING or self.deadline is None or elapsed is None:
            return 0.0
        return max(0.0, self.deadline - elapsed)

    async def consider(self, info: JobInfo) -> None:
        """At a poll of a job the scheduler still has: move it, or say why not, once per state."""
        if info.state is JobState.QUEUED:
            state = _PENDING
        elif info.state is JobState.RUNNING:
            state = _RUNNING
        else:
            return
        decided = self._decided()
        if state in decided:
            return
        node = self.job.node
        assert node is not None
        options = dict(node.options or {})
        requested = options.get("max_wallclock_seconds")
        # The queues first (the computer's, listed once per QUEUES_TTL): on a computer without
        # any (the direct scheduler's), no job reads its history.
        queues = self.queues
        if queues is None:
            queues = self.queues = await self._queues()
        current = _current(queues, info, options)
        if current is None:
            decided |= {_PENDING, _RUNNING}  # no queues known, or not this one
            return
        if not self.expected_read:
            self.expected_read = True
            advice = recommend(node.get_attribute(attr.SIMILARITY_KEY) or "", exclude_pk=node.pk)
            if advice.wallclock_seconds is not None:
                self.expected = (advice.wallclock_seconds, advice.samples)
        if self.expected is None:
            decided |= {_PENDING, _RUNNING}  # nothing to go by
            return
        expected, samples = self.expected
        took = f"{samples} similar jobs took {expected} s (mean + 1 SD of their run time)"
        if state == _PENDING:
            decided.add(state)
            limit = current.max_wallclock_seconds
            if limit is None or expected <= limit:
                return
            reason = f"{took}, over the {limit} s limit of queue {current.name}"
        else:
            if self.deadline is None:
                limits = [v for v in (requested, current.max_wallclock_seconds) if v]
                if not limits or expected <= min(limits):
                    decided.add(state)
                    return
                self.limit = min(limits)
                self.limit_is_request = self.limit == requested
                self.deadline = MOVE_AT * self.limit
            elapsed = _elapsed(node, info)
            if elapsed is None or elapsed < self.deadline:
                return
            decided.add(state)
            what = (
                "its wall-time request"
                if self.limit_is_request
                else f"the limit of queue {current.name}"
            )
            reason = f"ran {elapsed:.0f} s of the {self.limit} s of {what}, and {took}"
        await self._move(state, current, queues, expected, reason, options)

    async def _move(
        self,
        state: str,
        current: QueueInfo,
        queues: list[QueueInfo],
        expected: int,
        reason: str,
        options: dict[str, Any],
    ) -> None:
        node = self.job.node
        assert node is not None and node.job_id
        requested = options.get("max_wallclock_seconds")
        target = choose_queue(
            queues,
            current.name,
            wallclock_seconds=expected,
            memory_kb=options.get("max_memory_kb") or None,  # 0 is a whole node's: any queue's
            nodes=(options.get("resources") or {}).get("num_machines"),
        )
        entry: dict[str, Any] = {"state": state, "from": current.name, "reason": reason}
        if target is None or target.name == current.name:
            why = (
                "no available queue allows that (with the job's memory and nodes)"
                if target is None
                else "its own queue allows that; veglia does not raise a running job's request"
            )
            line = f"left in queue {current.name}: {reason}; {why}"
            self._record({**entry, "to": None, "moved": False}, line)
            return
        seconds = max(expected, requested or 0)
        if target.max_wallclock_seconds is not None:
            seconds = min(seconds, target.max_wallclock_seconds)
        entry |= {"to": target.name, "wallclock_seconds": seconds}
        running = state == _RUNNING
        computer = self.job.computer
        scheduler = computer.get_scheduler()
        if scheduler.move_command(node.job_id, target.name, seconds, running) is None:
            self._record(
                {**entry, "moved": False},
                f"left in queue {current.name}: {reason}; {computer.scheduler_type} cannot move a "
                f"{state} job to another queue",
            )
            return
        try:
            async with get_runner().lease_transport(computer) as lease:
                await lease.run(
                    scheduler.move, lease.transport, node.job_id, target.name, seconds, running
                )
        except (SchedulerError, TransportError, OSError) as exc:
            self._record(
                {**entry, "moved": False, "error": str(exc)},
                f"could not move the job from queue {current.name} to {target.name}: {exc} "
                f"({reason}); not tried again",
            )
            return
        options |= {"queue_name": target.name, "max_wallclock_seconds": seconds}
        self._record(
            {**entry, "moved": True},
            f"moved from queue {current.name} to {target.name} with a time limit of "
            f"{_shown(seconds)} while {state}: {reason}",
            options,
        )

    def _record(
        self,
        entry: dict[str, Any],
        line: str,
        options: dict[str, Any] | None = None,
    ) -> None:
        node = self.job.node
        assert node is not None
        moves = [*(node.get_attribute(attr.QUEUE_MOVES) or []), {**entry, "time": time.time()}]
        values: dict[str, Any] = {attr.QUEUE_MOVES: moves}
        if options is not None:
            values[attr.OPTIONS] = options
        node.set_attributes(values)
        self.job.report(line)

    async def _queues(self) -> list[QueueInfo]:
        """The node's queues when a restart policy recorded them, else the computer's: declared,
        or listed by the scheduler (reused for ``QUEUES_TTL`` seconds by its other jobs)."""
        node = self.job.node
        assert node is not None
        stored = node.get_attribute(attr.QUEUES)
        if stored:
            return queues_from_attribute(stored)
        computer = self.job.computer
        if computer.get_property("queues"):
            return queues_of(computer, None)
        key = computer.uuid or computer.label
        listed = _listed.get(key)
        if listed is not None and time.monotonic() - listed[0] < QUEUES_TTL:
            return listed[1]
        queues = await _list(computer)
        _listed[key] = (time.monotonic(), queues)
        return queues


def _current(queues: list[QueueInfo], info: JobInfo, options: dict[str, Any]) -> QueueInfo | None:
    """The job's queue: as the scheduler reports it, else as asked, else the default."""
    by_name = {q.name: q for q in queues}
    name = info.queue or options.get("queue_name")
    if name:
        return by_name.get(name)
    return next((q for q in queues if q.default), None)


def _elapsed(node: Any, info: JobInfo) -> float | None:
    """Seconds the job has run: the scheduler's count, else since the engine saw it start."""
    if info.wallclock_seconds is not None:
        return float(info.wallclock_seconds)
    started = node.get_attribute(attr.STARTED_AT)
    return time.time() - started if started else None


def _shown(seconds: int) -> str:
    return f"{seconds} s" if seconds < 120 else f"{seconds} s ({math.ceil(seconds / 60)} min)"


async def _list(computer: Computer) -> list[QueueInfo]:
    try:
        async with get_runner().lease_transport(computer) as lease:
            return await lease.run(queues_of, computer, lease.transport)
    except (TransportError, OSError) as exc:
        LOGGER.debug("could not list the queues of %s: %s", computer.label, exc)
        return queues_of(computer, None)
