"""Cancelling a calc job's scheduler job, so that a killed or stopped process leaves no
orphan behind: from its step (through the transport queue, with retries), or at once when
the process is killed while not stepping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.engine.runner import get_runner
from veglia.orm import attributes as attr
from veglia.schedulers import JobState

if TYPE_CHECKING:
    from veglia.engine.calcjob.process import CalcJob
    from veglia.orm.nodes import CalcJobNode

__all__ = ["cancel", "cancel_now", "job_active", "wait_until_gone"]


def job_active(node: CalcJobNode | None) -> bool:
    """The job was submitted and neither cancelled nor seen done."""
    return bool(
        node is not None
        and node.job_id
        and not node.get_attribute(attr.JOB_CANCELLED)
        and node.get_attribute(attr.SCHEDULER_STATE) != JobState.DONE.value
    )


async def cancel(process: CalcJob) -> bool:
    """Cancel the job from a step; False when there was none to cancel."""
    node = process.node
    if not job_active(node):
        return False
    assert node is not None
    computer = process.computer
    await process.with_retries("kill", computer.get_scheduler().kill, node.job_id)
    _cancelled(process)
    return True


def cancel_now(process: CalcJob) -> None:
    """Cancel the job here, blocking: for a process killed while it was not stepping."""
    node = process.node
    if not job_active(node):
        return
    assert node is not None
    with process.computer.get_transport() as transport:
        process.computer.get_scheduler().kill(transport, node.job_id)
    _cancelled(process)


def _cancelled(process: CalcJob) -> None:
    assert process.node is not None
    process.node.set_attributes({attr.JOB_CANCELLED: True})
    process.report(f"cancelled job {process.node.job_id}")


async def wait_until_gone(process: CalcJob, polls: int = 30) -> None:
    """After a cancel: until the scheduler no longer runs the job (no orphan is left)."""
    node = process.node
    assert node is not None
    poller = get_runner().poller(process.computer)
    for _ in range(polls):
        info = await poller.next_update(node.job_id)
        if info is None or info.state == JobState.DONE:
            node.set_attributes({attr.SCHEDULER_STATE: JobState.DONE.value})
            return
    process.report(f"job {node.job_id} still listed {polls} polls after its cancel")
