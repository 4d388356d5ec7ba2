"""``veglia verify``: are the stored files still what they were when they were stored?
For a pipeline, it can rerun just the steps that made the damaged files."""

from __future__ import annotations

import sys

import click

from veglia import engine
from veglia.cli.completion import complete_node_pks
from veglia.cli.output import console
from veglia.cli.state import CliState, pass_state
from veglia.engine.rerun import builder_from_node
from veglia.exceptions import NotExistent
from veglia.manage import get_storage
from veglia.orm import queries
from veglia.orm.attributes import RERUN_OF
from veglia.orm.nodes import load_node


def _nodes_to_check(pks: tuple[int, ...]) -> list[int]:
    """The nodes given, and for processes (and the processes they called) the nodes they
    created or returned."""
    if not pks:
        return queries.node_pks()
    known = set(queries.node_pks(pks))
    missing = sorted(set(pks) - known)
    if missing:
        raise NotExistent(f"No node with pk {', '.join(map(str, missing))}.")
    processes = queries.process_tree(known)
    return sorted(processes | queries.created_or_returned(processes))


def _rerun(producers: dict[int, list[int]], bad_blobs: set[str]) -> int:
    """Run each producing job again; the damaged blobs are set aside first, so identical
    new content restores them for every node that shares them."""

    repository = get_storage().repository
    for sha256 in bad_blobs:
        repository.quarantine(sha256)
    failed = 0
    for pk in sorted(producers):
        original = load_node(pk)
        console.print(f"Rerunning process {pk} ({original.process_type})…")
        _, node = engine.run_get_node(builder_from_node(original))  # type: ignore[arg-type]
        node.set_attribute(RERUN_OF, pk)
        if node.is_finished_ok:
            console.print(f"[green]✔[/green] process {pk} ran again as process {node.pk}")
        else:
            failed += 1
            console.print(
                f"[red]✘[/red] process {pk} ran again as process {node.pk}, which failed: "
                f"{node.exit_message}"
            )
    return failed


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
    storage = get_storage()
    node_ids = _nodes_to_check(pks)

    def check() -> tuple[int, int, set[int], set[str]]:
        records = queries.repository_files(node_ids)
        checked: dict[str, str | None] = {}
        bad_nodes: set[int] = set()
        bad_blobs: set[str] = set()
        for node_id, path, sha256 in records:
            if sha256 not in checked:
                try:
                    checked[sha256] = storage.repository.hash_of_stored(sha256)
                except NotExistent:
                    checked[sha256] = None
            actual = checked[sha256]
            if actual != sha256:
                bad_nodes.add(node_id)
                bad_blobs.add(sha256)
                what = "is missing" if actual is None else f"now hashes to {actual[:12]}…"
                console.print(f"[red]✘[/red] node {node_id}: {path} {what} (stored {sha256[:12]}…)")
        return len(records), len(bad_blobs), bad_nodes, bad_blobs

    total, bad, bad_nodes, bad_blobs = check()
    if not bad:
        console.print(
            f"[green]✔[/green] {total} files of {len(node_ids)} nodes match their SHA-256."
        )
        return 0
    console.print(f"[red]✘[/red] {len(bad_nodes)} nodes have damaged or missing files.")
    producers = queries.creating_calcjobs(bad_nodes)
    if not producers:
        return 1
    listed = ", ".join(f"process {pk}" for pk in sorted(producers))
    console.print(f"They were made by {listed}.")
    if rerun is None:
        rerun = sys.stdin.isatty() and click.confirm(
            f"Rerun only these {len(producers)} step(s) to make the files again?", default=False
        )
    if not rerun:
        console.print("Rerun them with `veglia verify --rerun " + " ".join(map(str, pks)) + "`.")
        return 1
    failed = _rerun(producers, bad_blobs)
    total, bad, _, _ = check()
    if bad:
        console.print(
            f"[red]✘[/red] {bad} files are still damaged: the rerun made other content, so the "
            "originals cannot be restored; use the rerun's outputs."
        )
        return 1
    console.print(f"[green]✔[/green] restored: {total} files match their SHA-256.")
    return 1 if failed else 0


COMMANDS = [verify]
