"""Why a calc job waits for someone: a submission no retry can fix (blocked until a person
unblocks it), or a computer that cannot be reached (paused until it is back). Each sends
its notification once per cause, however many jobs it holds.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING

from veglia.notifications import clear_event, event_pending, notify, notify_once
from veglia.orm import attributes as attr

if TYPE_CHECKING:
    from veglia.engine.calcjob.process import CalcJob

__all__ = ["BLOCKED", "block", "computer_reached", "computer_unreachable", "first_line", "release"]

BLOCKED = "blocked"


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def blocked_event(computer: str, reason: str) -> str:
    """One notification key per computer and cause, however many jobs it blocks."""
    digest = hashlib.sha256(first_line(reason).encode()).hexdigest()[:12]
    return f"blocked-{computer}-{digest}"


def block(process: CalcJob, reason: str, cause: str = "") -> str:
    """Hold the job until ``veglia process unblock``; tell the user once per cause."""
    node = process.node
    assert node is not None
    label = process.computer.label
    node.set_attribute(attr.BLOCKED, {"reason": reason, "time": time.time(), "computer": label})
    process.report(f"blocked: {reason}")
    notify_once(
        blocked_event(label, reason),
        "jobs_blocked",
        f"jobs on {label} are blocked: {first_line(reason)[:120]}",
        (
            cause
            or f"The scheduler of {label} refused process {node.pk} (and will refuse "
            "any job asking the same)"
        )
        + f":\n\n{reason}\n\nThe jobs wait. Fix the cause (the account, queue, option "
        "or work dir), then resume them with `veglia process unblock --all`, or "
        "`veglia process unblock PK --option NAME=VALUE` to change a job's option.",
    )
    return BLOCKED


def release(process: CalcJob) -> None:
    """Played again: the job is no longer held for an outage or a block."""
    node = process.node
    if node is None:
        return
    if node.get_attribute(attr.UNREACHABLE):
        node.delete_attribute(attr.UNREACHABLE)
    blocked = node.get_attribute(attr.BLOCKED)
    if blocked:
        node.delete_attribute(attr.BLOCKED)
        process.report("unblocked: uploading and submitting again")
        clear_event(blocked_event(blocked.get("computer", ""), blocked["reason"]))


def computer_unreachable(process: CalcJob, reason: str) -> None:
    """Mark the job paused for an outage, not by a person (the daemon plays it when the
    computer is back, ``veglia.engine.daemon.outages``), with one notification per outage
    of a computer, not one per job or poll."""
    node = process.node
    assert node is not None
    computer = process.computer
    since = (node.get_attribute(attr.UNREACHABLE) or {}).get("since") or time.time()
    node.set_attribute(attr.UNREACHABLE, {"computer": computer.label, "since": since})
    notify_once(
        f"unreachable-{computer.label}",
        "computer_unreachable",
        f"computer {computer.label} is unreachable",
        f"veglia could not reach {computer.label} ({computer.hostname}) and paused its jobs, "
        f"process {process.pid} first: {reason}\n\nOnce it is back: `veglia process play "
        "--all`.",
    )


def computer_reached(process: CalcJob) -> None:
    """A transport task went through: the one that ends an outage says so, once."""
    computer = process.computer
    key = f"unreachable-{computer.label}"
    if event_pending(key) and clear_event(key):
        notify(
            "computer_back",
            f"computer {computer.label} is back",
            f"veglia reaches {computer.label} ({computer.hostname}) again; the jobs it paused "
            "for the outage go on by themselves.",
        )
