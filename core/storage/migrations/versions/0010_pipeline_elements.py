"""pipeline elements and sources: what each setup's source listed, and each element's run

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

#: A migration keeps the types it was written with, whatever tables.py later says.
_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipeline_elements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("setup_name", sa.String(length=255), nullable=False),
        sa.Column("setup_id", sa.Integer(), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("checksum", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("files", _JSON, nullable=False),
        sa.Column("element_metadata", _JSON, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("claimed_by", sa.String(length=255), nullable=True),
        sa.Column("claimed_at", sa.Float(), nullable=True),
        sa.Column("process_id", sa.Integer(), nullable=True),
        sa.Column("seen", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["setup_id"],
            ["pipeline_setups.id"],
            name=op.f("fk_pipeline_elements_setup_id_pipeline_setups"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["process_id"],
            ["nodes.id"],
            name=op.f("fk_pipeline_elements_process_id_nodes"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipeline_elements")),
        sa.UniqueConstraint("setup_name", "key", name=op.f("uq_pipeline_elements_setup_name_key")),
    )
    op.create_index(
        op.f("ix_pipeline_elements_setup_id"), "pipeline_elements", ["setup_id"], unique=False
    )
    op.create_index(
        op.f("ix_pipeline_elements_process_id"), "pipeline_elements", ["process_id"], unique=False
    )
    op.create_index(
        "ix_pipeline_elements_setup_name_state",
        "pipeline_elements",
        ["setup_name", "state"],
        unique=False,
    )
    op.create_table(
        "pipeline_sources",
        sa.Column("setup_name", sa.String(length=255), nullable=False),
        sa.Column("polled", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("problems", _JSON, nullable=False),
        sa.Column("waiting", _JSON, nullable=False),
        sa.Column("listed", sa.Integer(), nullable=False),
        sa.Column("notified_done", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("setup_name", name=op.f("pk_pipeline_sources")),
    )


def downgrade() -> None:
    op.drop_table("pipeline_sources")
    op.drop_index("ix_pipeline_elements_setup_name_state", table_name="pipeline_elements")
    op.drop_index(op.f("ix_pipeline_elements_process_id"), table_name="pipeline_elements")
    op.drop_index(op.f("ix_pipeline_elements_setup_id"), table_name="pipeline_elements")
    op.drop_table("pipeline_elements")
