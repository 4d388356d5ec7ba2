"""What an archive's links may do to this profile's provenance, checked before an import
writes anything.

An import never changes what already happened: a node here already gets no new link, in
or out, not even data here as the input of a process new here (what `node delete`, the
graph and provenance queries say of the data would change). A link of the archive between
two nodes here already must be one stored here. The new links follow the rules links
made by the engine follow (:func:`veglia.orm.provenance.link_fault`): the kinds of node
each link type joins, one creator for a data node and one caller for a process, unique
port labels, no cycle.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from veglia.exceptions import ArchiveError
from veglia.orm.provenance import (
    LABEL_UNIQUE_PER_SOURCE,
    LABEL_UNIQUE_PER_TARGET,
    ONE_INCOMING,
    link_fault,
)
from veglia.storage import models

__all__ = ["check_links"]

_CHUNK = 500
#: The links of the graph that must stay acyclic (a workflow may return its own input).
_ACYCLIC = ("input", "create", "call")

_Key = tuple[str, str, str, str]  # input UUID, output UUID, link type, label


def _refusal(path: Path, why: str, key: _Key) -> ArchiveError:
    source, target, link_type, label = key
    return ArchiveError(
        f"{path} is refused: its {link_type} link {label!r} from {source} to {target} {why}. "
        "Nothing was imported."
    )


def _stored(session: Any, present: dict[str, int]) -> tuple[dict[str, str], set[_Key]]:
    """The node types of the nodes here already, and the links stored between them."""
    uuid_of = {pk: uuid for uuid, pk in present.items()}
    pks = sorted(uuid_of)
    types: dict[str, str] = {}
    links: set[_Key] = set()
    node, link = models.Node, models.Link
    for start in range(0, len(pks), _CHUNK):
        chunk = pks[start : start + _CHUNK]
        query = sa.select(node.id, node.node_type).where(node.id.in_(chunk))
        types.update({uuid_of[pk]: node_type for pk, node_type in session.execute(query)})
        links_query = sa.select(link.input_id, link.output_id, link.link_type, link.label).where(
            link.output_id.in_(chunk)
        )
        for source, target, link_type, label in session.execute(links_query):
            if source in uuid_of:
                links.add((uuid_of[source], uuid_of[target], link_type, label))
    return types, links


def _why_not_from(source: str, link_type: str) -> str:
    if link_type != "input":
        return f"would add to the record of {source}, here already"
    # Data here said to be the input of a process it never met: `node delete`, the graph
    # and provenance queries would say so of the data too.
    return (
        f"would make {source}, here already, an input of a process that is not; export the "
        "processes that share this input together, in one archive"
    )


def check_links(
    session: Any,
    path: Path,
    nodes: dict[str, str],
    links: list[_Key],
    present: dict[str, int],
) -> None:
    """Refuse the archive (:class:`ArchiveError` naming the link) when one of its ``links``
    (``(input UUID, output UUID, link type, label)``) would change the provenance of a node
    here already (``present``: ``{UUID: pk}``), or breaks the link rules; ``nodes``: the
    archive's, ``{UUID: node type}``."""
    stored_types, stored_links = _stored(session, present)
    types = nodes | stored_types
    new: list[_Key] = []
    seen: set[_Key] = set()
    for key in links:
        if key in seen:
            raise _refusal(path, "is in it twice", key)
        seen.add(key)
        source, target, link_type, _ = key
        if target in present:
            if source in present and key in stored_links:
                continue  # what is stored here already
            raise _refusal(path, f"would add to the provenance of {target}, here already", key)
        if source in present:
            raise _refusal(path, _why_not_from(source, link_type), key)
        fault = link_fault(link_type, types[source], types[target])
        if fault is not None:
            raise _refusal(path, f"breaks the link rules: {fault}", key)
        new.append(key)
    _check_counts(path, new)
    _check_acyclic(path, new)


def _check_counts(path: Path, links: list[_Key]) -> None:
    """One creator, one caller; a port label once per process. The link named is the one
    that comes second."""
    incoming: set[tuple[str, str]] = set()
    by_target: set[tuple[str, str]] = set()
    by_source: set[tuple[str, str, str]] = set()
    for key in links:
        source, target, link_type, label = key
        if link_type in ONE_INCOMING:
            if (target, link_type) in incoming:
                taken = "creator" if link_type == "create" else "caller"
                raise _refusal(path, f"gives {target} a second {taken}", key)
            incoming.add((target, link_type))
        if link_type in LABEL_UNIQUE_PER_TARGET:
            if (target, label) in by_target:
                raise _refusal(path, f"gives {target} a second input {label!r}", key)
            by_target.add((target, label))
        if link_type in LABEL_UNIQUE_PER_SOURCE:
            if (source, link_type, label) in by_source:
                raise _refusal(path, f"gives {source} a second output {label!r}", key)
            by_source.add((source, link_type, label))


def _check_acyclic(path: Path, links: list[_Key]) -> None:
    """No node is its own ancestor through inputs, creations and calls."""
    edges = [key for key in links if key[2] in _ACYCLIC]
    indegree: Counter[str] = Counter(target for _, target, _, _ in edges)
    outgoing: defaultdict[str, list[str]] = defaultdict(list)
    for source, target, _, _ in edges:
        outgoing[source].append(target)
    ready = [node for node in outgoing if not indegree[node]]
    while ready:
        for target in outgoing[ready.pop()]:
            indegree[target] -= 1
            if not indegree[target]:
                ready.append(target)
    if not +indegree:
        return
    # Every node left has an incoming edge from another node left: walking those edges
    # backwards from any of them comes round to a node seen, on a cycle.
    left = {node for node, count in indegree.items() if count > 0}
    into = {target: key for key in edges if (target := key[1]) in left and key[0] in left}
    node, walked = next(iter(sorted(left))), set()
    while node not in walked:
        walked.add(node)
        node = into[node][0]
    raise _refusal(path, "closes a cycle in the provenance", into[node])
