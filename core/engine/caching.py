"""Caching: a calc job identical to one that finished well is not run again.

Identical means the same calculation, code, computer, options and inputs, where an input is
compared by content (type, attributes, file hashes), not by identity. The outputs of the
earlier job are copied onto the new node, which records where they came from.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import CACHE_HASH, OPTIONS
from veglia.orm.nodes import Node, load_node
from veglia.storage import models

if TYPE_CHECKING:
    from veglia.engine.calcjob import CalcJob

__all__ = ["calcjob_hash", "find_cached", "node_hash"]


def node_hash(node: Node) -> str:
    """A digest of what a node holds."""
    content = {
        "type": node.node_type,
        "attributes": node.attributes,
        "files": [(record.path, record.sha256) for record in node.list_objects()],
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def calcjob_hash(process: CalcJob, inputs: list[tuple[str, Any]]) -> str:
    code = process.code
    content = {
        "process_type": process.process_type(),
        "computer": process.computer.label,
        "code": [code.executable, code.prepend_text, code.append_text] if code else None,
        "options": process.node.get_attribute(OPTIONS) if process.node else {},
        "inputs": sorted(
            (label, node_hash(value)) for label, value in inputs if isinstance(value, Node)
        ),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def find_cached(digest: str, exclude_pk: int) -> Node | None:
    """The oldest calc job that finished well with the same hash."""
    with get_storage().session() as session:
        pk = session.scalar(
            sa.select(models.Node.id)
            .where(
                models.Node.node_type == "process.calcjob",
                models.Node.process_state == "finished",
                models.Node.exit_status == 0,
                models.Node.id != exclude_pk,
                models.Node.attributes[CACHE_HASH].as_string() == digest,
            )
            .order_by(models.Node.id)
            .limit(1)
        )
    return load_node(pk) if pk is not None else None


def clone(node: Node) -> Node:
    """A new, unstored node of the same class with the same attributes and files."""
    copy = type(node).__new__(type(node))
    Node.__init__(copy, label=node.label, description=node.description)
    copy._attributes = node.attributes
    copy._pending_files = {name: node.get_object_content(name) for name in node.list_object_names()}
    return copy
