"""Why a calc job waits for someone: a submission no retry can fix (blocked until a person
unblocks it), or a computer that cannot be reached (paused until it is back). Each sends
its notification once per cause, however many jobs it holds.

The job's side (its node's marks, its report) is ``CalcJob.block``,
``CalcJob.computer_unreachable`` and ``CalcJob.on_playing``; here are the notifications,
which belong to a computer and a cause rather than to one job.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from veglia.notifications import clear_event, event_pending, notify, notify_once

if TYPE_CHECKING:
    from veglia.orm.computers import Computer

__all__ = [
    "BLOCKED",
    "blocked_event",
    "first_line",
    "notify_back",
    "notify_blocked",
    "notify_unblocked",
    "notify_unreachable",
]

BLOCKED = "blocked"


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def blocked_event(computer: str, reason: str) -> str:
    """One notification key per computer and cause, however many jobs it blocks."""
    digest = hashlib.sha256(first_line(reason).encode()).hexdigest()[:12]
    return f"blocked-{computer}-{digest}"


def notify_blocked(label: str, pk: int, reason: str, cause: str = "") -> None:
    """Tell the user once per computer and cause that jobs wait for them."""
    notify_once(
        blocked_event(label, reason),
        "jobs_blocked",
        f"jobs on {label} are blocked: {first_line(reason)[:120]}",
        (
            cause
            or f"The scheduler of {label} refused process {pk} (and will refuse "
            "any job asking the same)"
        )
        + f":\n\n{reason}\n\nThe jobs wait. Fix the cause (the account, queue, option "
        "or work dir), then resume them with `veglia process unblock --all`, or "
        "`veglia process unblock PK --option NAME=VALUE` to change a job's option.",
    )


def notify_unblocked(blocked: dict[str, Any]) -> None:
    """A job's block (its ``blocked`` mark) is lifted: the next job blocked so is told of."""
    clear_event(blocked_event(blocked.get("computer", ""), blocked["reason"]))


def notify_unreachable(computer: Computer, pid: Any, reason: str) -> None:
    """One notification per outage of a computer, not one per job or poll."""
    notify_once(
        f"unreachable-{computer.label}",
        "computer_unreachable",
        f"computer {computer.label} is unreachable",
        f"veglia could not reach {computer.label} ({computer.hostname}) and paused its jobs, "
        f"process {pid} first: {reason}\n\nOnce it is back: `veglia process play "
        "--all`.",
    )


def notify_back(computer: Computer) -> None:
    """A transport task went through: the one that ends an outage says so, once."""
    key = f"unreachable-{computer.label}"
    if event_pending(key) and clear_event(key):
        notify(
            "computer_back",
            f"computer {computer.label} is back",
            f"veglia reaches {computer.label} ({computer.hostname}) again; the jobs it paused "
            "for the outage go on by themselves.",
        )
