"""an index on the ended processes whose scheduler job is still to be cancelled

``process list`` and the daemon ask, each time, for the killed or excepted processes that
still carry ``cancel_pending`` (:func:`veglia.orm.queries.cancel_pending_pks`). Without an
index that reads the attributes of every killed and excepted process: 33 to 68 ms of a
0.6 s ``process list`` with 1,000,000 nodes on SQLite. The index holds only the processes
that carry the attribute (a partial index on ``process_state``, written with the expression
:func:`veglia.storage.attribute_text.attribute_text` writes, which the query uses, so the
planners match it): it is empty nearly always, and a step down it costs nothing.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 07:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

NAME = "ix_nodes_cancel_pending"
#: veglia.orm.attributes.CANCEL_PENDING
KEY = "cancel_pending"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        where = sa.text(f"(attributes ->> '{KEY}') IS NOT NULL")
        op.create_index(NAME, "nodes", ["process_state"], unique=False, postgresql_where=where)
    else:
        where = sa.text(f"json_extract(attributes, '$.\"{KEY}\"') IS NOT NULL")
        op.create_index(NAME, "nodes", ["process_state"], unique=False, sqlite_where=where)


def downgrade() -> None:
    op.drop_index(NAME, table_name="nodes")
