"""``veglia process``: list, show, report and watch processes, as ``verdi process``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import click

from veglia.cli.cmd_process_control import PROCESS_COMMANDS
from veglia.cli.daemon_hint import warn_if_no_daemon, warn_if_waiting_for_no_daemon
from veglia.cli.monitor_notes import monitor_lines, stopped_by
from veglia.cli.output import console, echo_warning, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.engine.progress import format_seconds, workflow_progress
from veglia.exceptions import InvalidOptionError, NotExistent, WatchTimeout
from veglia.orm.attributes import (
    ATTEMPTS,
    CODE,
    GPU_METRICS,
    JOB_ID,
    PAUSED,
    PAUSED_REASON,
    RESTART,
    SCHEDULER_STATE,
    WAITING_FOR,
)
from veglia.orm.nodes import CalcJobNode, ProcessNode, load_node
from veglia.orm.nodes import as_utc as aware
from veglia.orm.queries import ACTIVE_STATES, ProcessRow, list_processes, logs_after, node_mtime
from veglia.plugin_manager import results_of_each

PROCESS_STATES = ("created", "running", "waiting", "finished", "excepted", "killed")


# -- shared by the process, node and calcjob commands ------------------------------------------
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
    """What an active process is doing: why it is paused, or its job's scheduler state."""
    if attributes.get(PAUSED) and state in ACTIVE_STATES:
        return attributes.get(PAUSED_REASON) or "paused"
    if state in ACTIVE_STATES and attributes.get(SCHEDULER_STATE):
        return f"scheduler: {attributes[SCHEDULER_STATE]}"
    if state in ACTIVE_STATES and attributes.get(WAITING_FOR):
        return "waiting for " + ", ".join(map(str, attributes[WAITING_FOR]))
    return ""


def load_process(identifier: str) -> ProcessNode:
    """The process node with this pk or UUID (prefix); NotExistent otherwise."""
    node = load_node(identifier)
    if not isinstance(node, ProcessNode):
        raise NotExistent(
            f"Node {identifier} is a {type(node).__name__}, not a process. "
            f"Inspect it with `veglia node show {identifier}`."
        )
    return node


# -- list ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ListColumn:
    """A column of ``veglia process list``: its header, its cell, and its ``--raw`` cell."""

    header: str
    value: Callable[[ProcessRow], Any]
    raw: Callable[[ProcessRow], Any] | None = None


def _gpu(row: Any, key: str) -> Any:
    return (row.attributes.get(GPU_METRICS) or {}).get(key)


#: Columns ``-P/--project`` can choose from; add yours (``PROCESS_LIST_COLUMNS["gpu"] = ...``).
PROCESS_LIST_COLUMNS: dict[str, ListColumn] = {
    "pk": ListColumn("PK", lambda r: r.pk),
    "uuid": ListColumn("UUID", lambda r: r.uuid),
    "ctime": ListColumn(
        "Created", lambda r: relative_time(r.ctime), lambda r: aware(r.ctime).isoformat()
    ),
    "mtime": ListColumn(
        "Modified", lambda r: relative_time(r.mtime), lambda r: aware(r.mtime).isoformat()
    ),
    "label": ListColumn("Label", lambda r: r.label),
    "process_type": ListColumn("Process type", lambda r: r.process_type),
    "node_type": ListColumn("Node type", lambda r: r.node_type),
    "state": ListColumn(
        "State",
        lambda r: format_state(
            r.process_state,
            r.exit_status,
            bool(r.attributes.get(PAUSED)),
            stopped_by(r.attributes),
        ),
    ),
    "process_state": ListColumn("Process state", lambda r: r.process_state),
    "status": ListColumn("Status", lambda r: process_status(r.process_state, r.attributes)),
    "exit_status": ListColumn("Exit", lambda r: r.exit_status),
    "exit_message": ListColumn("Exit message", lambda r: r.exit_message),
    "computer": ListColumn("Computer", lambda r: r.computer),
    "job_id": ListColumn("Job id", lambda r: r.attributes.get(JOB_ID)),
    "scheduler_state": ListColumn("Scheduler state", lambda r: r.attributes.get(SCHEDULER_STATE)),
    "paused": ListColumn("Paused", lambda r: bool(r.attributes.get(PAUSED))),
    # The trace record's GPU block (``gpu_metrics``), in the Nextflow/Platform field names.
    "gpu_name": ListColumn("GPU", lambda r: _gpu(r, "name")),
    "gpu_pct": ListColumn("GPU %", lambda r: _gpu(r, "pct")),
    "gpu_peak": ListColumn("GPU peak %", lambda r: _gpu(r, "peak")),
    "gpu_mem": ListColumn("GPU memory (MiB)", lambda r: _gpu(r, "mem")),
    "gpu_pct_mem": ListColumn("GPU mem %", lambda r: _gpu(r, "pct_mem")),
    "gpu_peak_mem": ListColumn("GPU peak mem %", lambda r: _gpu(r, "peak_mem")),
    "gpu_active_time": ListColumn("GPU active (ms)", lambda r: _gpu(r, "active_time")),
}
DEFAULT_LIST_PROJECTION = ("pk", "ctime", "label", "process_type", "state", "status", "exit_status")


