"""Caching: a calc job identical to one that finished well is not run again.

Identical means the same calculation, code, computer, options and inputs, where an input is
compared by content (type, attributes, file hashes), not by identity. The outputs of the
earlier job are copied onto the new node, which records where they came from
(``CalcJob._from_cache``, with the functions here).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from veglia.engine.calcjob.trace import build_record
from veglia.manage import get_storage
from veglia.orm import attributes as attr
from veglia.orm.attributes import CACHE_HASH
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node, StoredBlob
from veglia.orm.process_nodes import ProcessNode
from veglia.storage import models
from veglia.storage.attribute_text import attribute_text

if TYPE_CHECKING:
    from veglia.orm.computers import Code, Computer

__all__ = ["calcjob_hash", "clone", "find_cached", "measured_of", "node_hash", "node_hashes"]


def node_hash(node: Node, files: list[tuple[str, str]] | None = None) -> str:
    """A digest of what a node holds; ``files`` are its (path, sha256), sorted by path, when
    the caller read them already (see :func:`node_hashes`)."""
    if files is None:
        files = [(record.path, record.sha256) for record in node.list_objects()]
    content = {"type": node.node_type, "attributes": node.attributes, "files": files}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


#: Nodes whose files one query of :func:`node_hashes` reads.
_HASH_BATCH = 500


def node_hashes(nodes: list[Node]) -> dict[str, str]:
    """:func:`node_hash` of many stored nodes by UUID: their files read in one query per
    500 nodes, not one per node (a group of 10,000)."""
    files: dict[int, list[tuple[str, str]]] = {node.pk: [] for node in nodes}
    table = models.RepositoryFile.__table__
    for start in range(0, len(nodes), _HASH_BATCH):
        pks = [node.pk for node in nodes[start : start + _HASH_BATCH]]
        query = (
            sa.select(table.c.node_id, table.c.path, table.c.sha256)
            .where(table.c.node_id.in_(pks))
            .order_by(table.c.node_id, table.c.path)
        )
        with get_storage().connection() as connection:
            for node_id, path, sha256 in connection.execute(query):
                files[node_id].append((path, sha256))
    return {node.uuid: node_hash(node, files[node.pk]) for node in nodes}


def calcjob_hash(
    process_type: str,
    computer_label: str,
    code: Code | None,
    options: dict[str, Any] | None,
    inputs: list[tuple[str, Any]],
) -> str:
    """A digest of what makes a calc job's results what they are (``CalcJob.cache_hash``)."""
    content = {
        "process_type": process_type,
        "computer": computer_label,
        "code": [code.executable, code.prepend_text, code.append_text] if code else None,
        "options": options,
        "inputs": sorted(
            (label, node_hash(value)) for label, value in inputs if isinstance(value, Node)
        ),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def find_cached(digest: str, exclude_pk: int) -> ProcessNode | None:
    """The oldest calc job that finished well with the same hash."""
    with get_storage().session() as session:
        pk = session.scalar(
            sa.select(models.Node.id)
            .where(
                models.Node.node_type == "process.calcjob",
                models.Node.process_state == "finished",
                models.Node.exit_status == 0,
                models.Node.id != exclude_pk,
                attribute_text(models.Node.attributes, CACHE_HASH) == digest,
            )
            .order_by(models.Node.id)
            .limit(1)
        )
    if pk is None:
        return None
    node = load_node(pk)
    assert isinstance(node, ProcessNode)  # the query asks for calc jobs
    return node


def clone(node: Node) -> Node:
    """A new, unstored node of the same class with the same attributes and files."""
    copy = type(node).__new__(type(node))
    Node.__init__(copy, label=node.label, description=node.description)
    copy._attributes = node.attributes
    # The stored blobs, shared: no file's content is read.
    copy._pending_files = {r.path: StoredBlob(r.sha256, r.size) for r in node.list_objects()}
    return copy


#: What a trace record holds of the run itself, as measured; the rest is this job's own.
_MEASURED_FIELDS = (
    "realtime", "pcpu", "pmem", "rss", "vmem", "peak_rss", "peak_vmem", "rchar", "wchar",
    "syscr", "syscw", "read_bytes", "write_bytes", "vol_ctxt", "inv_ctxt", "measured_by",
    "extras",
)  # fmt: skip


def measured_of(source: Node, node: Node, computer: Computer) -> dict[str, Any]:
    """What the cached run ``source`` measured, as attributes of the job ``node`` that reuses
    it: its GPU block, and the job's own trace record with the run's measurements (the
    plugins' blocks under ``extras`` too), as Nextflow reports a cached task's metrics."""
    copied = {
        k: source.get_attribute(k)
        for k in (attr.GPU_METRICS,)
        if source.get_attribute(k) is not None
    }
    measured = source.get_attribute(attr.TRACE_RECORD)
    if measured:
        record = build_record(node, computer).to_dict()
        record.update({k: measured[k] for k in _MEASURED_FIELDS if k in measured})
        copied[attr.TRACE_RECORD] = record
    return copied
