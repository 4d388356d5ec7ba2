"""What ``veglia process show`` prints for a process: its properties, the tables plugins
add, its attempts, links, called processes and last log lines."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from veglia.cli.monitor_notes import monitor_lines, stopped_by
from veglia.cli.output import console, echo_warning, print_table
from veglia.cli.process_format import (
    format_state,
    format_time,
    print_logs,
    process_status,
    relative_time,
)
from veglia.engine.progress import format_seconds, workflow_progress
from veglia.orm.attributes import ATTEMPTS, CANCEL_PENDING, CODE, RESTART
from veglia.orm.process_nodes import CalcJobNode, ProcessNode
from veglia.orm.queries import node_mtime
from veglia.plugin_manager import results_of_each

__all__ = ["show_process"]


def _links_table(title: str, links: list[tuple[str, Any]]) -> None:
    if links:
        rows = [(label, node.pk, type(node).__name__) for label, node in links]
        print_table((title, "PK", "Type"), rows)
        console.print("")


def _plugin_tables(node: ProcessNode) -> None:
    """The tables plugins add (process_show_tables); a broken plugin costs a warning."""
    from rich.markup import escape

    results, errors = results_of_each("process_show_tables", node=node)
    for _, tables in results:
        for headers, rows in tables or []:
            if rows:
                print_table(headers, rows)
                console.print("")
    for plugin, exc in errors:
        echo_warning(escape(f"plugin {plugin} failed to show its tables: {exc}"))


def _monitor_stop(stop: dict | None) -> str | None:
    if not stop:
        return None
    when = datetime.fromtimestamp(stop["time"], timezone.utc)
    return f"{stop['name']} at {format_time(when)}: {stop['message']}"


def _usage(usage: dict | None) -> str | None:
    if not usage:
        return None
    memory = usage.get("peak_memory_kb")
    runtime = usage.get("runtime_seconds")
    parts = [
        f"{memory / 1024:.1f} MB peak memory" if memory else "",
        f"{runtime:g} s" if runtime else "",
    ]
    return ", ".join(p for p in parts if p) + f" (from {usage.get('source', '?')})"


def _restart(restart: dict | None) -> str | None:
    if not restart:
        return None
    return f"attempt {restart['attempt']}, after process {restart['previous']} {restart['reason']}"


def _right_sized(changes: dict | None) -> str | None:
    if not changes:
        return None
    return "; ".join(f"{name} {c['from']} -> {c['to']}" for name, c in changes.items())


def _workflow_rows(node: ProcessNode) -> list[tuple[str, Any]]:

    progress = workflow_progress(node)
    rows: list[tuple[str, Any]] = [
        ("steps", progress.summary),
        ("run time", progress.elapsed_text),
    ]
    if progress.remaining is not None:
        left = format_seconds(progress.remaining) if progress.remaining >= 1 else "overdue"
        rows.append(("estimated time left", f"{left} ({progress.basis})"))
    elif not node.is_terminated:
        rows.append(("estimated time left", f"no estimate yet ({progress.basis})"))
    return rows


def _attempts_table(attempts: list[dict] | None) -> None:
    """The restart policy's attempts, each with what it asked for and what happened."""
    if not attempts:
        return
    rows = [
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
        for a in attempts
    ]
    print_table(("Attempt", "PK", "Job", "Queue", "Memory", "Time", "Exit", "Outcome"), rows)
    console.print("")


def _outage(mark: dict[str, Any] | None) -> str | None:
    if not mark:
        return None
    since = datetime.fromtimestamp(mark["since"], timezone.utc)
    text = f"computer {mark['computer']} unreachable since {format_time(since)}"
    if mark.get("next_probe"):
        probe = datetime.fromtimestamp(mark["next_probe"], timezone.utc)
        text += f", next probe at {format_time(probe)}"
    return text + "; played by the daemon when it answers"


def _cancel_pending(mark: dict[str, Any] | None) -> str | None:
    if not mark:
        return None
    since = datetime.fromtimestamp(mark["since"], timezone.utc)
    text = f"job {mark['job_id']} on {mark['computer']}, killed at {format_time(since)}"
    if mark.get("attempts"):
        text += f"; {mark['attempts']} attempt(s) failed, the last: {mark.get('error', '')}"
    return text + "; the daemon cancels it as soon as the computer answers"


def show_process(node: ProcessNode, log_lines: int) -> None:
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
        ("created", f"{format_time(node.ctime)} ({relative_time(node.ctime)})"),
    ]
    mtime = node_mtime(node.pk)
    rows.append(("modified", f"{format_time(mtime)} ({relative_time(mtime)})"))
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
            ("stopped by monitor", _monitor_stop(node.stopped_by_monitor)),
            ("monitors", monitor_lines(attrs)),
            ("blocked", (node.blocked or {}).get("reason")),
            ("paused", _outage(node.unreachable) if node.paused else None),
            ("cancel pending", _cancel_pending(attrs.get(CANCEL_PENDING))),
            ("resubmitted", _restart(attrs.get(RESTART))),
            ("used", _usage(node.usage)),
            ("right-sized", _right_sized(node.right_sized)),
        ]
    if node.node_type == "process.workflow":
        rows += _workflow_rows(node)
    print_table(("Property", "Value"), [r for r in rows if r[1] not in (None, "")])
    console.print("")
    _plugin_tables(node)
    _attempts_table(attrs.get(ATTEMPTS))
    _links_table("Inputs", node.inputs.items())
    _links_table("Outputs", node.outputs.items())
    called = node.called
    if called:
        print_table(
            ("Called", "PK", "State"),
            [
                (
                    c.process_type,
                    c.pk,
                    format_state(
                        c.process_state, c.exit_status, c.paused, stopped_by(c.attributes)
                    ),
                )
                for c in called
            ],
        )
        console.print("")
    logs = node.logs
    if logs and log_lines:
        console.print(f"[bold]Log[/bold] (last {min(log_lines, len(logs))} of {len(logs)})")
        print_logs(node, logs[-log_lines:], "  ")
