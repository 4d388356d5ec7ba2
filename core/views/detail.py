"""The facts ``veglia process show`` lists of one process, for the CLI and the web alike:
why a monitor stopped it, what it used, why it was resubmitted or right-sized, the outage
that paused it, the cancel still to do, the restart policy's attempts, a workflow's steps.

Times inside the texts go through ``when`` (ISO-8601 in UTC by default; the CLI passes its
local-time formatter), so the words are the same wherever they are shown.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from veglia.engine.progress import Progress, format_seconds, workflow_progress
from veglia.orm.attributes import (
    CANCEL_PENDING,
    CODE,
    QUEUE_MOVES,
    RERUN_FROM,
    RERUN_OF,
    RESTART,
    REUSED_CALLS,
    WENT_BACK,
)
from veglia.orm.process_nodes import CalcJobNode, ProcessNode
from veglia.orm.queries import node_mtime
from veglia.views.rows import format_state, iso_time, monitor_notes, process_status, stopped_by

__all__ = [
    "TimeText",
    "attempt_rows",
    "cancel_pending_text",
    "monitor_stop_text",
    "outage_text",
    "process_facts",
    "restart_text",
    "right_sized_text",
    "usage_text",
    "workflow_facts",
]

#: Writes a time into a text.
TimeText = Callable[[datetime | None], str]


def _iso(value: datetime | None) -> str:
    return iso_time(value) or ""


def _epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def monitor_stop_text(stop: dict[str, Any] | None, when: TimeText = _iso) -> str | None:
    if not stop:
        return None
    return f"{stop['name']} at {when(_epoch(stop['time']))}: {stop['message']}"


def usage_text(usage: dict[str, Any] | None) -> str | None:
    if not usage:
        return None
    memory = usage.get("peak_memory_kb")
    runtime = usage.get("runtime_seconds")
    parts = [
        f"{memory / 1024:.1f} MB peak memory" if memory else "",
        f"{runtime:g} s" if runtime else "",
    ]
    return ", ".join(p for p in parts if p) + f" (from {usage.get('source', '?')})"


def restart_text(restart: dict[str, Any] | None) -> str | None:
    if not restart:
        return None
    return f"attempt {restart['attempt']}, after process {restart['previous']} {restart['reason']}"


def queue_moves_text(moves: list[dict[str, Any]] | None) -> str | None:
    """Each queue-move decision (one per state at most): the move, or why the job stayed."""
    if not moves:
        return None
    shown = []
    for move in moves:
        if move.get("moved"):
            shown.append(
                f"{move['from']} -> {move['to']} while {move['state']}, time limit "
                f"{move.get('wallclock_seconds')} s ({move['reason']})"
            )
        else:
            why = move.get("error") or move["reason"]
            shown.append(f"stayed in {move['from']} while {move['state']} ({why})")
    return "; ".join(shown)


def right_sized_text(changes: dict[str, Any] | None) -> str | None:
    if not changes:
        return None
    return "; ".join(f"{name} {c['from']} -> {c['to']}" for name, c in changes.items())


def outage_text(mark: dict[str, Any] | None, when: TimeText = _iso) -> str | None:
    if not mark:
        return None
    text = f"computer {mark['computer']} unreachable since {when(_epoch(mark['since']))}"
    if mark.get("next_probe"):
        text += f", next probe at {when(_epoch(mark['next_probe']))}"
    return text + "; played by the daemon when it answers"


def cancel_pending_text(mark: dict[str, Any] | None, when: TimeText = _iso) -> str | None:
    if not mark:
        return None
    since = when(_epoch(mark["since"]))
    text = f"job {mark['job_id']} on {mark['computer']}, killed at {since}"
    if mark.get("attempts"):
        text += f"; {mark['attempts']} attempt(s) failed, the last: {mark.get('error', '')}"
    return text + "; the daemon cancels it as soon as the computer answers"


def workflow_facts(node: ProcessNode, progress: Progress | None = None) -> list[tuple[str, Any]]:
    """Its steps by outcome, its run time and the estimated time left."""
    progress = progress or workflow_progress(node)
    rows: list[tuple[str, Any]] = [
        ("steps", progress.summary),
        ("run time", progress.elapsed_text),
    ]
    if progress.remaining is not None:
        left = format_seconds(progress.remaining) if progress.remaining >= 1 else "overdue"
        rows.append(("estimated time left", f"{left} ({progress.basis})"))
    elif not node.is_terminated:
        rows.append(("estimated time left", f"no estimate yet ({progress.basis})"))
    attrs = node.attributes
    reused = attrs.get(REUSED_CALLS) or {}
    if reused:
        pks = ", ".join(f"process {pk}" for pk in reused.values())
        rows.append(("reused", f"{pks} (called by the earlier run)"))
    rows += [
        (
            "went back",
            f"step {w['step']}: process {w['failed']} failed; back to step {w['to']} "
            f"(attempt {w['attempt']})",
        )
        for w in attrs.get(WENT_BACK) or []
    ]
    return rows


def rerun_text(attrs: dict[str, Any]) -> str | None:
    """ "process 5" (a calc job run again), "process 5, from step compute" (a workflow)."""
    of = attrs.get(RERUN_OF)
    if of is None:
        return None
    step = attrs.get(RERUN_FROM)
    return f"process {of}" + (f", from step {step}" if step else "")


#: The columns of :func:`attempt_rows`.
ATTEMPT_HEADERS = ("Attempt", "PK", "Job", "Queue", "Memory", "Time", "Exit", "Outcome")


def attempt_rows(attempts: list[dict[str, Any]] | None) -> list[tuple[Any, ...]]:
    """The restart policy's attempts, each with what it asked for and what happened."""
    return [
        (
            a["attempt"],
            a["pk"],
            a.get("job_id") or "",
            a.get("queue") or "",
            f"{a['max_memory_kb'] // 1024} MB" if a.get("max_memory_kb") else "",
            f"{a['max_wallclock_seconds']} s" if a.get("max_wallclock_seconds") else "",
            a.get("exit_status"),
            a.get("reason", ""),
        )
        for a in attempts or []
    ]


