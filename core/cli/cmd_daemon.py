"""``veglia daemon`` and ``veglia process kill/pause/play``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import click

from veglia.cli.output import echo_success, echo_warning, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.config.private_paths import private_file, private_folder
from veglia.exceptions import DaemonError, VegliaError


def _files(state: CliState):
    from veglia.engine.daemon import DaemonFiles

    return DaemonFiles(state.profile)


@click.group("daemon")
def daemon_group() -> None:
    """Start, stop and inspect the daemon that runs submitted processes."""


def start_daemon(state: CliState, workers: int) -> None:
    files = _files(state)
    if files.supervisor_pid():
        raise DaemonError(
            f"The daemon of {state.profile.name!r} runs already (pid {files.supervisor_pid()})."
        )
    if not state.profile.broker_url and workers > 1:
        echo_warning("Without a broker the daemon runs one worker; set broker.url for more.")
        workers = 1
    private_folder(files.folder)
    with open(private_file(files.log), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "veglia.engine.daemon", "supervise", str(workers)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "VEGLIA_PROFILE": state.profile.name},
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = files.read_status()
        if status.get("workers") and files.supervisor_pid():
            echo_success(
                f"Daemon of {state.profile.name!r} started: supervisor {status['supervisor']}, "
                f"{len(status['workers'])} worker(s)."
            )
            return
        time.sleep(0.1)
    raise DaemonError(f"The daemon did not start within 20 s; see {files.log}.")


def stop_daemon(state: CliState, timeout: float = 60.0) -> bool:
    files = _files(state)
    pid = files.supervisor_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if files.supervisor_pid() is None:
            return True
        time.sleep(0.1)
    raise DaemonError(f"The daemon (pid {pid}) did not stop within {timeout:.0f} s.")


@daemon_group.command("start")
@click.argument("workers", type=click.IntRange(min=1), default=1)
@pass_state
def daemon_start(state: CliState, workers: int) -> None:
    """Start the daemon with WORKERS worker processes (default 1)."""
    start_daemon(state, workers)


@daemon_group.command("stop")
@pass_state
def daemon_stop(state: CliState) -> None:
    """Stop the daemon; running processes continue when it starts again."""
    if stop_daemon(state):
        echo_success("Daemon stopped.")
    else:
        echo_success("The daemon was not running.")


@daemon_group.command("restart")
@pass_state
def daemon_restart(state: CliState) -> None:
    """Stop and start the daemon with the same number of workers."""
    workers = len(_files(state).read_status().get("workers", [])) or 1
    stop_daemon(state)
    start_daemon(state, workers)


@daemon_group.command("status")
@raw_option
@pass_state
def daemon_status(state: CliState, raw: bool) -> int:
    """Show the supervisor and each worker with its load; exit 1 when not running."""
    import json

    files = _files(state)
    pid = files.supervisor_pid()
    if pid is None:
        click.echo(f"The daemon of {state.profile.name!r} is not running.")
        return 1
    status = files.read_status()
    rows = []
    for worker in status.get("workers", []):
        try:
            load = json.loads(files.worker_status(worker["pid"]).read_text())["active"]
        except (OSError, ValueError, KeyError):
            load = "?"
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(worker["started"]))
        rows.append((worker["pid"], started, worker["restarts"], load))
    if not raw:
        click.echo(
            f"Daemon of {state.profile.name!r} on {socket.gethostname()}: supervisor pid {pid}"
        )
    print_table(("Worker PID", "Started", "Restarts", "Active processes"), rows, raw=raw)
    if not raw and "repaired" in status:
        click.echo(f"Stranded processes queued again: {status['repaired']}")
    return 0


@daemon_group.command("logs")
@click.option("-n", "--lines", default=50, show_default=True, help="How many last lines.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines.")
@pass_state
def daemon_logs(state: CliState, lines: int, follow: bool) -> None:
    """Print the end of the daemon log."""
    log = _files(state).log
    if not log.exists():
        click.echo("The daemon has written no log yet.")
        return
    with open(log, "rb") as handle:
        for line in handle.read().decode(errors="replace").splitlines()[-lines:]:
            click.echo(line)
        while follow:
            chunk = handle.read()
            if chunk:
                click.echo(chunk.decode(errors="replace"), nl=False)
            time.sleep(0.5)


def _control(
    state: CliState,
    action: str,
    pks: tuple[int, ...],
    everything: bool,
    message: str,
    timeout: float,
) -> int:
    import sqlalchemy as sa

    from veglia.engine.control import control_process
    from veglia.engine.daemon import ACTIVE_STATES
    from veglia.manage import get_storage
    from veglia.orm.nodes import ProcessNode, load_node
    from veglia.storage.models import Node

    state.profile  # noqa: B018 - loads the profile
    if everything:
        with get_storage().session() as session:
            query = sa.select(Node.id).where(Node.process_state.in_(ACTIVE_STATES))
            if action == "play":
                query = query.where(Node.attributes["paused"].as_boolean().is_(True))
            pks = tuple(session.scalars(query.order_by(Node.id)).all())
    if not pks:
        raise click.UsageError("Give process PKs, or --all.")
    failed = 0
    for pk in pks:
        node = load_node(pk)
        if not isinstance(node, ProcessNode):
            raise VegliaError(f"Node {pk} is not a process.")
        try:
            echo_success(control_process(node, action, message, timeout))
        except VegliaError as exc:
            echo_warning(str(exc))
            failed += 1
    return 1 if failed else 0


def _control_command(action: str, help_text: str) -> click.Command:
    @click.command(action, help=help_text)
    @click.argument("pks", nargs=-1, type=int)
    @click.option("-a", "--all", "everything", is_flag=True, help=f"{action} every one.")
    @click.option("-m", "--message", default="", help="Reason, recorded on the node.")
    @click.option("-t", "--timeout", default=60.0, show_default=True, help="Seconds to wait.")
    @pass_state
    def command(
        state: CliState, pks: tuple[int, ...], everything: bool, message: str, timeout: float
    ) -> int:
        return _control(state, action, pks, everything, message, timeout)

    return command


def _option_value(text: str) -> tuple[str, Any]:
    import json

    from veglia.engine.calcjob import CalcJob

    name, sep, value_text = text.partition("=")
    ports = CalcJob.spec().inputs["metadata"]["options"]
    if not sep or name not in ports:
        raise click.BadParameter(
            f"{text!r} is not NAME=VALUE with NAME one of {', '.join(sorted(ports))}.",
            param_hint="--option",
        )
    try:
        value = json.loads(value_text)
    except json.JSONDecodeError:
        value = value_text
    error = ports[name].validate(value)
    if error is not None:
        raise click.BadParameter(f"{name}: {error.message}", param_hint="--option")
    return name, value


@click.command("unblock")
@click.argument("pks", nargs=-1, type=int)
@click.option("-a", "--all", "everything", is_flag=True, help="Every blocked process.")
@click.option(
    "-o",
    "--option",
    "options",
    multiple=True,
    metavar="NAME=VALUE",
    help="Change a job option first (queue_name=short, account=proj); repeatable.",
)
@click.option("-t", "--timeout", default=60.0, show_default=True, help="Seconds to wait.")
@pass_state
def process_unblock(
    state: CliState,
    pks: tuple[int, ...],
    everything: bool,
    options: tuple[str, ...],
    timeout: float,
) -> int:
    """Resume jobs blocked by a submission error, after its cause is fixed: each is
    uploaded and submitted again."""
    import sqlalchemy as sa

    from veglia.engine.control import control_process
    from veglia.engine.daemon import ACTIVE_STATES
    from veglia.manage import get_storage
    from veglia.orm.nodes import CalcJobNode, load_node
    from veglia.storage.models import Node

    changes = dict(_option_value(text) for text in options)
    state.profile  # noqa: B018 - loads the profile
    if everything:
        with get_storage().session() as session:
            query = sa.select(Node.id).where(
                Node.process_state.in_(ACTIVE_STATES), Node.attributes["blocked"].isnot(None)
            )
            pks = tuple(session.scalars(query.order_by(Node.id)).all())
        if not pks:
            echo_success("No process is blocked.")
            return 0
    if not pks:
        raise click.UsageError("Give process PKs, or --all.")
    failed = 0
    for pk in pks:
        node = load_node(pk)
        if not isinstance(node, CalcJobNode) or not node.get_attribute("blocked"):
            echo_warning(f"Process {pk} is not blocked.")
            failed += 1
            continue
        if changes:
            node.set_attribute("options", {**node.options, **changes})
        try:
            control_process(node, "play", "", timeout)
            echo_success(f"Unblocked process {pk}")
        except VegliaError as exc:
            echo_warning(str(exc))
            failed += 1
    return 1 if failed else 0


@click.command("repair")
@click.option("-n", "--dry-run", is_flag=True, help="Only list the stranded processes.")
@pass_state
def process_repair(state: CliState, dry_run: bool) -> int:
    """Queue again active processes that no worker holds and whose task was lost.

    The daemon does this by itself every few seconds; this is for when it is not running,
    or to see what it would do."""
    from veglia.engine.reconcile import requeue, stranded

    profile = state.profile
    found = stranded(float(profile.get_option("daemon.lease_timeout")))
    if not found:
        click.echo("No stranded process: each active one is held by a live worker.")
        return 0
    listed = ", ".join(str(pk) for pk in found)
    if dry_run:
        click.echo(f"Held by no live worker: {listed}")
        if profile.broker_url:
            from veglia.engine.reconcile import queued_tasks

            waiting = queued_tasks(profile)
            click.echo(
                f"{waiting} task(s) wait in the broker for a worker"
                + (": those processes are not lost." if waiting else ": these are stranded.")
            )
        return 0
    if not profile.broker_url:
        click.echo(
            f"Stranded: {listed}. Without a broker the daemon's worker takes them by itself: "
            "`veglia daemon start`."
        )
        return 0
    requeue(found)
    echo_success(f"Queued {len(found)} process(es) again for the daemon: {listed}")
    return 0


PROCESS_COMMANDS = [
    process_repair,
    _control_command("kill", "Kill processes; a calc job's scheduler job is cancelled."),
    _control_command("pause", "Pause processes; they keep their place."),
    _control_command("play", "Play paused processes (after a transport failure, say)."),
    process_unblock,
]
COMMANDS = [daemon_group]
