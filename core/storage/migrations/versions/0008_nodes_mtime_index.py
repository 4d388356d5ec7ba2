"""an index on the time a node last changed

The web view asks the database once a second, while someone watches a page, whether anything
changed (:func:`veglia.orm.queries.change_stamp`): the newest ``nodes.mtime``. Without an
index that reads every node; with it, one step down the index.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 05:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_nodes_mtime", "nodes", ["mtime"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_nodes_mtime", table_name="nodes")
