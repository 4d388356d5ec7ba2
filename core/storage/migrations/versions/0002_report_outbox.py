"""report outbox

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 16:09:36.799891
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "report_outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("reporter", sa.String(length=64), nullable=False),
        sa.Column("run_key", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
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
    with op.batch_alter_table("report_outbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_report_outbox_reporter"), ["reporter"], unique=False)
        batch_op.create_index(batch_op.f("ix_report_outbox_run_key"), ["run_key"], unique=False)
        batch_op.create_index(batch_op.f("ix_report_outbox_status"), ["status"], unique=False)

    op.create_table(
        "report_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("reporter", sa.String(length=64), nullable=False),
        sa.Column("run_key", sa.String(length=255), nullable=False),
        sa.Column("remote_id", sa.String(length=255), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("last_sent", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_report_runs")),
        sa.UniqueConstraint("reporter", "run_key", name=op.f("uq_report_runs_reporter_run_key")),
    )


def downgrade() -> None:

    op.drop_table("report_runs")
    with op.batch_alter_table("report_outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_report_outbox_status"))
        batch_op.drop_index(batch_op.f("ix_report_outbox_run_key"))
        batch_op.drop_index(batch_op.f("ix_report_outbox_reporter"))

    op.drop_table("report_outbox")
