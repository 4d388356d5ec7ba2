"""groups of nodes

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-10 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=False),
        sa.Column("type_string", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_groups_user_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_groups")),
        sa.UniqueConstraint("label", name=op.f("uq_groups_label")),
        sa.UniqueConstraint("uuid", name=op.f("uq_groups_uuid")),
    )
    op.create_table(
        "group_nodes",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["groups.id"],
            name=op.f("fk_group_nodes_group_id_groups"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_group_nodes_node_id_nodes"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("group_id", "node_id", name=op.f("pk_group_nodes")),
    )
    with op.batch_alter_table("group_nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_group_nodes_node_id"), ["node_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("group_nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_group_nodes_node_id"))
    op.drop_table("group_nodes")
    op.drop_table("groups")
