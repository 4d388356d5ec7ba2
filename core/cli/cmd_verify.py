"""``veglia verify``: are the stored files still what they were when they were stored?"""

from __future__ import annotations

import click
import sqlalchemy as sa

from veglia.cli.output import console
from veglia.cli.state import CliState, pass_state


def _nodes_to_check(pks: tuple[int, ...]) -> list[int]:
    """The nodes given, and for processes the nodes they created or returned."""
    from veglia.manage import get_storage
    from veglia.storage.models import Link, Node

    with get_storage().session() as session:
        if not pks:
            return list(session.scalars(sa.select(Node.id).order_by(Node.id)))
        created = session.scalars(
            sa.select(Link.output_id).where(
                Link.input_id.in_(pks), Link.link_type.in_(("create", "output"))
            )
        ).all()
        known = set(session.scalars(sa.select(Node.id).where(Node.id.in_(pks))))
    missing = sorted(set(pks) - known)
    if missing:
        from veglia.exceptions import NotExistent

        raise NotExistent(f"No node with pk {', '.join(map(str, missing))}.")
    return sorted(set(pks) | set(created))


@click.command("verify")
@click.argument("pks", nargs=-1, type=int)
@pass_state
def verify(state: CliState, pks: tuple[int, ...]) -> int:
    """Recompute the SHA-256 of stored files (of PKS and what they produced, or of all)."""
    from veglia.exceptions import NotExistent
    from veglia.manage import get_storage
    from veglia.storage.models import RepositoryFile

    state.profile  # noqa: B018 - loads the profile
    storage = get_storage()
    node_ids = _nodes_to_check(pks)
    with storage.session() as session:
        records = session.execute(
            sa.select(RepositoryFile.node_id, RepositoryFile.path, RepositoryFile.sha256)
            .where(RepositoryFile.node_id.in_(node_ids))
            .order_by(RepositoryFile.node_id, RepositoryFile.path)
        ).all()
    checked: dict[str, str | None] = {}
    bad = 0
    for node_id, path, sha256 in records:
        if sha256 not in checked:
            try:
                checked[sha256] = storage.repository.hash_of_stored(sha256)
            except NotExistent:
                checked[sha256] = None
        actual = checked[sha256]
        if actual != sha256:
            bad += 1
            what = "is missing" if actual is None else f"now hashes to {actual[:12]}…"
            console.print(f"[red]✘[/red] node {node_id}: {path} {what} (stored {sha256[:12]}…)")
    if bad:
        console.print(f"[red]✘[/red] {bad} of {len(records)} files failed the check.")
        return 1
    console.print(
        f"[green]✔[/green] {len(records)} files of {len(node_ids)} nodes match their SHA-256."
    )
    return 0


COMMANDS = [verify]