def process_facts(
    node: ProcessNode,
    *,
    when: TimeText = _iso,
    stamp: TimeText = _iso,
    progress: Progress | None = None,
) -> list[tuple[str, Any]]:
    """``process show``'s properties of ``node``, those with a value, in its order;
    ``stamp`` writes its creation and last change, ``when`` every other time."""
    attrs = node.attributes
    rows: list[tuple[str, Any]] = [
        ("type", f"{type(node).__name__} ({node.process_type})"),
        (
            "state",
            format_state(node.process_state, node.exit_status, node.paused, stopped_by(attrs)),
        ),
        ("status", process_status(node.process_state, attrs)),
        ("exit status", node.exit_status),
        ("exit message", node.exit_message),
        ("pk", node.pk),
        ("uuid", node.uuid),
        ("label", node.label),
        ("description", node.description),
        ("created", stamp(node.ctime)),
        ("modified", stamp(node_mtime(node.pk))),
        ("rerun of", rerun_text(attrs)),
    ]
    if isinstance(node, CalcJobNode):
        code = attrs.get(CODE) or {}
        cached_from = node.cached_from
        rows += [
            ("computer", node.computer_label),
            ("code", code.get("label") and f"{code['label']} (pk {code.get('pk')})"),
            ("scheduler job id", node.job_id),
            ("scheduler state", node.scheduler_state),
            ("work dir", node.remote_workdir),
            ("cached from", cached_from and f"process {cached_from['pk']}"),
            ("stopped by monitor", monitor_stop_text(node.stopped_by_monitor, when)),
            ("monitors", monitor_notes(attrs)),
            ("blocked", (node.blocked or {}).get("reason")),
            ("paused", outage_text(node.unreachable, when) if node.paused else None),
            ("cancel pending", cancel_pending_text(attrs.get(CANCEL_PENDING), when)),
            ("resubmitted", restart_text(attrs.get(RESTART))),
            ("queue moves", queue_moves_text(attrs.get(QUEUE_MOVES))),
            ("used", usage_text(node.usage)),
            ("right-sized", right_sized_text(node.right_sized)),
        ]
    if node.node_type == "process.workflow":
        rows += workflow_facts(node, progress)
    return [row for row in rows if row[1] not in (None, "")]
