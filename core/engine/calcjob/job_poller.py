"""One scheduler query per poll interval for all jobs of one (computer, user): those whose
processes wait live for the next update, and the dehydrated ones (``JobSleep``), which the
poller wakes when their job changes (see ``veglia.engine.dehydration``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Protocol

from veglia.engine.dehydration import JobSleep, Sleeps, Wake
from veglia.engine.metrics import METRICS
from veglia.engine.transport_queue import TransportLender
from veglia.plugin_manager import call_each, has_implementations
from veglia.schedulers import JobInfo

if TYPE_CHECKING:
    from veglia.orm.computers import Computer

__all__ = ["JobPoller", "PollingRunner", "computer_contacted"]

logger = logging.getLogger(__name__)


class PollingRunner(TransportLender, Protocol):
    """What a poller asks of the engine's runner: transports, its worker's sleeping
    processes (None outside a daemon worker), and how many failed polls a job bears."""

    sleeps: Sleeps | None

    @property
    def retry_attempts(self) -> int: ...


class JobPoller:
    """Tasks ask for the next update of their job; the poller asks the scheduler once for all.

    The poll interval is the larger of the profile's ``engine.poll_interval`` and the
    computer's ``minimum_poll_interval``.
    """

    def __init__(self, runner: PollingRunner, computer: Computer, interval: float) -> None:
        self.runner = runner
        self.computer = computer
        self.interval = interval
        self._waiters: dict[str, list[asyncio.Future[Any]]] = defaultdict(list)
        #: Dehydrated jobs by job id, polled with the others.
        self._sleepers: dict[str, JobSleep] = {}
        #: Polls that failed in a row: sleepers are woken to count them once they are many.
        self._failures = 0
        self._task: asyncio.Task[Any] | None = None
        self._last_poll = float("-inf")
        self._listeners: list[Any] = []
        #: When the last poll's answers were handed to the jobs, and when the last of their
        #: monitor cycles ended: the bench's cycle time, counted at the next poll.
        self.delivered_at = 0.0
        self.monitors_done_at = 0.0

    async def next_update(self, job_id: str) -> JobInfo | None:
        """The job's info from the next poll; None when the scheduler no longer knows it."""
        future = asyncio.get_running_loop().create_future()
        self._waiters[job_id].append(future)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._poll_loop())
        result: JobInfo | None = await future
        return result

    def sleep(self, sleep: JobSleep) -> None:
        """Poll ``sleep``'s job with the others, and wake its process when it changes."""
        sleep.keeper = self
        self._sleepers[sleep.job_id] = sleep
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._poll_loop())

    def forget(self, sleep: JobSleep) -> None:
        """Stop polling a sleeping job (its process was woken by something else)."""
        if self._sleepers.get(sleep.job_id) is sleep:
            del self._sleepers[sleep.job_id]

    @property
    def sleeping(self) -> int:
        return len(self._sleepers)

    async def _poll_loop(self) -> None:
        while self._waiters or self._sleepers:
            wait = self._last_poll + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            waiters, self._waiters = self._waiters, defaultdict(list)
            waiters = {k: [f for f in v if not f.done()] for k, v in waiters.items()}
            waiters = {k: v for k, v in waiters.items() if v}
            if not waiters and not self._sleepers:
                continue
            self._last_poll = time.monotonic()
            try:
                infos = await self._query(sorted(waiters.keys() | self._sleepers.keys()))
            except Exception as exc:  # delivered to every waiting task, which backs off
                for futures in waiters.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(exc)
                self._sleepers_failed(exc)
                continue
            self._failures = 0
            self._wake_changed(infos)
            if self.monitors_done_at > self.delivered_at > 0:
                METRICS.monitor_cycles += 1
                METRICS.monitor_cycle_seconds += self.monitors_done_at - self.delivered_at
            self.delivered_at = time.monotonic()
            for job_id, futures in waiters.items():
                for future in futures:
                    if not future.done():
                        future.set_result(infos.get(job_id))

    def _wake_changed(self, infos: dict[str, JobInfo]) -> None:
        """Wake the sleeping jobs this poll found changed or gone, or whose time came."""
        sleeps = self.runner.sleeps
        now = time.monotonic()
        woken = []
        for job_id, sleep in self._sleepers.items():
            info = infos.get(job_id)
            if info is None or info.state.value != sleep.state or now >= sleep.wake_at:
                woken.append((sleep, info))
        for sleep, info in woken:
            del self._sleepers[sleep.job_id]
            if sleeps is not None:
                sleeps.wake(sleep.pk, Wake(polled=True, info=info))

    def _sleepers_failed(self, exc: Exception) -> None:
        """A poll failed: sleeping jobs bear it quietly until as many polls failed in a row
        as a live job bears (``transport.retry_attempts``); then each is woken to count it
        as its own, and is paused as unreachable as a live job would be."""
        self._failures += 1
        attempts = self.runner.retry_attempts
        sleeps = self.runner.sleeps
        if self._failures < attempts or sleeps is None:
            return
        sleepers, self._sleepers = self._sleepers, {}
        for sleep in sleepers.values():
            sleeps.wake(sleep.pk, Wake(error=exc, failures=attempts - 1))

    async def _query(self, job_ids: list[str]) -> dict[str, JobInfo]:
        scheduler = self.computer.get_scheduler()
        async with self.runner.lease_transport(self.computer) as lease:
            METRICS.scheduler_queries += 1
            infos = await lease.run(scheduler.get_jobs, lease.transport, job_ids)
            await lease.run(computer_contacted, self.computer, lease.transport)
            result: dict[str, JobInfo] = infos
            return result


def computer_contacted(computer: Computer, transport: Any) -> None:
    """The plugins' ``computer_contacted``, on the connection's thread; their errors logged."""
    if not has_implementations("computer_contacted"):
        return
    for plugin, exc in call_each("computer_contacted", computer=computer, transport=transport):
        logger.warning("plugin %s failed on computer %s: %s", plugin, computer.label, exc)
