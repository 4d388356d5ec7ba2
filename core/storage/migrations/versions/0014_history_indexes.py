"""indexes on the processes that finished successfully, newest first by type and key

A running workflow's estimate of the time left (``process show``, the web view) averages the
latest 100 successful runs of the workflow's type, and of each kind of step it runs (type
and similarity key; :mod:`veglia.engine.calcjob.history`). The indexes on ``process_type``
and on the similarity key found the runs, but PostgreSQL keeps the equal keys of an index in
the order of their rows on disk, not of their ids: to give the latest 100 it read every run
and sorted them (16,334 workflows, 72 ms, with 1,000,000 nodes; 57 ms for two kinds of
step). These indexes hold the type (after the key, for the second), then the id: PostgreSQL
walks them backwards and stops after 100 rows (0.5 ms each).

They are partial, on the processes that finished with exit status 0: a node gets its entry
once, when it finishes (data nodes and running processes, most of the writes, none), and
they are a sixth of the size of whole ones. A planner uses them only for a query whose
condition implies theirs, which PostgreSQL cannot tell from bound values in the generic
plan of a prepared statement: the look-ups write the constants into their SQL
(``history.FINISHED_OK``). SQLite's indexes end with the row id, which is the node's id, so
its plans were right already.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07 11:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: The successful runs, as the look-ups write them (veglia.engine.calcjob.history).
FINISHED_OK = "process_state = 'finished' AND exit_status = 0"


def _similarity_key() -> sa.TextClause:
    # As veglia.storage.attribute_text writes it (veglia.orm.attributes.SIMILARITY_KEY).
    if op.get_bind().dialect.name == "postgresql":
        return sa.text("(attributes ->> 'similarity_key')")
    return sa.text("json_extract(attributes, '$.\"similarity_key\"')")


def _create(name: str, columns: list[str | sa.TextClause]) -> None:
    where = sa.text(FINISHED_OK)
    op.create_index(name, "nodes", columns, postgresql_where=where, sqlite_where=where)


def upgrade() -> None:
    _create("ix_nodes_finished_ok_type", ["process_type", "id"])
    _create("ix_nodes_finished_ok_key", [_similarity_key(), "process_type", "id"])


def downgrade() -> None:
    op.drop_index("ix_nodes_finished_ok_key", table_name="nodes")
    op.drop_index("ix_nodes_finished_ok_type", table_name="nodes")
