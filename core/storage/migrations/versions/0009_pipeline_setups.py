"""pipeline setups: named, versioned records of a process run per element of a data source

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

#: A migration keeps the types it was written with, whatever tables.py later says.
_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipeline_setups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("process", sa.String(length=255), nullable=False),
        sa.Column("inputs", _JSON, nullable=False),
        sa.Column("options", _JSON, nullable=False),
        sa.Column("input_port", sa.String(length=255), nullable=False),
        sa.Column("source", sa.String(length=255), nullable=False),
        sa.Column("source_settings", _JSON, nullable=False),
        sa.Column("source_computer", sa.String(length=255), nullable=True),
        sa.Column("max_active", sa.Integer(), nullable=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_pipeline_setups_user_id_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipeline_setups")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_pipeline_setups_name_version")),
    )


def downgrade() -> None:
    op.drop_table("pipeline_setups")