def as_tree(rows: list[ProcessRow]) -> Iterator[tuple[ProcessRow, int]]:
    """Rows with their depth, each called process right under its caller."""
    pks = {row.pk for row in rows}
    children: dict[int, list[ProcessRow]] = {}
    for row in rows:
        if row.caller_pk in pks:
            children.setdefault(row.caller_pk, []).append(row)

    def walk(row: ProcessRow, depth: int) -> Iterator[tuple[ProcessRow, int]]:
        yield row, depth
        for child in children.get(row.pk, []):
            yield from walk(child, depth + 1)

    for row in rows:
        if row.caller_pk not in pks:
            yield from walk(row, 0)


def parse_projection(values: tuple[str, ...]) -> list[str]:
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in PROCESS_LIST_COLUMNS]
    if unknown:
        raise InvalidOptionError(
            f"Unknown column {', '.join(unknown)} for --project; choose from "
            f"{', '.join(PROCESS_LIST_COLUMNS)}."
        )
    return names or list(DEFAULT_LIST_PROJECTION)


@click.group("process")
def process_group() -> None:
    """Inspect and control processes."""


@process_group.command("list")
@click.option("-a", "--all", "show_all", is_flag=True, help="Also terminated processes.")
@click.option(
    "-S",
    "--process-state",
    "states",
    multiple=True,
    type=click.Choice(PROCESS_STATES),
    help="Only processes in this state (repeatable); implies --all.",
)
@click.option("-f", "--failed", is_flag=True, help="Only finished processes with exit status != 0.")
@click.option(
    "-p",
    "--past-days",
    type=click.IntRange(min=0),
    help="Only processes created in the last N days.",
)
@click.option("-l", "--limit", type=click.IntRange(min=1), help="Only the N most recent.")
@click.option(
    "-P",
    "--project",
    "project",
    multiple=True,
    metavar="COL,COL",
    help=f"Columns to show, from: {', '.join(PROCESS_LIST_COLUMNS)}.",
)
@raw_option
@pass_state
def process_list(
    state: CliState,
    show_all: bool,
    states: tuple[str, ...],
    failed: bool,
    past_days: int | None,
    limit: int | None,
    project: tuple[str, ...],
    raw: bool,
) -> None:
    """List active processes (created, running, waiting); -a for all."""
    names = parse_projection(project)
    state.profile  # noqa: B018 -- load the chosen profile
    chosen = states or (None if show_all or failed else ACTIVE_STATES)
    rows = list_processes(chosen, failed=failed, past_days=past_days, limit=limit)
    tree_column = names.index("process_type") if "process_type" in names else 0
    table = []
    for row, depth in as_tree(rows):
        columns = [PROCESS_LIST_COLUMNS[name] for name in names]
        cells = [(c.raw or c.value)(row) if raw else c.value(row) for c in columns]
        if depth and not raw:
            cells[tree_column] = f"{'   ' * (depth - 1)}└─ {cells[tree_column]}"
        table.append(cells)
    print_table([PROCESS_LIST_COLUMNS[name].header for name in names], table, raw=raw)
    warn_if_waiting_for_no_daemon()


