"""What ``veglia process show`` prints for a process: its properties, the tables plugins
add, its attempts, links, called processes and last log lines."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from veglia.cli.output import console, echo_warning, print_table
from veglia.cli.process_format import format_time, print_logs, relative_time
from veglia.orm.attributes import ATTEMPTS
from veglia.orm.process_nodes import ProcessNode
from veglia.plugin_manager import gather
from veglia.views.detail import ATTEMPT_HEADERS, attempt_rows, process_facts
from veglia.views.rows import format_state, stopped_by

__all__ = ["show_process"]


def _links_table(title: str, links: list[tuple[str, Any]]) -> None:
    if links:
        rows = [(label, node.pk, type(node).__name__) for label, node in links]
        print_table((title, "PK", "Type"), rows)
        console.print("")


def _plugin_tables(node: ProcessNode) -> None:
    """The tables plugins add (process_show_tables); a broken plugin costs a warning."""
    from rich.markup import escape

    results, errors = gather("process_show_tables", node=node)
    for _, (headers, rows) in results:
        if rows:
            print_table(headers, rows)
            console.print("")
    for plugin, exc in errors:
        echo_warning(escape(f"plugin {plugin} failed to show its tables: {exc}"))


def _attempts_table(attempts: list[dict[str, Any]] | None) -> None:
    """The restart policy's attempts, each with what it asked for and what happened."""
    rows = attempt_rows(attempts)
    if rows:
        print_table(ATTEMPT_HEADERS, rows)
        console.print("")


def _stamp(value: datetime | None) -> str:
    return f"{format_time(value)} ({relative_time(value)})"


def show_process(node: ProcessNode, log_lines: int) -> None:
    attrs = node.attributes
    rows = process_facts(node, when=format_time, stamp=_stamp)
    print_table(("Property", "Value"), rows)
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
