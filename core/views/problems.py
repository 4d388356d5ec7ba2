"""What is wrong with a process and what to do about it, as the overview's "needs attention"
and a workflow's problems both say it."""

from __future__ import annotations

from typing import Any

from veglia.orm.attributes import (
    BLOCKED,
    CANCEL_PENDING,
    PAUSED_REASON,
    STOPPED_BY_MONITOR,
    UNREACHABLE,
)
from veglia.orm.queries import ACTIVE_STATES

__all__ = ["PROBLEM_ATTRIBUTES", "problem_of"]

#: The attributes :func:`problem_of` reads, besides the row's.
PROBLEM_ATTRIBUTES = (BLOCKED, CANCEL_PENDING, PAUSED_REASON, STOPPED_BY_MONITOR, UNREACHABLE)


def problem_of(row: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any] | None:
    """The problem of a process (its view row, :func:`veglia.views.rows.process_row`, and
    its :data:`PROBLEM_ATTRIBUTES`): ``pk``, ``label``, ``url``, ``problem`` and
    ``what_to_do``; None when nothing is wrong."""
    found = _active_problem(row, attributes) if row["state"] in ACTIVE_STATES else None
    found = found or _ended_problem(row, attributes)
    if found is None:
        return None
    problem, what_to_do = found
    return {"pk": row["pk"], "label": row["label"], "url": row["url"], "problem": problem,
            "what_to_do": what_to_do}  # fmt: skip


def _active_problem(row: dict[str, Any], attributes: dict[str, Any]) -> tuple[str, str] | None:
    pk = row["pk"]
    blocked, away = attributes.get(BLOCKED), attributes.get(UNREACHABLE)
    if isinstance(blocked, dict):
        reason = blocked.get("reason") or "submission refused"
        return f"blocked: {reason}", f"fix the cause, then veglia process unblock {pk}"
    if row["paused"] and isinstance(away, dict):
        computer = away.get("computer")
        return (
            f"paused: computer {computer} unreachable",
            f"the daemon plays it when the computer answers; veglia computer test {computer}",
        )
    if row["paused"]:
        reason = attributes.get(PAUSED_REASON) or "by hand"
        return f"paused: {reason}", f"veglia process play {pk}"
    return None


def _ended_problem(row: dict[str, Any], attributes: dict[str, Any]) -> tuple[str, str] | None:
    pk, state = row["pk"], row["state"]
    cancel, stop = attributes.get(CANCEL_PENDING), attributes.get(STOPPED_BY_MONITOR)
    if state in ACTIVE_STATES:
        return None
    if isinstance(cancel, dict):
        return (
            f"cancel pending: job {cancel.get('job_id')} on {cancel.get('computer')}",
            "the daemon cancels it when the computer answers: keep a daemon running "
            "(veglia daemon start)",
        )
    if isinstance(stop, dict):
        return (
            f"stopped by monitor {stop.get('name')}: {stop.get('message', '')}",
            f"veglia process show {pk}",
        )
    if state == "finished" and row["exit_status"] not in (0, None):
        message = row["exit_message"] or "no message"
        return f"failed [{row['exit_status']}]: {message}", f"veglia process report {pk}"
    if state == "excepted":
        return f"excepted: {row['exit_message'] or 'see its log'}", f"veglia process report {pk}"
    if state == "killed":
        return f"killed: {row['exit_message'] or 'by request'}", f"veglia process show {pk}"
    return None
