"""process leases

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "process_leases",
        sa.Column("process_id", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("heartbeat", sa.Float(), nullable=False),
        sa.Column("acquired", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["process_id"],
            ["nodes.id"],
            name=op.f("fk_process_leases_process_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("process_id", name=op.f("pk_process_leases")),
    )
    with op.batch_alter_table("process_leases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_process_leases_worker"), ["worker"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("process_leases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_process_leases_worker"))
    op.drop_table("process_leases")
