"""``veglia process``: list, show, report and watch processes, as ``verdi process``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from veglia.cli.completion import complete_process_pks
from veglia.cli.daemon_hint import warn_if_no_daemon, warn_if_waiting_for_no_daemon
from veglia.cli.lazy_group import LazyCommands, LazyGroup
from veglia.cli.node_args import load_process
from veglia.cli.numbers import Number, WholeNumber
from veglia.cli.output import console, print_table, raw_option
from veglia.cli.process_format import format_time, print_logs, relative_time
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import CliExit, WatchTimeout
from veglia.orm.attributes import DAEMON
from veglia.orm.queries import ACTIVE_STATES, ORDER_BY, ProcessRow, logs_after, node_mtime
from veglia.row_ids import MAX_INTEGER
from veglia.views.rows import (
    DEFAULT_LIST_PROJECTION,
    MAX_PAST_DAYS,
    PROCESS_LIST_COLUMNS,
    as_tree,
    format_state,
    process_status,
    select_processes,
    stopped_by,
)

if TYPE_CHECKING:
    from veglia.orm.process_nodes import ProcessNode

PROCESS_STATES = ("created", "running", "waiting", "finished", "excepted", "killed")
#: Longest status text in ``process list`` (``process show`` has all of it).
STATUS_WIDTH = 48


# -- list ------------------------------------------------------------------------------------------
#: Cells the terminal shows shorter than the fact (``--raw`` gives the fact): times as
#: "2m ago", a long status cut.
TERMINAL_CELLS: dict[str, Callable[[ProcessRow], Any]] = {
    "ctime": lambda r: relative_time(r.ctime),
    "mtime": lambda r: relative_time(r.mtime),
    "status": lambda r: shorten(process_status(r.process_state, r.attributes)),
}


def _cell(name: str) -> Callable[[ProcessRow], Any]:
    return TERMINAL_CELLS.get(name) or PROCESS_LIST_COLUMNS[name].value


def shorten(text: str, width: int = STATUS_WIDTH) -> str:
    """``text`` cut to ``width`` characters, ending in '…' when cut."""
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def nothing_listed(states: tuple[str, ...] | None, filtered: bool) -> str:
    """What ``process list`` says instead of an empty table."""
    if states != ACTIVE_STATES:
        return "No process matches."
    what = "No active process matches" if filtered else "Nothing active"
    return f"{what}; use -a to list finished processes too."


def parse_projection(values: tuple[str, ...]) -> list[str]:
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in PROCESS_LIST_COLUMNS]
    if unknown:
        # Wrong usage of the command (exit 2), as click's own checks of a value are.
        raise click.BadParameter(
            f"unknown column {', '.join(unknown)}; choose from {', '.join(PROCESS_LIST_COLUMNS)}.",
            param_hint="'-P' / '--project'",
        )
    return names or list(DEFAULT_LIST_PROJECTION)


_CONTROL = "veglia.cli.cmd_process_control"
#: Sub-commands of their own modules, imported when they run: process list loads neither
#: the ORM nor the engine.
PROCESS_SUBCOMMANDS: LazyCommands = {
    "dump": (
        "veglia.cli.cmd_process_dump",
        "process_dump_command",
        "Write process PK to a folder: its inputs, outputs, a calc job's submit script and "
        "retrieved files, and (in sub-folders) each process a workflow called, with a README.",
    ),
    "kill": (_CONTROL, "process_kill", "Kill processes; a calc job's scheduler job is cancelled."),
    "pause": (_CONTROL, "process_pause", "Pause processes; they keep their place."),
    "play": (
        _CONTROL,
        "process_play",
        "Play paused processes (after a transport failure, say).",
    ),
    "repair": (
        _CONTROL,
        "process_repair",
        "Queue again active processes that no worker holds and whose task was lost.",
    ),
    "rerun": (
        "veglia.cli.cmd_process_rerun",
        "process_rerun_command",
        "Run workflow PK again from step STEP: the steps before it reuse the processes the "
        "run launched, STEP and the steps after it run again.",
    ),
    "status": (
        "veglia.cli.cmd_process_status",
        "process_status_command",
        "Show process PK with the processes it called, theirs, ...: their state and status.",
    ),
    "unblock": (
        _CONTROL,
        "process_unblock",
        "Resume jobs blocked by a submission error, after its cause is fixed: each is uploaded "
        "and submitted again.",
    ),
}


@click.group("process", cls=LazyGroup, lazy_commands=PROCESS_SUBCOMMANDS)
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
# -X is verdi's name of --failed.
@click.option(
    "-f", "-X", "--failed", is_flag=True, help="Only finished processes with exit status != 0."
)
@click.option("--paused", is_flag=True, help="Only paused processes.")
@click.option(
    "-p",
    "--past-days",
    type=WholeNumber(min=0, max=MAX_PAST_DAYS),
    help="Only processes created in the last N days.",
)
@click.option(
    "-l",
    "--limit",
    type=WholeNumber(min=1, max=MAX_INTEGER),
    help="Only the N with the highest --order-by key (by default the N most recent).",
)
@click.option(
    "-E",
    "--exit-status",
    type=WholeNumber(min=-MAX_INTEGER - 1, max=MAX_INTEGER),
    help="Only finished with this exit status; implies --all.",
)
@click.option(
    "-L",
    "--label",
    help="Only those whose label holds this text, or matches this glob (* and ?); any case.",
)
@click.option(
    "-O",
    "--order-by",
    type=click.Choice(list(ORDER_BY)),
    default="ctime",
    show_default=True,
    help="Order by this (callers keep their called processes under them).",
)
@click.option(
    "-D",
    "--order-direction",
    type=click.Choice(["asc", "desc"]),
    default="asc",
    show_default=True,
    help="Ascending (oldest first, by default) or descending.",
)
@click.option("-G", "--group", "group", metavar="GROUP", help="Only processes in this group.")
@click.option(
    "-C",
    "--called-by",
    "caller",
    type=WholeNumber(min=0, max=MAX_INTEGER),
    metavar="PK",
    help="Only the processes that process PK called (a workflow's steps).",
)
@click.option(
    "--setup",
    "setup",
    metavar="NAME",
    help="Only the runs pipeline setup NAME started (any version), with their element.",
)
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
    paused: bool,
    past_days: int | None,
    limit: int | None,
    group: str | None,
    caller: int | None,
    setup: str | None,
    exit_status: int | None,
    label: str | None,
    order_by: str,
    order_direction: str,
    project: tuple[str, ...],
    raw: bool,
) -> None:
    """List active processes (created, running, waiting); -a for all."""
    names = parse_projection(project)
    if setup is not None and not project:
        # A setup's runs are told apart by their element more than by their label.
        names.insert(names.index("label") + 1, "element")
    state.profile  # noqa: B018 -- load the chosen profile
    every = show_all or failed or exit_status is not None
    chosen = states or (None if every else ACTIVE_STATES)
    reads = [PROCESS_LIST_COLUMNS[name].reads for name in names]
    filters: dict[str, Any] = {
        "failed": failed,
        "paused": True if paused else None,
        "past_days": past_days,
        "limit": limit,
        "label_pattern": label,
        "exit_status": exit_status,
        "group": group,
        "caller": caller,
        "pipeline_setup": setup,
        "order_by": order_by,
        "descending": order_direction == "desc",
        "attribute_keys": None if None in reads else {k for keys in reads for k in keys or ()},
    }
    rows = select_processes(chosen, **filters)
    filtered = bool(
        paused or label or group or caller is not None or past_days is not None or setup is not None
    )
    if not rows and not raw:
        if setup is not None:
            # Lazy: pipeline setups are read only to tell a wrong name from one without runs.
            from veglia.pipeline_setups import load_pipeline_setup

            load_pipeline_setup(setup)  # an unknown name is an error, not an empty list
        console.print(nothing_listed(chosen, filtered=filtered))
        return
    tree_column = names.index("process_type") if "process_type" in names else 0
    table = []
    formats = [PROCESS_LIST_COLUMNS[name].value if raw else _cell(name) for name in names]
    for row, depth in as_tree(rows):
        cells = [cell(row) for cell in formats]
        if depth and not raw:
            cells[tree_column] = f"{'   ' * (depth - 1)}└─ {cells[tree_column]}"
        table.append(cells)
    print_table([PROCESS_LIST_COLUMNS[name].header for name in names], table, raw=raw)
    every_active = (
        not (filtered or failed or limit or exit_status is not None)
        and (chosen is None or set(ACTIVE_STATES) <= set(chosen))
        and (filters["attribute_keys"] is None or DAEMON in filters["attribute_keys"])
    )
    # The rows hold every unfinished process: they are counted, not asked for again.
    warn_if_waiting_for_no_daemon(rows if every_active else None)


@process_group.command("show")
@click.argument(
    "identifiers", nargs=-1, required=True, metavar="PK...", shell_complete=complete_process_pks
)
@click.option("--log-lines", type=WholeNumber(min=0), default=10, show_default=True)
@pass_state
def process_show(state: CliState, identifiers: tuple[str, ...], log_lines: int) -> None:
    """Show state, job, inputs, outputs and the last log lines of each process PK."""
    # Lazy: it needs the ORM and the engine, which process list does without.
    from veglia.cli.process_show import show_process

    state.profile  # noqa: B018
    for index, identifier in enumerate(identifiers):
        node = load_process(identifier)
        if index:
            console.print("\n" + "─" * 60 + "\n")
        show_process(node, log_lines)


@process_group.command("report")
@click.argument(
    "identifiers", nargs=-1, required=True, metavar="PK...", shell_complete=complete_process_pks
)
@click.option("-l", "--levelname", help="Only messages of this level (REPORT, ERROR, ...).")
@click.option("-m", "--max-depth", type=WholeNumber(min=0), help="Depth of called processes.")
@pass_state
def process_report(
    state: CliState, identifiers: tuple[str, ...], levelname: str | None, max_depth: int | None
) -> None:
    """Print the log of each process PK, and of the processes it called."""
    state.profile  # noqa: B018

    def report(node: ProcessNode, depth: int) -> bool:
        logs = [x for x in node.logs if not levelname or x.levelname == levelname.upper()]
        print_logs(node, logs, "  " * depth)
        found = bool(logs)
        if max_depth is None or depth < max_depth:
            for child in node.called:
                found = report(child, depth + 1) or found
        return found

    for identifier in identifiers:
        if not report(load_process(identifier), 0):
            console.print(f"No log messages recorded for process {identifier}.")


@process_group.command("watch")
@click.argument("identifier", metavar="PK", shell_complete=complete_process_pks)
@click.option("--interval", type=Number(min=0.05), default=0.5, show_default=True)
@click.option(
    "--timeout",
    type=Number(min=0),
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
        raise click.exceptions.Exit(CliExit.INTERRUPTED) from None


COMMANDS = [process_group]
