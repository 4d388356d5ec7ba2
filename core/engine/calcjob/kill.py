"""Cancelling a calc job's scheduler job, so that a killed process leaves no orphan behind.

A kill never waits for the computer: the process ends KILLED at once, and its node carries a
``cancel_pending`` mark (job id, computer, attempts, last error) in the commit of that end.
The cancel itself runs beside, on the runner's loop and through its pooled transport queue
(the loop never blocks on a transport), tried again with back-off until the computer answers;
then the mark is cleared and the process reports ``cancelled job N``. A daemon's first worker
also looks for marks at its start and every few seconds (:class:`PendingCancelSweeper`): a
job killed while no daemon ran, or whose canceller died, is cancelled once a daemon runs and
the computer answers.

One canceller at a time per job: each attempt is made under the process's lease (the process
has ended, so no worker runs it), and a job the scheduler no longer lists is not cancelled
again.

The process's own part is methods of ``CalcJob``: marking its job when it is killed
(``on_kill``), and the cancel a monitor that stops the job makes from its step
(``cancel_job``, then ``wait_until_job_gone``). Here is what runs beside any one process.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from veglia.engine.daemon import leases
from veglia.engine.runner import Runner
from veglia.exceptions import SchedulerError, TransportError
from veglia.manage import get_profile, get_storage
from veglia.orm import attributes as attr
from veglia.orm.loading import load_node
from veglia.orm.process_nodes import CalcJobNode
from veglia.orm.queries import cancel_pending_pks
from veglia.schedulers import JobState

__all__ = ["PendingCancelSweeper", "cancels_of", "job_active", "owe_cancel"]

LOGGER = logging.getLogger("veglia.engine")
#: The longest wait between two attempts at a pending cancel (the computer is down for long).
MAX_RETRY_INTERVAL = 180.0
#: How often a daemon's first worker looks for pending cancels nobody works on.
SWEEP_SECONDS = 5.0


def job_active(node: CalcJobNode | None) -> bool:
    """The job was submitted and neither cancelled nor seen done."""
    return bool(
        node is not None
        and node.job_id
        and not node.get_attribute(attr.JOB_CANCELLED)
        and node.get_attribute(attr.SCHEDULER_STATE) != JobState.DONE.value
    )


def owe_cancel(node: CalcJobNode | None, computer_label: str | None = None) -> bool:
    """Mark the job of a process that is ending as still to be cancelled (the mark the
    daemon's cancellers look for); False when it has no job to cancel."""
    if not job_active(node):
        return False
    assert node is not None
    node.set_attribute(
        attr.CANCEL_PENDING,
        {
            "job_id": node.job_id,
            "computer": computer_label or node.computer_label,
            "since": time.time(),
            "attempts": 0,
        },
    )
    return True


def _cancel_on(transport: Any, scheduler: Any, job_id: str) -> bool:
    """On the connection's thread: cancel the job; False when the scheduler no longer lists
    it (it ended, or a canceller that died after its cancel got there first)."""
    info = scheduler.get_jobs(transport, [job_id]).get(job_id)
    if info is None or info.state == JobState.DONE:
        return False
    scheduler.kill(transport, job_id)
    return True


class PendingCancels:
    """A runner's cancels under way, one task per process: each tries until the job is
    cancelled (or gone), with back-off, or gives up after ``attempts`` and leaves the mark."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self._tasks: dict[int, asyncio.Task[Any]] = {}

    def request(self, pk: int, attempts: int | None = None) -> asyncio.Task[Any]:
        task = self._tasks.get(pk)
        if task is None or task.done():
            task = self._tasks[pk] = self.runner.loop.create_task(self._cancel(pk, attempts))
            task.add_done_callback(lambda done: self._forget(pk, done))
        return task

    def _forget(self, pk: int, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(pk) is task:
            del self._tasks[pk]

    def under_way(self, pk: int) -> asyncio.Task[Any] | None:
        return self._tasks.get(pk)

    async def _cancel(self, pk: int, attempts: int | None) -> None:
        delay = max(self.runner.retry_interval, 0.1)
        attempt = 0
        while attempts is None or attempt < attempts:
            attempt += 1
            try:
                if await self._attempt(pk):
                    return
            except Exception:  # the database is away: the mark stays, try again
                LOGGER.exception("could not cancel the job of process %s", pk)
            if attempt == attempts:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_INTERVAL)
        LOGGER.warning(
            "process %s: its job is not cancelled after %d attempts; the daemon cancels it "
            "once it runs and the computer answers",
            pk,
            attempt,
        )

    async def _attempt(self, pk: int) -> bool:
        """One attempt; True when there is nothing left to do here."""
        node = load_node(pk)
        assert isinstance(node, CalcJobNode)  # only calc jobs are marked CANCEL_PENDING
        mark = node.get_attribute(attr.CANCEL_PENDING)
        if not mark:
            return True  # cancelled by another canceller
        assert node.computer_pk is not None  # a job with a cancel owed ran on a computer
        me = leases.this_worker()
        timeout = float(get_profile().get_option("daemon.lease_timeout"))
        if not leases.acquire(pk, me, timeout):
            return False  # another canceller is at it: look again later
        try:
            computer = self.runner.computers.current_by_pk(node.computer_pk).computer
            scheduler = computer.get_scheduler()
            try:
                async with self.runner.lease_transport(computer) as lease:
                    call = lease.run(_cancel_on, lease.transport, scheduler, mark["job_id"])
                    cancelled = await _renewing(pk, me, timeout, call)
            except (TransportError, SchedulerError, OSError) as exc:
                node.set_attribute(
                    attr.CANCEL_PENDING,
                    {**mark, "attempts": mark.get("attempts", 0) + 1, "error": str(exc)},
                )
                LOGGER.info("process %s: cancel of job %s failed: %s", pk, mark["job_id"], exc)
                return False
            _cancel_done(node, mark["job_id"], cancelled)
            return True
        finally:
            leases.release(pk, me)


async def _renewing(pk: int, me: Any, timeout: float, call: Any) -> Any:
    """Await ``call`` while renewing the lease on process ``pk`` (a hung computer may hold a
    transport call longer than the lease lasts): no other canceller takes the job meanwhile."""
    task = asyncio.ensure_future(call)
    while True:
        done, _ = await asyncio.wait({task}, timeout=max(0.5, timeout / 6))
        if done:
            return task.result()
        leases.acquire(pk, me, timeout)  # ours: its heartbeat is renewed


def _cancel_done(node: Any, job_id: str, cancelled: bool) -> None:
    """Clear the mark and say what happened, in one commit, once."""
    with get_storage().transaction():
        node.refresh()
        if not node.get_attribute(attr.CANCEL_PENDING):
            return
        node.delete_attribute(attr.CANCEL_PENDING)
        if cancelled:
            node.set_attributes({attr.JOB_CANCELLED: True})
            node.add_log("REPORT", f"cancelled job {job_id}")
        else:
            node.set_attributes({attr.SCHEDULER_STATE: JobState.DONE.value})
            node.add_log("REPORT", f"job {job_id} had ended before its cancel: nothing to cancel")


_CANCELS: weakref.WeakKeyDictionary[Runner, PendingCancels] = weakref.WeakKeyDictionary()


def cancels_of(runner: Runner) -> PendingCancels:
    """The cancels ``runner`` works on."""
    cancels = _CANCELS.get(runner)
    if cancels is None:
        cancels = _CANCELS[runner] = PendingCancels(runner)
    return cancels


class PendingCancelSweeper:
    """In a daemon's first worker: at its start and every few seconds, each pending cancel
    no canceller works on is taken up (through this worker's transport queue)."""

    def __init__(self, runner: Runner, interval: float = SWEEP_SECONDS) -> None:
        self.cancels = cancels_of(runner)
        self.interval = interval

    def step(self) -> list[int]:
        """One look; the processes whose cancel this worker took up."""
        taken = []
        for pk in cancel_pending_pks():
            if self.cancels.under_way(pk) is None:
                self.cancels.request(pk)
                taken.append(pk)
        return taken

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                taken = self.step()
                if taken:
                    LOGGER.warning("cancelling the scheduler jobs of killed process(es) %s", taken)
            except Exception as exc:  # the database is away: look again
                LOGGER.warning("could not look for pending cancels: %s", exc)
            await asyncio.sleep(self.interval)
