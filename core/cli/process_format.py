"""How the CLI writes a process's times (local, relative) and its log lines (for ``veglia
process`` and ``veglia node``); its state and status text are :mod:`veglia.views.rows`'."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from veglia.cli.output import console, echo_wrapped
from veglia.storage.times import as_utc as aware

if TYPE_CHECKING:
    from veglia.orm.process_nodes import ProcessNode

__all__ = ["format_time", "print_logs", "relative_time"]


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


def print_logs(node: ProcessNode, logs: list[Any], indent: str = "") -> None:
    for log in logs:
        message = f"{indent}{format_time(log.time)} [{node.pk} | {log.levelname}]: {log.message}"
        echo_wrapped(message, hang=f"{indent}    ")
        traceback = (log.details or {}).get("traceback")
        if traceback:
            console.print(
                "\n".join(f"{indent}    {line}" for line in traceback.splitlines()), markup=False
            )
