"""What `veglia process show` and `process list` say of a job's monitors: which of them is
disabled and why, which keeps failing, and which stopped the job (a job a monitor stopped
while keeping the parser's exit code must not read as a plain success)."""

from __future__ import annotations

from typing import Any

from veglia.orm.attributes import MONITOR_STATE, STOPPED_BY_MONITOR

__all__ = ["monitor_lines", "stopped_by"]


def monitor_lines(attributes: dict[str, Any]) -> str | None:
    """One line per monitor that is disabled, or failing without being disabled yet."""
    lines = []
    for name, state in sorted((attributes.get(MONITOR_STATE) or {}).items()):
        if state.get("disabled"):
            lines.append(f"monitor {name} disabled: {state.get('disabled_reason') or '?'}")
        elif state.get("failures"):
            lines.append(
                f"monitor {name} failing: {state['failures']} fault(s) in a row, the last: "
                f"{state.get('last_fault') or '?'}"
            )
    return "\n".join(lines) or None


def stopped_by(attributes: dict[str, Any]) -> str | None:
    """The name of the monitor that stopped the job, if one did."""
    stop = attributes.get(STOPPED_BY_MONITOR)
    return stop.get("name") if isinstance(stop, dict) else None
