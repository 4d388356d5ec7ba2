"""``veglia verify``: are the stored files still what they were when they were stored?
For a pipeline, it can rerun just the steps that made the damaged files."""

from __future__ import annotations

import sys

import click

from veglia.cli.completion import complete_node_pks
from veglia.cli.output import console
from veglia.cli.progress_bars import progress_bars
from veglia.cli.state import CliState, pass_state
from veglia.cli.status_line import status_line
from veglia.engine.rerun import record_not_reproducible, run_again, set_aside
from veglia.integrity import FileCheck, check_files, nodes_to_check
from veglia.orm.process_nodes import CalcJobNode
from veglia.wording import plural


def _rerun(producers: dict[int, list[int]], bad_blobs: set[str]) -> dict[int, CalcJobNode]:
    """Run each producing job again, here; ``{pk: its rerun}``."""
    set_aside(bad_blobs)
    reruns = {}
    for pk in sorted(producers):
        console.print(f"Rerunning process {pk}…")
        with status_line():
            node = reruns[pk] = run_again(pk)
        if node.is_finished_ok:
            console.print(f"[green]✔[/green] process {pk} ran again as process {node.pk}")
        else:
            console.print(
                f"[red]✘[/red] process {pk} ran again as process {node.pk}, which failed: "
                f"{node.exit_message}"
            )
    return reruns


def _record_other_content(
    producers: dict[int, list[int]], reruns: dict[int, CalcJobNode], again: FileCheck
) -> None:
    """Note each job whose (finished) rerun made other content, so that it is not offered
    again: a job that is not reproducible stays so."""
    for pk, made in sorted(producers.items()):
        blobs = {f.expected for f in again.damaged if f.node_pk in made}
        if blobs and reruns[pk].is_finished_ok:
            record_not_reproducible(pk, reruns[pk].pk, blobs)
            console.print(
                f"[yellow]![/yellow] process {pk} is not reproducible (rerun {reruns[pk].pk} "
                "made other content): recorded; `veglia verify` reports it from now on and "
                "offers no rerun."
            )


def _print_damaged(result: FileCheck) -> None:
    for file in result.damaged:
        what = "is missing" if file.found is None else f"now hashes to {file.found[:12]}…"
        console.print(
            f"[red]✘[/red] node {file.node_pk}: {file.path} {what} (stored {file.expected[:12]}…)"
        )


@click.command("verify")
@click.argument("pks", nargs=-1, type=int, shell_complete=complete_node_pks)
@click.option(
    "--rerun/--no-rerun",
    default=None,
    help="Rerun the calc jobs that made damaged files (asked when interactive).",
)
@pass_state
def verify(state: CliState, pks: tuple[int, ...], rerun: bool | None) -> int:
    """Recompute the SHA-256 of stored files: of PKS, what they produced and what the
    processes they called produced (or of every node)."""

    state.profile  # noqa: B018 - loads the profile
    node_ids = nodes_to_check(pks)
    with progress_bars() as progress:
        known, result = check_files(node_ids, progress).not_reproducible()
    for pk, record in sorted(known.items()):
        console.print(
            f"[yellow]![/yellow] process {pk}: not reproducible (rerun {record['rerun']} made "
            f"other content), recorded {record['at']}; its damaged files are not counted"
        )
    _print_damaged(result)
    if not result.damaged:
        console.print(
            f"[green]✔[/green] {result.files} files of {len(node_ids)} nodes match their SHA-256."
        )
        return 0
    console.print(f"[red]✘[/red] {len(result.damaged_nodes)} nodes have damaged or missing files.")
    producers = result.producers()
    if not producers:
        return 1
    listed = ", ".join(f"process {pk}" for pk in sorted(producers))
    console.print(f"They were made by {listed}.")
    if rerun is None:
        rerun = sys.stdin.isatty() and click.confirm(
            f"Rerun only {'this step' if len(producers) == 1 else f'these {len(producers)} steps'} "
            "to make the files again?",
            default=False,
        )
    if not rerun:
        console.print("Rerun them with `veglia verify --rerun " + " ".join(map(str, pks)) + "`.")
        return 1
    reruns = _rerun(producers, result.damaged_blobs)
    failed = sum(not node.is_finished_ok for node in reruns.values())
    with progress_bars() as progress:
        again = check_files(node_ids, progress).not_reproducible()[1]
    _print_damaged(again)
    _record_other_content(producers, reruns, again)
    if again.damaged:
        console.print(
            f"[red]✘[/red] {plural(len(again.damaged_blobs), 'file')} "
            f"{'is' if len(again.damaged_blobs) == 1 else 'are'} still damaged: the rerun made "
            "other content, so the originals cannot be restored; use the rerun's outputs."
        )
        return 1
    console.print(f"[green]✔[/green] restored: {again.files} files match their SHA-256.")
    return 1 if failed else 0


COMMANDS = [verify]
