"""Tower's outbox and runs, adopted where the core's schema made them before 0011

Revision ID: 0001
Revises:
Create Date: 2026-12-06 14:30:00

Releases before core schema 0011 made ``report_outbox`` and ``report_runs`` in the core's
migrations (its 0002), in the very shape below. Where they are, this keeps them as they
are, rows and all; where they are not (a new profile, or one from before 0002), it makes
them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

#: A migration keeps the types it was written with, whatever tables.py later says.
_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    if "report_outbox" not in existing:
        op.create_table(
            "report_outbox",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("reporter", sa.String(length=64), nullable=False),
            sa.Column("run_key", sa.String(length=255), nullable=False),
            sa.Column("kind", sa.String(length=16), nullable=False),
            sa.Column("task_id", sa.Integer(), nullable=False),
            sa.Column("attempt", sa.Integer(), nullable=False),
            sa.Column("payload", _JSON, nullable=False),
            sa.Column("status", sa.String(length=16), nullable=False),
            sa.Column("tries", sa.Integer(), nullable=False),
            sa.Column("last_error", sa.Text(), nullable=True),
            sa.Column("created", sa.DateTime(timezone=True), nullable=False),
            sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_report_outbox")),
            sa.UniqueConstraint(
                "reporter",
                "run_key",
                "kind",
                "task_id",
                "attempt",
                name=op.f("uq_report_outbox_reporter_run_key_kind_task_id_attempt"),
            ),
        )
        for column in ("reporter", "run_key", "status"):
            op.create_index(op.f(f"ix_report_outbox_{column}"), "report_outbox", [column])
    if "report_runs" not in existing:
        op.create_table(
            "report_runs",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("reporter", sa.String(length=64), nullable=False),
            sa.Column("run_key", sa.String(length=255), nullable=False),
            sa.Column("remote_id", sa.String(length=255), nullable=True),
            sa.Column("state", sa.String(length=16), nullable=False),
            sa.Column("data", _JSON, nullable=False),
            sa.Column("last_sent", sa.DateTime(timezone=True), nullable=True),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_report_runs")),
            sa.UniqueConstraint(
                "reporter", "run_key", name=op.f("uq_report_runs_reporter_run_key")
            ),
        )


def downgrade() -> None:
    op.drop_table("report_runs")
    op.drop_table("report_outbox")
