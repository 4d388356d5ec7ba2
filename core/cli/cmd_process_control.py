"""``veglia process kill/pause/play/unblock/repair``: acting on processes, wherever they run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import click

from veglia.cli.completion import complete_process_pks
from veglia.cli.node_args import load_process
from veglia.cli.numbers import Number
from veglia.cli.output import echo_success, echo_warning
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import VegliaError
from veglia.orm.queries import active_process_pks
from veglia.wording import a_or_an

if TYPE_CHECKING:
    from plumpy.ports import PortNamespace


def _control(
    state: CliState,
    action: str,
    pks: tuple[int | str, ...],
    everything: bool,
    message: str,
    timeout: float,
) -> int:
    # Lazy: the engine only for a command that acts (process list starts quickly).
    from veglia.engine.daemon.control import control_process

    state.profile  # noqa: B018 - loads the profile
    if everything:
        pks = tuple(active_process_pks(paused=True if action == "play" else None))
        if not pks:
            which = "paused" if action == "play" else "active"
            echo_success(f"No {which} process to {action}.")
            return 0
    if not pks:
        raise click.UsageError("Give process PKs, or --all.")
    failed = 0
    for pk in pks:
        node = load_process(pk)
        try:
            echo_success(control_process(node, action, message, timeout))
        except VegliaError as exc:
            echo_warning(str(exc))
            failed += 1
    return 1 if failed else 0


def _control_command(action: str, help_text: str) -> click.Command:
    @click.command(action, help=help_text)
    @click.argument("pks", nargs=-1, metavar="[PK...]", shell_complete=complete_process_pks)
    @click.option("-a", "--all", "everything", is_flag=True, help=f"{action} every one.")
    @click.option("-m", "--message", default="", help="Reason, recorded on the node.")
    @click.option(
        "-t",
        "--timeout",
        type=Number(min=0),
        default=60.0,
        show_default=True,
        help="Seconds to wait.",
    )
    @pass_state
    def command(
        state: CliState, pks: tuple[str, ...], everything: bool, message: str, timeout: float
    ) -> int:
        return _control(state, action, pks, everything, message, timeout)

    return command


def _option_value(text: str) -> tuple[str, Any]:
    import json

    # Lazy: the engine only for a command that acts (process list starts quickly).
    from veglia.engine.calcjob import CalcJob

    name, sep, value_text = text.partition("=")
    # the options namespace of the metadata namespace (plumpy types a port as either)
    metadata = cast("PortNamespace", CalcJob.spec().inputs["metadata"])
    ports = cast("PortNamespace", metadata["options"])
    if not sep or name not in ports:
        raise click.BadParameter(
            f"{text!r} is not NAME=VALUE with NAME one of {', '.join(sorted(ports))}.",
            param_hint="--option",
        )
    try:
        value = json.loads(value_text)
    except json.JSONDecodeError:
        value = value_text
    valid_type = getattr(ports[name], "valid_type", None)
    if valid_type is not None and not isinstance(value, valid_type):
        kinds = valid_type if isinstance(valid_type, tuple) else (valid_type,)
        kind = " or ".join(a_or_an(k.__name__) for k in kinds if k is not type(None))
        raise click.BadParameter(f"{name} takes {kind}, not {value_text!r}.", param_hint="--option")
    error = ports[name].validate(value)
    if error is not None:
        raise click.BadParameter(f"{name}: {error.message}", param_hint="--option")
    return name, value


@click.command("unblock")
@click.argument("pks", nargs=-1, metavar="[PK...]", shell_complete=complete_process_pks)
@click.option("-a", "--all", "everything", is_flag=True, help="Every blocked process.")
@click.option(
    "-o",
    "--option",
    "options",
    multiple=True,
    metavar="NAME=VALUE",
    help="Change a job option first (queue_name=short, account=proj); repeatable.",
)
@click.option(
    "-t", "--timeout", type=Number(min=0), default=60.0, show_default=True, help="Seconds to wait."
)
@pass_state
def process_unblock(
    state: CliState,
    pks: tuple[int | str, ...],
    everything: bool,
    options: tuple[str, ...],
    timeout: float,
) -> int:
    """Resume jobs blocked by a submission error, after its cause is fixed: each is
    uploaded and submitted again."""
    # Lazy: the engine and the ORM only for a command that acts (process list starts quickly).
    from veglia.engine.daemon.control import unblock_process

    changes = dict(_option_value(text) for text in options)
    state.profile  # noqa: B018 - loads the profile
    if everything:
        pks = tuple(active_process_pks(blocked=True))
        if not pks:
            echo_success("No process is blocked.")
            return 0
    if not pks:
        raise click.UsageError("Give process PKs, or --all.")
    failed = 0
    for pk in pks:
        node = load_process(pk)  # a missing pk exits 4, as everywhere
        try:
            echo_success(unblock_process(node, changes, timeout))
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
    # Lazy: the engine only for a command that acts (process list starts quickly).
    from veglia.engine.daemon.reconcile import requeue, stranded

    profile = state.profile
    found = stranded(float(profile.get_option("daemon.lease_timeout")))
    if not found:
        click.echo("No stranded process: each active one is held by a live worker.")
        return 0
    listed = ", ".join(str(pk) for pk in found)
    if dry_run:
        click.echo(f"Held by no live worker: {listed}")
        if profile.broker_url:
            # Lazy: the engine only for a command that acts (process list starts quickly).
            from veglia.engine.daemon.reconcile import queued_tasks

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


process_kill = _control_command("kill", "Kill processes; a calc job's scheduler job is cancelled.")
process_pause = _control_command("pause", "Pause processes; they keep their place.")
process_play = _control_command("play", "Play paused processes (after a transport failure, say).")