# -- show ------------------------------------------------------------------------------------------
def _links_table(title: str, links: list[tuple[str, Any]]) -> None:
    if links:
        rows = [(label, node.pk, type(node).__name__) for label, node in links]
        print_table((title, "PK", "Type"), rows)
        console.print("")


def _print_logs(node: ProcessNode, logs: list[Any], indent: str = "") -> None:
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
        rows.append(("estimated time left", "unknown: nothing similar has finished yet"))
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
        _print_logs(node, logs[-log_lines:], "  ")


@process_group.command("show")
@click.argument("identifiers", nargs=-1, required=True, metavar="PK...")
@click.option("--log-lines", type=click.IntRange(min=0), default=10, show_default=True)
@pass_state
def process_show(state: CliState, identifiers: tuple[str, ...], log_lines: int) -> None:
    """Show state, job, inputs, outputs and the last log lines of each process PK."""
    state.profile  # noqa: B018
    for index, identifier in enumerate(identifiers):
        node = load_process(identifier)
        if index:
            console.print("\n" + "─" * 60 + "\n")
        show_process(node, log_lines)


@process_group.command("report")
@click.argument("identifiers", nargs=-1, required=True, metavar="PK...")
@click.option("-l", "--levelname", help="Only messages of this level (REPORT, ERROR, ...).")
@click.option("-m", "--max-depth", type=click.IntRange(min=0), help="Depth of called processes.")
@pass_state
def process_report(
    state: CliState, identifiers: tuple[str, ...], levelname: str | None, max_depth: int | None
) -> None:
    """Print the log of each process PK, and of the processes it called."""
    state.profile  # noqa: B018

    def report(node: ProcessNode, depth: int) -> bool:
        logs = [x for x in node.logs if not levelname or x.levelname == levelname.upper()]
        _print_logs(node, logs, "  " * depth)
        found = bool(logs)
        if max_depth is None or depth < max_depth:
            for child in node.called:
                found = report(child, depth + 1) or found
        return found

    for identifier in identifiers:
        if not report(load_process(identifier), 0):
            console.print(f"No log messages recorded for process {identifier}.")


@process_group.command("watch")
@click.argument("identifier", metavar="PK")
@click.option("--interval", type=click.FloatRange(min=0.05), default=0.5, show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    help="Stop after this many seconds (exit code 124) if the process is still going.",
)
@pass_state
def process_watch(state: CliState, identifier: str, interval: float, timeout: float | None) -> int:
    """Print state changes and new log lines of process PK until it terminates."""
    state.profile  # noqa: B018
    node = load_process(identifier)
    no_daemon = warn_if_no_daemon(node)
    deadline = None if timeout is None else time.monotonic() + timeout
    shown: tuple[str, str] | None = None
    last_log = 0
    try:
        while True:
            node.refresh()
            current = (
                format_state(
                    node.process_state, node.exit_status, node.paused, stopped_by(node.attributes)
                ),
                process_status(node.process_state, node.attributes),
            )
            for log in logs_after(node.pk, last_log):
                console.print(
                    f"{format_time(log.time)[11:]}  {log.levelname}: {log.message}", markup=False
                )
                last_log = log.id
            if current != shown:
                when = format_time(node_mtime(node.pk))[11:]  # about when the state changed
                console.print(f"{when}  {current[0]}  {current[1]}".rstrip(), markup=False)
                shown = current
            if node.is_terminated:
                if node.exit_message:
                    console.print(f"{' ' * 8}  {node.exit_message}", markup=False)
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                then = (
                    "no daemon runs to take it up: start one with `veglia daemon start`"
                    if no_daemon
                    else f"watch it again with `veglia process watch {node.pk}`"
                )
                raise WatchTimeout(
                    f"Process {node.pk} is still {node.process_state} after {timeout:g} s; {then}."
                )
            time.sleep(interval)
    except KeyboardInterrupt:
        console.print(f"Stopped watching process {node.pk}; it goes on.")
        raise click.exceptions.Exit(130) from None


for _command in PROCESS_COMMANDS:  # kill, pause, play, unblock, repair
    process_group.add_command(_command)

COMMANDS = [process_group]
