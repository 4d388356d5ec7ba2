"""Stored nodes as their classes: :func:`load_node` and :func:`node_type_class`.

Each kind of node registers its class by ``node_type`` when its module is defined
(:mod:`veglia.orm.data`, :mod:`veglia.orm.process_nodes`, both above
:mod:`veglia.orm.nodes`); this module stands above the kinds and imports them all, so a node
loaded here, and every node reached from it by its links, comes back as its own class.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

# Imported for their side effect: each kind registers its class in _NODE_CLASSES.
import veglia.orm.data
import veglia.orm.process_nodes  # noqa: F401
from veglia.exceptions import NotExistent
from veglia.manage import get_storage
from veglia.orm.nodes import (
    _NODE_BY_PK,
    _NODE_BY_UUID,
    _NODE_CLASSES,
    _UUID_LENGTH,
    MIN_UUID_PREFIX,
    Node,
    is_uuid_prefix,
    row_by_uuid_prefix,
)
from veglia.row_ids import pk_of
from veglia.storage.tables import nodes

__all__ = ["load_node", "node_of_row", "node_type_class"]


def node_type_class(node_type: str) -> type[Node]:
    """The class of nodes stored with ``node_type`` (:class:`Node` for an unknown one)."""
    return _NODE_CLASSES.get(node_type, Node)


def node_of_row(row: Any) -> Node:
    """The node of a stored row of the nodes table, as its class."""
    return Node._from_row(row)


def load_node(identifier: int | str) -> Node:
    """A stored node by pk, or by UUID (or a unique UUID prefix)."""
    # By pk or a whole UUID (as checkpoints hold), a row of the table: no ORM object to
    # build. By the unique index, which SQLite's LIKE for a prefix cannot use.
    text = str(identifier)
    row: sa.Row[Any] | None = None
    by_prefix = False
    if isinstance(identifier, int) or text.isdigit():
        if (pk := pk_of(identifier)) is not None:
            with get_storage().connection() as connection:
                row = connection.execute(_NODE_BY_PK, {"key": pk}).first()
        # Digits that are no pk may still start a UUID ("86536159"); a number never does.
        by_prefix = row is None and not isinstance(identifier, int)
    elif len(text) == _UUID_LENGTH:
        with get_storage().connection() as connection:
            row = connection.execute(_NODE_BY_UUID, {"key": identifier}).first()
    elif is_uuid_prefix(text):
        by_prefix = True
    else:
        raise NotExistent(
            f"No node with pk or UUID {identifier!r} (a UUID prefix is {MIN_UUID_PREFIX} or "
            "more of its first hex digits)."
        )
    if by_prefix:
        with get_storage().connection() as connection:
            row = row_by_uuid_prefix(connection, nodes, text, "node")
    if row is None or row.node_type == "selftest":
        raise NotExistent(f"No node with pk or UUID {identifier!r}.")
    return Node._from_row(row)
