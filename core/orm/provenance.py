"""The provenance graph's rules: which links may be made (:func:`link_fault`, checked when
the engine stores a link and when an archive is imported), and walking the graph by rules:
what goes into an archive, what a deletion takes.

The walking rules are AiiDA's defaults (``GraphTraversalRules.EXPORT`` and ``DELETE``), in veglia's
four link types: ``input`` (data -> process), ``create`` (calc job -> data), ``output``
(workflow -> data it returned), ``call`` (process -> process it launched). A rule follows
links of one type *forward* (from the link's input to its output) or *backward*.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.storage.tables import links, nodes

__all__ = [
    "DELETE_RULES",
    "EXPORT_RULES",
    "LABEL_UNIQUE_PER_SOURCE",
    "LABEL_UNIQUE_PER_TARGET",
    "LINK_ENDS",
    "ONE_INCOMING",
    "SEALED_ON_END",
    "Reason",
    "Rule",
    "link_fault",
    "node_kind",
    "traverse",
]


@dataclass(frozen=True)
class Rule:
    link_type: str
    forward: bool
    #: How the node reached says why it was taken: "{why} {pk}" (e.g. "created by 5").
    why: str


#: An archive holds, for a process, its inputs, what it created or returned, the processes
#: it called and its caller; for data, the process that created it.
EXPORT_RULES = (
    Rule("input", False, "input of"),
    Rule("create", True, "created by"),
    Rule("create", False, "created"),
    Rule("output", True, "returned by"),
    Rule("call", True, "called by"),
    Rule("call", False, "called"),
)

#: Deleting data deletes the processes that used it, created it or returned it; deleting a
#: process deletes what it created, the processes it called, and its caller.
DELETE_RULES = (
    Rule("input", True, "used"),
    Rule("create", True, "created by"),
    Rule("create", False, "created"),
    Rule("output", False, "returned"),
    Rule("call", True, "called by"),
    Rule("call", False, "called"),
)


def node_kind(node_type: str) -> str:
    """What a link rule sees of a node: ``data``, ``calcjob``, ``workflow`` or ``process``
    (any other process, e.g. a function's)."""
    if node_type == "process.calcjob":
        return "calcjob"
    if node_type == "process.workflow":
        return "workflow"
    if node_type == "process" or node_type.startswith("process."):
        return "process"
    return "data"


_PROCESSES = frozenset({"calcjob", "workflow", "process"})

#: AiiDA's link rules, in veglia's link types: the kinds of node each link type may join
#: (source kinds, target kinds). Data is used by processes; a calc job creates data; any
#: other process returns it; a process calls processes.
LINK_ENDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "input": (frozenset({"data"}), _PROCESSES),
    "create": (frozenset({"calcjob"}), frozenset({"data"})),
    "output": (frozenset({"workflow", "process"}), frozenset({"data"})),
    "call": (_PROCESSES, _PROCESSES),
}

#: The link types a node takes at most one of: a data node has one creator, a process one
#: caller.
ONE_INCOMING = frozenset({"create", "call"})

#: The link types that add to a process's record from its side (what it created, returned or
#: called): none once the process has ended.
SEALED_ON_END = frozenset({"create", "output", "call"})

#: The link types whose labels are unique per target (a process's input ports) and per
#: source (a process's output ports).
LABEL_UNIQUE_PER_TARGET = frozenset({"input"})
LABEL_UNIQUE_PER_SOURCE = frozenset({"create", "output"})


def link_fault(link_type: str, source_type: str, target_type: str) -> str | None:
    """Why a ``link_type`` link from a ``source_type`` node to a ``target_type`` node breaks
    the link rules, in a few words; None when it does not."""
    if link_type not in LINK_ENDS:
        return f"{link_type!r} is no link type (one of {', '.join(LINK_ENDS)})"
    sources, targets = LINK_ENDS[link_type]
    source, target = node_kind(source_type), node_kind(target_type)
    if source not in sources or target not in targets:
        return (
            f"{link_type} links go from {' or '.join(sorted(sources))} to "
            f"{' or '.join(sorted(targets))}, not from {source} to {target}"
        )
    return None


#: Hidden nodes (the self-test's) are never walked to.
_HIDDEN = ("selftest",)
_CHUNK = 500


@dataclass(frozen=True)
class Reason:
    """Why a node was reached: the rule's words and the node it was reached from."""

    why: str
    via: int

    def __str__(self) -> str:
        return f"{self.why} {self.via}"


def traverse(pks: Iterable[int], rules: Iterable[Rule]) -> dict[int, Reason | None]:
    """Every node reached from ``pks`` by ``rules``, with why (None for the ones given);
    one query per hop and per 500 nodes."""
    rules = tuple(rules)
    link = links.c
    # (rule per link type, the column on the known side, the column on the side reached)
    directions = [
        ({r.link_type: r for r in rules if r.forward}, link.input_id, link.output_id),
        ({r.link_type: r for r in rules if not r.forward}, link.output_id, link.input_id),
    ]
    found: dict[int, Reason | None] = dict.fromkeys(pks)
    frontier = sorted(found)
    with get_storage().connection() as connection:
        while frontier:
            reached: dict[int, Reason] = {}
            for start in range(0, len(frontier), _CHUNK):
                chunk = frontier[start : start + _CHUNK]
                for by_type, known, other in directions:
                    if not by_type:
                        continue
                    query = (
                        sa.select(known, other, link.link_type)
                        .join(nodes, nodes.c.id == other)
                        .where(
                            known.in_(chunk),
                            link.link_type.in_(list(by_type)),
                            nodes.c.node_type.not_in(_HIDDEN),
                        )
                        .order_by(link.id)
                    )
                    for via, pk, link_type in connection.execute(query):
                        if pk not in found and pk not in reached:
                            reached[pk] = Reason(by_type[link_type].why, via)
            found.update(reached)
            frontier = sorted(reached)
    return found
