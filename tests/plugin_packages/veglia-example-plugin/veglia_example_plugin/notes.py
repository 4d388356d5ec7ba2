"""The plugin's notes on processes, kept in its own table (see tables.py)."""

from __future__ import annotations

import sqlalchemy as sa

from veglia.plugin_api import get_storage
from veglia_example_plugin.tables import example_notes


def add_note(node_pk: int, text: str) -> None:
    with get_storage().connection() as connection:
        connection.execute(sa.insert(example_notes).values(node_id=node_pk, text=text))


def notes_of(node_pk: int) -> list[str]:
    query = sa.select(example_notes.c.text).where(example_notes.c.node_id == node_pk)
    with get_storage().connection() as connection:
        return [text for (text,) in connection.execute(query)]
