"""``veglia daemon``: start, stop, restart, incr, decr, status and logs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import click

from veglia.cli.numbers import WholeNumber
from veglia.cli.output import echo_success, echo_warning, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.config.private_paths import private_file, private_folder
from veglia.engine.daemon import DaemonFiles
from veglia.engine.daemon.files import write_json
from veglia.engine.daemon.installed_code import old_code_message
from veglia.engine.daemon.scaling import request_change
from veglia.exceptions import DaemonError
from veglia.plugin_manager import gather, gather_strict
from veglia.wording import plural

#: The most workers a daemon starts: each is a process of about 100 MB, and a mistyped
#: number must not start a machine's worth of them.
MAX_WORKERS = 256


def _files(state: CliState) -> DaemonFiles:

    return DaemonFiles(state.profile)


@click.group("daemon")
def daemon_group() -> None:
    """Start, stop and inspect the daemon that runs submitted processes."""


class _StartCommand(click.Command):
    """``daemon start`` with the options plugins add (the ``daemon_start_options`` hook),
    asked for once the command line is read: ``veglia --help`` does not need them."""

    _plugin_options: list[click.Parameter] | None = None

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if self._plugin_options is None:
            self._plugin_options = [option for _, option in gather_strict("daemon_start_options")]
        return [*super().get_params(ctx), *self._plugin_options]


def start_daemon(
    state: CliState, workers: int, start_options: dict[str, object] | None = None
) -> None:
    """Start the daemon; with ``start_options`` (the plugins' options), kept for its
    workers, else with those it was last started with (a restart)."""
    files = _files(state)
    if files.supervisor_pid():
        raise DaemonError(
            f"The daemon of {state.profile.name!r} runs already (pid {files.supervisor_pid()})."
        )
    if not state.profile.broker_url and workers > 1:
        echo_warning("Without a broker the daemon runs one worker; set broker.url for more.")
        workers = 1
    private_folder(files.folder)
    if start_options is not None:
        write_json(files.start_options, start_options)
    with open(private_file(files.log), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "veglia.engine.daemon", "supervise", str(workers)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **files.spawn_options(VEGLIA_PROFILE=state.profile.name),
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = files.read_status()
        if status.get("workers") and files.supervisor_pid():
            echo_success(
                f"Daemon of {state.profile.name!r} started: supervisor {status['supervisor']}, "
                f"{plural(len(status['workers']), 'worker')}."
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


@daemon_group.command("start", cls=_StartCommand)
@click.argument("workers", type=WholeNumber(min=1, max=MAX_WORKERS), default=1)
@pass_state
def daemon_start(state: CliState, /, workers: int, **start_options: object) -> None:
    """Start the daemon with WORKERS worker processes (default 1)."""
    start_daemon(state, workers, start_options)


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


def change_workers(state: CliState, delta: int) -> None:
    """Add (``delta`` > 0) or remove workers of the running daemon, and say how many it has
    now; :class:`DaemonError` when none runs or the change cannot be made."""
    files = _files(state)
    name = state.profile.name
    if files.supervisor_pid() is None:
        raise DaemonError(
            f"The daemon of {name!r} is not running; start it with `veglia daemon start N`."
        )
    status = files.read_status()
    before = len(status.get("workers", []))
    if delta > 0 and not status.get("broker", True):
        raise DaemonError(
            f"The daemon of {name!r} runs without a broker, so with one worker; set broker.url "
            "and restart it (`veglia daemon restart`) for more."
        )
    if delta < 0 and before == 1:
        raise DaemonError(
            f"The daemon of {name!r} has 1 worker, the fewest it runs; stop it with "
            "`veglia daemon stop`."
        )
    request_change(files, delta)
    after = len(files.read_status().get("workers", []))
    change = "added" if after > before else "removed"
    done = f"{change} {abs(after - before)}" if after != before else "none changed"
    if delta < 0 and before + delta < 1:
        done += ": it keeps one"
    echo_success(f"Daemon of {name!r} now has {plural(after, 'worker')} ({done}).")


@daemon_group.command("incr")
@click.argument("number", type=WholeNumber(min=1, max=MAX_WORKERS), default=1, metavar="[N]")
@pass_state
def daemon_incr(state: CliState, number: int) -> None:
    """Add N workers (default 1) to the running daemon; it needs a broker for more than one."""
    change_workers(state, number)


@daemon_group.command("decr")
@click.argument("number", type=WholeNumber(min=1, max=MAX_WORKERS), default=1, metavar="[N]")
@pass_state
def daemon_decr(state: CliState, number: int) -> None:
    """Remove N workers (default 1) from the running daemon, never the last one.

    A removed worker stops as at `daemon stop`: its processes, checkpointed, go on in the
    other workers."""
    change_workers(state, -number)


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
    repaired = None  # counted by the worker that repairs (with a broker only)
    for worker in status.get("workers", []):
        try:
            seen = json.loads(files.worker_status(worker["pid"]).read_text())
            live, dehydrated = seen["live"], seen["dehydrated"]
        except (OSError, ValueError, KeyError):
            seen, live, dehydrated = {}, "?", "?"
        if "repaired" in seen:
            repaired = (repaired or 0) + seen["repaired"]
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(worker["started"]))
        rows.append((worker["pid"], started, worker["restarts"], live, dehydrated))
    if not raw:
        click.echo(
            f"Daemon of {state.profile.name!r} on {socket.gethostname()}: supervisor pid {pid}, "
            f"{plural(len(rows), 'worker')}"
        )
    # Live: in the worker's memory; dehydrated: waiting as rows of the database.
    print_table(("Worker PID", "Started", "Restarts", "Live", "Dehydrated"), rows, raw=raw)
    for retiring in status.get("retiring", []) if not raw else []:
        click.echo(f"Worker {retiring} was removed and is stopping.")
    if not raw and repaired is not None:
        click.echo(f"Stranded processes queued again: {repaired}")
    old_code = old_code_message(state.profile)
    if old_code:
        echo_warning(old_code[0].upper() + old_code[1:] + ".")
    if not raw:
        _plugin_status_lines(state, files)
    return 0


def _plugin_status_lines(state: CliState, files: DaemonFiles) -> None:
    """What plugins serve beside the daemon (the ``daemon_status_lines`` hook)."""
    results, errors = gather(
        "daemon_status_lines", profile=state.profile, start_options=files.read_start_options()
    )
    for _, line in results:
        click.echo(line)
    for plugin, exc in errors:
        echo_warning(f"plugin {plugin} failed in daemon_status_lines: {exc}")


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


COMMANDS = [daemon_group]
