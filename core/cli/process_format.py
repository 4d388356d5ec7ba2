"""How the CLI writes a process: its times, state and status, and its log lines (for
``veglia process`` and ``veglia node``)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from veglia.cli.output import console
from veglia.orm.attributes import (
    CANCEL_PENDING,
    PAUSED,
    PAUSED_REASON,
    SCHEDULER_STATE,
    WAITING_FOR,
)
from veglia.orm.queries import ACTIVE_STATES
from veglia.storage.times import as_utc as aware

if TYPE_CHECKING:
    from veglia.orm.process_nodes import ProcessNode

__all__ = ["format_state", "format_time", "print_logs", "process_status", "relative_time"]


def format_time(value: datetime | None) -> str:
    """A stored time in the local time zone, to the second."""
    return aware(value).astimezone().strftime("%Y-%m-%d %H:%M:%S") if value else ""


def relative_time(value: datetime | None, now: datetime | None = None) -> str:
    """``"12s ago"``, ``"2m ago"``, ``"3h ago"``, ``"4D ago"``, as ``verdi process list``."""
    if value is None:
        return ""
    seconds = ((now or datetime.now(timezone.utc)) - aware(value)).total_seconds()
    for size, unit in ((86400, "D"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{max(0, int(seconds))}s ago"


def format_state(
    state: str | None, exit_status: int | None, paused: bool = False, stopped_by: str | None = None
) -> str:
    """``⏵ Waiting``, ``✔ Finished [0]``, ``⨯ Finished [400]``, ``✘ Excepted``, ...; a job a
    monitor stopped says so: ``✔ Finished [0] (stopped by monitor X)``, as its command was
    killed even when the parser's exit code was kept."""
    if paused and state in ACTIVE_STATES:
        return "⏸ Paused"
    if state == "finished":
        by = f" (stopped by monitor {stopped_by})" if stopped_by else ""
        return f"{'✔' if exit_status == 0 else '⨯'} Finished [{exit_status}]{by}"
    symbol = {"excepted": "✘", "killed": "☠", "created": "⏹"}.get(state or "", "⏵")
    return f"{symbol} {(state or 'unknown').capitalize()}"


def process_status(state: str | None, attributes: dict[str, Any]) -> str:
    """What an active process is doing: why it is paused, or its job's scheduler state; of
    a killed one, that its scheduler job is still to be cancelled."""
    pending = attributes.get(CANCEL_PENDING)
    if pending:
        return f"cancel pending: job {pending['job_id']} on {pending['computer']}"
    if attributes.get(PAUSED) and state in ACTIVE_STATES:
        return attributes.get(PAUSED_REASON) or "paused"
    if state in ACTIVE_STATES and attributes.get(SCHEDULER_STATE):
        return f"scheduler: {attributes[SCHEDULER_STATE]}"
    if state in ACTIVE_STATES and attributes.get(WAITING_FOR):
        return "waiting for " + ", ".join(map(str, attributes[WAITING_FOR]))
    return ""


def print_logs(node: ProcessNode, logs: list[Any], indent: str = "") -> None:
    for log in logs:
        console.print(
            f"{indent}{format_time(log.time)} [{node.pk} | {log.levelname}]: {log.message}",
            markup=False,
        )
        traceback = (log.details or {}).get("traceback")
        if traceback:
            console.print(
                "\n".join(f"{indent}    {line}" for line in traceback.splitlines()), markup=False
            )
