"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-12-02 14:48:52.626003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "computers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("scheduler_type", sa.String(length=255), nullable=False),
        sa.Column("transport_type", sa.String(length=255), nullable=False),
        sa.Column(
            "properties",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_computers")),
        sa.UniqueConstraint("label", name=op.f("uq_computers_label")),
        sa.UniqueConstraint("uuid", name=op.f("uq_computers_uuid")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("first_name", sa.String(length=254), nullable=False),
        sa.Column("last_name", sa.String(length=254), nullable=False),
        sa.Column("institution", sa.String(length=254), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "authinfos",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("computer_id", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column(
            "auth_params",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "properties",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["computer_id"],
            ["computers.id"],
            name=op.f("fk_authinfos_computer_id_computers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_authinfos_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_authinfos")),
        sa.UniqueConstraint(
            "user_id", "computer_id", name=op.f("uq_authinfos_user_id_computer_id")
        ),
    )
    op.create_table(
        "codes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("computer_id", sa.Integer(), nullable=False),
        sa.Column("executable", sa.Text(), nullable=False),
        sa.Column("default_calc_job_plugin", sa.String(length=255), nullable=True),
        sa.Column("prepend_text", sa.Text(), nullable=False),
        sa.Column("append_text", sa.Text(), nullable=False),
        sa.Column("ctime", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["computer_id"],
            ["computers.id"],
            name=op.f("fk_codes_computer_id_computers"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_codes")),
        sa.UniqueConstraint("label", "computer_id", name=op.f("uq_codes_label_computer_id")),
        sa.UniqueConstraint("uuid", name=op.f("uq_codes_uuid")),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("node_type", sa.String(length=255), nullable=False),
        sa.Column("process_type", sa.String(length=255), nullable=True),
        sa.Column("label", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("ctime", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mtime", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("computer_id", sa.Integer(), nullable=True),
        sa.Column(
            "attributes",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "extras",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("process_state", sa.String(length=32), nullable=True),
        sa.Column("exit_status", sa.Integer(), nullable=True),
        sa.Column("exit_message", sa.Text(), nullable=True),
        sa.Column("checkpoint", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["computer_id"],
            ["computers.id"],
            name=op.f("fk_nodes_computer_id_computers"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_nodes_user_id_users"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("uuid", name=op.f("uq_nodes_uuid")),
    )
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_nodes_ctime"), ["ctime"], unique=False)
        batch_op.create_index(batch_op.f("ix_nodes_label"), ["label"], unique=False)
        batch_op.create_index(batch_op.f("ix_nodes_node_type"), ["node_type"], unique=False)
        batch_op.create_index(
            "ix_nodes_process_state_node_type", ["process_state", "node_type"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_nodes_process_type"), ["process_type"], unique=False)

    op.create_table(
        "links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("input_id", sa.Integer(), nullable=False),
        sa.Column("output_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=False),
        sa.Column("link_type", sa.String(length=16), nullable=False),
        sa.CheckConstraint(
            "link_type IN ('input', 'create', 'output', 'call')", name=op.f("ck_links_link_type")
        ),
        sa.ForeignKeyConstraint(
            ["input_id"], ["nodes.id"], name=op.f("fk_links_input_id_nodes"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["output_id"], ["nodes.id"], name=op.f("fk_links_output_id_nodes"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_links")),
    )
    with op.batch_alter_table("links", schema=None) as batch_op:
        batch_op.create_index(
            "ix_links_input_id_link_type", ["input_id", "link_type"], unique=False
        )
        batch_op.create_index(
            "ix_links_output_id_link_type", ["output_id", "link_type"], unique=False
        )

    op.create_table(
        "logs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("levelname", sa.String(length=16), nullable=False),
        sa.Column("loggername", sa.String(length=255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column(
            "details",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_logs_node_id_nodes"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_logs")),
        sa.UniqueConstraint("uuid", name=op.f("uq_logs_uuid")),
    )
    with op.batch_alter_table("logs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_logs_levelname"), ["levelname"], unique=False)
        batch_op.create_index(batch_op.f("ix_logs_node_id"), ["node_id"], unique=False)

    op.create_table(
        "repository_files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.id"],
            name=op.f("fk_repository_files_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repository_files")),
        sa.UniqueConstraint("node_id", "path", name=op.f("uq_repository_files_node_id_path")),
    )
    with op.batch_alter_table("repository_files", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_repository_files_node_id"), ["node_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_repository_files_sha256"), ["sha256"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("repository_files", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_repository_files_sha256"))
        batch_op.drop_index(batch_op.f("ix_repository_files_node_id"))

    op.drop_table("repository_files")
    with op.batch_alter_table("logs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_logs_node_id"))
        batch_op.drop_index(batch_op.f("ix_logs_levelname"))

    op.drop_table("logs")
    with op.batch_alter_table("links", schema=None) as batch_op:
        batch_op.drop_index("ix_links_output_id_link_type")
        batch_op.drop_index("ix_links_input_id_link_type")

    op.drop_table("links")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_nodes_process_type"))
        batch_op.drop_index("ix_nodes_process_state_node_type")
        batch_op.drop_index(batch_op.f("ix_nodes_node_type"))
        batch_op.drop_index(batch_op.f("ix_nodes_label"))
        batch_op.drop_index(batch_op.f("ix_nodes_ctime"))

    op.drop_table("nodes")
    op.drop_table("codes")
    op.drop_table("authinfos")
    op.drop_table("users")
    op.drop_table("computers")
