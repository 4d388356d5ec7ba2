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

from veglia.engine.calcjob.trace import build_record
from veglia.engine.exit_codes import ExitCode
from veglia.engine.process import flatten_inputs
from veglia.manage import get_profile, get_storage
from veglia.orm import attributes as attr
from veglia.orm.attributes import CACHE_HASH, OPTIONS
from veglia.orm.nodes import Node, StoredBlob, load_node
from veglia.storage import models
from veglia.storage.attribute_text import attribute_text

if TYPE_CHECKING:
    from veglia.engine.calcjob import CalcJob

__all__ = ["calcjob_hash", "find_cached", "from_cache", "node_hash", "node_hashes"]


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
                attribute_text(models.Node.attributes, CACHE_HASH) == digest,
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
    # The stored blobs, shared: no file's content is read.
    copy._pending_files = {r.path: StoredBlob(r.sha256, r.size) for r in node.list_objects()}
    return copy


def from_cache(process: CalcJob) -> ExitCode | None:
    """With caching on: the outputs of an identical finished job, copied, or None. The
    job's hash is always recorded, so a later job with caching on can reuse this one."""
    if process.node is None:
        return None
    # The hash's reads, what it records, and the copied outputs: in the commit of the state
    # change that follows.
    with process.closing_writes():
        return _from_cache(process)


def _from_cache(process: CalcJob) -> ExitCode | None:
    node = process.node
    assert node is not None
    inputs = flatten_inputs(
        {k: v for k, v in process.inputs.items() if k not in process.non_db_inputs}
    )
    digest = calcjob_hash(process, inputs)
    node.set_attribute(attr.CACHE_HASH, digest)
    if not _caching_enabled(process):
        return None
    source = find_cached(digest, node.pk)
    if source is None:
        return None
    for label, output in source.outputs.items():
        process.out(label.replace("__", "."), clone(output))
    # What the run measured travels with its outputs: a cached job still reports it.
    copied = {
        k: source.get_attribute(k)
        for k in (attr.GPU_METRICS,)
        if source.get_attribute(k) is not None
    }
    measured = source.get_attribute(attr.TRACE_RECORD)
    if measured:
        copied[attr.TRACE_RECORD] = _record_of_cached(process, measured)
    node.set_attributes({attr.CACHED_FROM: {"pk": source.pk, "uuid": source.uuid}, **copied})
    process.report(f"cached from process {source.pk}: not run again")
    return ExitCode(source.exit_status or 0, source.exit_message)


#: What a trace record holds of the run itself, as measured; the rest is this job's own.
_MEASURED_FIELDS = (
    "realtime", "pcpu", "pmem", "rss", "vmem", "peak_rss", "peak_vmem", "rchar", "wchar",
    "syscr", "syscw", "read_bytes", "write_bytes", "vol_ctxt", "inv_ctxt", "measured_by",
    "extras",
)  # fmt: skip


def _record_of_cached(process: CalcJob, measured: dict[str, Any]) -> dict[str, Any]:
    """This job's trace record with what the cached run measured (the plugins' blocks
    under ``extras`` too), as Nextflow reports a cached task's metrics."""
    assert process.node is not None
    record = build_record(process.node, process.computer).to_dict()
    record.update({k: measured[k] for k in _MEASURED_FIELDS if k in measured})
    return record


def _caching_enabled(process: CalcJob) -> bool:
    explicit = process.metadata.get("cache")
    return bool(get_profile().get_option("caching.enabled") if explicit is None else explicit)
