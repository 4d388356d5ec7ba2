"""``veglia shell``: run one command line as a ``core.shell`` calc job."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from veglia import engine, orm
from veglia.cli.completion import complete_computer_labels
from veglia.cli.daemon_hint import warn_if_no_daemon
from veglia.cli.output import echo_info, echo_success
from veglia.cli.state import CliState, pass_state
from veglia.cli.status_line import status_line
from veglia.cli.verdi_forms import veglia_writes
from veglia.entry_points import CalculationFactory

if TYPE_CHECKING:
    from veglia.orm.process_nodes import CalcJobNode


@click.command("shell")
@click.argument("command", required=False)
@click.option(
    "-c",
    "--computer",
    help="Computer label (default: the computer.default option).",
    shell_complete=complete_computer_labels,
)
@click.option(
    "-f",
    "--file",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="A local file to copy into the work directory; repeatable.",
)
@click.option(
    "-o",
    "--output",
    "outputs",
    multiple=True,
    help="A file pattern to bring back as an output; repeatable.",
)
@click.option("--submit", is_flag=True, help="Hand the job to the daemon and return at once.")
@click.option(
    "--propagate-exit",
    is_flag=True,
    help="Exit with the command's own exit status (1 when the job failed without one).",
)
@click.option("-l", "--label", default="", help="Label of the job.")
@pass_state
def shell(
    state: CliState,
    command: str | None,
    computer: str | None,
    files: tuple[str, ...],
    outputs: tuple[str, ...],
    submit: bool,
    propagate_exit: bool,
    label: str,
) -> int:
    """Run COMMAND with bash as a calc job, with full provenance, and print its output."""
    if command is None:  # `verdi shell`, most likely: its interactive Python is `veglia python`
        raise veglia_writes(
            "veglia python (an interactive Python with the profile loaded; `veglia shell "
            "COMMAND` runs COMMAND as a calc job)"
        )
    if not command.strip():
        raise click.UsageError("The command line is empty: give one, as `veglia shell 'echo hi'`.")
    if submit and propagate_exit:
        raise click.UsageError(
            "--propagate-exit waits for the command's exit status; --submit does not wait. "
            "Give one of them."
        )
    state.profile  # noqa: B018 - loads the profile
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str(command)
    if files:
        builder.files = {Path(f).name: orm.SinglefileData(file=f) for f in files}
    if outputs:
        builder.outputs = orm.List(list(outputs))
    if computer:
        builder.metadata.computer = computer
    if label:
        builder.metadata.label = label
    if submit:
        node = engine.submit(builder)
        echo_success(
            f"Submitted process {node.pk}; follow it with `veglia process watch {node.pk}`."
        )
        warn_if_no_daemon()
        return 0
    with status_line():  # on a terminal: state, scheduler state and time so far, on stderr
        results, node = engine.run_get_node(builder)
    if "stdout" in results:
        sys.stdout.write(results["stdout"].get_content().decode(errors="replace"))
    if "stderr" in results:
        sys.stderr.write(results["stderr"].get_content().decode(errors="replace"))
    for name, output in (results.get("files") or {}).items():
        echo_info(f"output file {name}: node {output.pk}")
    status = f"exit {node.exit_status}" if node.exit_status is not None else node.process_state
    if node.is_finished_ok:
        echo_success(f"Process {node.pk} finished ({status}); `veglia process show {node.pk}`.")
    else:
        echo_info(
            f"[red]✘[/red] Process {node.pk} {node.process_state} ({status}): {node.exit_message}"
        )
    if propagate_exit:
        job = cast("CalcJobNode", node)  # a ShellJob's
        return _command_status(job.job_outcome.get("exit_status"), node.is_finished_ok)
    return 0 if node.is_finished_ok else 1


def _command_status(status: int | None, finished_ok: bool) -> int:
    """The command's own exit status as this process's; 1 when it gave none (the job failed
    before it ended), one no process can exit with, or 0 for a job that failed all the same
    (files not retrieved, say): a failed job never looks like a success."""
    if not isinstance(status, int) or not 0 <= status <= 255:
        return 1
    return 1 if status == 0 and not finished_ok else status


COMMANDS = [shell]
