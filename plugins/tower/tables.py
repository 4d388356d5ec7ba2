"""Tower's own tables in the profile's database: its outbox and runs.

Made by Tower's migrations (``migrations/``, version table ``alembic_version_tower``), not
the core's; releases before core schema 0011 made them in the core's, and Tower's first
migration adopts them there, rows and all. Only SQLAlchemy Core here: every process loads
Tower's hook module, which names these tables to the core (``storage_migrations``).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from veglia.plugin_api import NAMING_CONVENTION, JsonType, PluginMigrations, utcnow

__all__ = ["MIGRATIONS", "metadata", "report_outbox", "report_runs"]

metadata = MetaData(naming_convention=NAMING_CONVENTION)

#: Records Tower must deliver: kept until they are sent. The unique key makes queueing
#: idempotent: a record queued twice is stored once.
report_outbox = Table(
    "report_outbox",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("reporter", String(64), nullable=False, index=True),
    Column("run_key", String(255), nullable=False, index=True),
    # a task event ("submitted", "running", "task" for its end) or "complete" (the run ended)
    Column("kind", String(16), nullable=False),
    Column("task_id", Integer, nullable=False, default=0),
    Column("attempt", Integer, nullable=False, default=1),
    Column("payload", JsonType(), nullable=False, default=dict),
    # pending, sent ("failed" in rows of 0.x, sent again by `veglia tower retry`)
    Column("status", String(16), nullable=False, default="pending", index=True),
    Column("tries", Integer, nullable=False, default=0),
    Column("last_error", Text, nullable=True),
    Column("created", DateTime(timezone=True), nullable=False, default=utcnow),
    Column("sent_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("reporter", "run_key", "kind", "task_id", "attempt"),
)

#: A run as the Platform knows it (its workflow id).
report_runs = Table(
    "report_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("reporter", String(64), nullable=False),
    Column("run_key", String(255), nullable=False),
    Column("remote_id", String(255), nullable=True),
    # new, begun, completed, or refused (``data["refused"]`` says which request and why)
    Column("state", String(16), nullable=False, default="new"),
    Column("data", JsonType(), nullable=False, default=dict),
    Column("last_sent", DateTime(timezone=True), nullable=True),
    UniqueConstraint("reporter", "run_key"),
)

MIGRATIONS = PluginMigrations(
    name="tower",
    metadata=metadata,
    versions=Path(__file__).parent / "migrations",
    head="0001",
)
