"""indexes on the attributes looked up among many finished jobs

The caching and right-sizing look-ups compare one attribute of finished jobs (``cache_hash``,
``similarity_key``): without an index on it each look-up reads every finished calc job (on
SQLite, 0.32 s a look-up with 100,000 nodes). The indexes are on the expression
:func:`veglia.storage.attribute_text.attribute_text` writes, which the look-ups use, so the
planners match them. The other queries of ``process list``/``show`` and the daemon already
use indexes (``bench/db_scale.py`` prints their plans).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: The attributes indexed (veglia.orm.attributes.CACHE_HASH, SIMILARITY_KEY).
INDEXED_ATTRIBUTES = {
    "ix_nodes_cache_hash": "cache_hash",
    "ix_nodes_similarity_key": "similarity_key",
}


def _expression(key: str) -> sa.TextClause:
    if op.get_bind().dialect.name == "postgresql":
        return sa.text(f"(attributes ->> '{key}')")
    return sa.text(f"json_extract(attributes, '$.\"{key}\"')")


def upgrade() -> None:
    for name, key in INDEXED_ATTRIBUTES.items():
        op.create_index(name, "nodes", [_expression(key)], unique=False)


def downgrade() -> None:
    for name in INDEXED_ATTRIBUTES:
        op.drop_index(name, table_name="nodes")
