"""Alembic environment of a plugin's own migrations (``veglia.storage.plugin_schema``).

Runs on the connection veglia hands in, with the plugin's metadata and version table, so a
plugin ships its version files only.
"""

from __future__ import annotations

from typing import Any

from alembic import context

attributes = context.config.attributes
connection = attributes.get("connection")
if connection is None:
    raise RuntimeError("Run migrations through `veglia storage migrate`, not the alembic CLI.")
metadata = attributes["metadata"]


def _own(name: str | None, type_: str, parent_names: Any) -> bool:
    # Autogenerate compares the plugin's tables only: the core's and other plugins' are not
    # its to create or drop.
    return type_ != "table" or name in metadata.tables


context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=attributes["version_table"],
    include_name=_own,
    # SQLite cannot ALTER most things in place; batch mode rebuilds tables instead.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
