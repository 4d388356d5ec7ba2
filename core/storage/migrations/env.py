"""Alembic environment: runs migrations on the connection veglia hands in."""

from __future__ import annotations

from alembic import context

from veglia.storage.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Run migrations through `veglia storage migrate`, not the alembic CLI.")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite cannot ALTER most things in place; batch mode rebuilds tables instead.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
