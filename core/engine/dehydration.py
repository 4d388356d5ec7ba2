"""Waiting processes kept in the database, not in a daemon worker's memory.

A calc job waiting on its scheduler with nothing to do before the next poll, a workflow
waiting on its children, and a paused process leave their worker's memory: the process
raises :class:`~veglia.exceptions.ProcessDehydrated` (between two polls, or once its pause
is checkpointed), and the worker drops it.
Its checkpoint is its state and its lease stays held (renewed with the worker's others), so
nothing changes for the reconciler, fencing or another worker. What the worker keeps is a
:class:`JobSleep` in the poller of the job's computer, or a :class:`ChildrenSleep` in the
child watcher, or a :class:`PausedSleep` that nothing watches: a few hundred bytes where a
live process took about 25 kB. Paused processes would otherwise each hold one of the
worker's ``daemon.worker_prefetch`` slots for as long as nobody plays them.

A sleeping process is rehydrated (loaded again from its checkpoint) only when something
happens to it: the poll reports a change of its job (or that it is gone), something it must
do falls due (``JobSleep.wake_at``: a queue move's deadline, its live trace's next write),
the polls of its computer keep failing, its children end, or a kill, pause or play comes
for it (the only thing that wakes a paused one). What woke it (:class:`Wake`) is handed to
it, so it goes on with that poll's answer rather than waiting for the next one.

Outside a daemon worker (``engine.run``) there is no :class:`Sleeps` and nothing sleeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from veglia.orm.attributes import UNREACHABLE

if TYPE_CHECKING:
    from veglia.orm.process_nodes import ProcessNode
    from veglia.schedulers import JobInfo

__all__ = ["ChildrenSleep", "JobSleep", "PausedSleep", "Sleep", "SleepKeeper", "Sleeps", "Wake"]


class SleepKeeper(Protocol):
    """Where a sleeping process is watched from: its computer's poller, or the child
    watcher. It wakes the process through ``Sleeps.wake`` when its time comes."""

    def forget(self, sleep: Any) -> None:
        """Stop watching ``sleep`` (its process was woken by something else)."""
        ...


@dataclass(slots=True)
class JobSleep:
    """A dehydrated calc job, as its computer's poller keeps it."""

    pk: int
    job_id: str
    #: The scheduler state it last wrote (a ``JobState`` value): a poll saying another wakes it.
    state: str
    #: time.monotonic() at which it is woken whatever the polls say; ``math.inf`` for never.
    wake_at: float = math.inf
    #: Its computer's poller (set by ``JobPoller.sleep``).
    keeper: SleepKeeper | None = None


@dataclass(slots=True)
class ChildrenSleep:
    """A dehydrated workflow, as the child watcher keeps it: woken once all have ended."""

    pk: int
    children: tuple[int, ...]
    #: The child watcher (set by ``ChildWatcher.sleep``).
    keeper: SleepKeeper | None = None


@dataclass(slots=True)
class PausedSleep:
    """A dehydrated paused process: nothing watches it, only a kill, pause or play wakes it
    (``Worker.awake``). Its checkpoint, written when the pause took effect, says paused."""

    pk: int
    keeper: SleepKeeper | None = None

    @staticmethod
    def of(node: ProcessNode) -> PausedSleep | None:
        """The sleep of the process of ``node`` if it waits paused for a person (a pause, or
        a block waiting for its unblock); None otherwise. One paused for an outage stays
        live: its worker probes the computer and plays it (``daemon.outages``)."""
        if node.paused and not node.get_attribute(UNREACHABLE):
            return PausedSleep(node.pk)
        return None


Sleep = JobSleep | ChildrenSleep | PausedSleep


@dataclass(slots=True)
class Wake:
    """What woke a process, handed to it once it is live again (``Sleeps.take_wake``)."""

    #: Whether a poll answered for its job; then ``info`` is its answer (None: gone).
    polled: bool = False
    info: JobInfo | None = None
    #: The poll failed (``failures`` times in a row): the job counts them as its own.
    error: Exception | None = None
    failures: int = 0


#: How many dehydrated jobs a worker may wake each second for their live traces alone: past
#: that, the traces of running jobs are read less often than every ``WRITE_INTERVAL``.
TRACE_WAKES_PER_SECOND = 100.0


class Sleeps:
    """A daemon worker's dehydrated processes (``Runner.sleeps``; None outside a worker).

    ``rehydrate(pk, urgent)`` is the worker's: it loads the process again and steps it, at
    once when ``urgent`` (someone waits for it), else in turn with the others woken.
    """

    def __init__(self, rehydrate: Callable[[int, bool], None]) -> None:
        self.sleeping: dict[int, Sleep] = {}
        self._rehydrate = rehydrate
        self._wakes: dict[int, Wake] = {}
        #: Processes kept awake (a kill, pause or play being delivered), with how many ask.
        self._awake: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.sleeping)

    def __contains__(self, pk: object) -> bool:
        return pk in self.sleeping

    def add(self, sleep: Sleep) -> None:
        self.sleeping[sleep.pk] = sleep

    def wake(self, pk: int, wake: Wake, *, urgent: bool = False) -> bool:
        """Rehydrate process ``pk`` if it sleeps here, handing it ``wake``; whether it slept.
        Its keeper stops watching it."""
        sleep = self.sleeping.pop(pk, None)
        if sleep is None:
            return False
        if sleep.keeper is not None:
            sleep.keeper.forget(sleep)
        self._wakes[pk] = wake
        self._rehydrate(pk, urgent)
        return True

    def keep_awake(self, pk: int) -> None:
        """Process ``pk`` may not dehydrate until ``let_sleep``: something is delivered to it."""
        self._awake[pk] = self._awake.get(pk, 0) + 1

    def let_sleep(self, pk: int) -> None:
        count = self._awake.pop(pk, 1) - 1
        if count:
            self._awake[pk] = count

    def may_sleep(self, pk: int) -> bool:
        return pk not in self._awake

    def take_wake(self, pk: int) -> Wake | None:
        """What woke process ``pk``, once: the rehydrated process asks at its first step."""
        return self._wakes.pop(pk, None)

    def trace_interval(self, write_interval: float) -> float:
        """Seconds a dehydrated running job sleeps before its live trace is read again:
        ``write_interval``, or longer when so many sleep that waking each as often would
        pass ``TRACE_WAKES_PER_SECOND``."""
        return max(write_interval, len(self.sleeping) / TRACE_WAKES_PER_SECOND)
