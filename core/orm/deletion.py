"""Deleting nodes with what goes with them by provenance, as AiiDA's ``delete_nodes``.

Deleting data deletes the processes that used it (and, through them, what they created);
deleting a process deletes what it created, the processes it called and its caller. The
plan is shown first; the deletion walks the graph again in its transaction and refuses when
it changed, or when an active process would go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlalchemy as sa

from veglia.exceptions import NotExistent, ProcessActiveError, StorageError
from veglia.manage import get_storage
from veglia.orm.provenance import DELETE_RULES, Reason, traverse
from veglia.orm.queries import ACTIVE_STATES
from veglia.storage import models

__all__ = ["DeletionPlan", "PlannedNode", "delete_nodes", "plan_deletion"]

_CHUNK = 500


@dataclass(frozen=True)
class PlannedNode:
    """A node a deletion takes, and why."""

    pk: int
    uuid: str
    node_type: str
    process_type: str | None
    label: str
    process_state: str | None
    exit_status: int | None
    reason: Reason | None  # None: one of the nodes asked for

    @property
    def is_process(self) -> bool:
        return self.node_type == "process" or self.node_type.startswith("process.")

    @property
    def is_active(self) -> bool:
        return self.is_process and self.process_state in ACTIVE_STATES


@dataclass
class DeletionPlan:
    """The nodes a deletion takes, oldest first."""

    asked: list[int]
    nodes: list[PlannedNode] = field(default_factory=list)

    @property
    def pks(self) -> list[int]:
        return [node.pk for node in self.nodes]

    @property
    def active(self) -> list[PlannedNode]:
        return [node for node in self.nodes if node.is_active]

    def counts(self) -> dict[str, int]:
        """How many calc jobs, workflows and data nodes (in that order; absent when none)."""
        kinds = {"process.calcjob": "calc job", "process.workflow": "workflow"}
        counts: dict[str, int] = {}
        for node in self.nodes:
            kind = kinds.get(node.node_type, "process" if node.is_process else "data")
            counts[kind] = counts.get(kind, 0) + 1
        order = ["calc job", "workflow", "process", "data"]
        return {kind: counts[kind] for kind in order if kind in counts}

    def check_no_active(self) -> None:
        active = self.active
        if not active:
            return
        named = ", ".join(
            f"{n.pk} ({n.process_type or n.node_type}, {n.process_state})" for n in active
        )
        first = active[0].pk
        raise ProcessActiveError(
            f"Refusing to delete: process{'es' if len(active) > 1 else ''} {named} "
            f"{'have' if len(active) > 1 else 'has'} not ended and would go too. Kill "
            f"{'them' if len(active) > 1 else 'it'} first (`veglia process kill {first}`), "
            "wait until it ends, then delete again."
        )


def plan_deletion(pks: Iterable[int]) -> DeletionPlan:
    """The nodes that go with ``pks``; NotExistent when one of them is not a node."""
    asked = list(dict.fromkeys(int(pk) for pk in pks))
    with get_storage().session() as session:
        known = set(
            session.scalars(
                sa.select(models.Node.id).where(
                    models.Node.id.in_(asked), models.Node.node_type != "selftest"
                )
            )
        )
    missing = [pk for pk in asked if pk not in known]
    if missing:
        raise NotExistent(f"No node with pk {', '.join(map(str, missing))}; nothing deleted.")
    reached = traverse(asked, DELETE_RULES)
    plan = DeletionPlan(asked)
    node = models.Node
    columns = (
        node.id, node.uuid, node.node_type, node.process_type, node.label, node.process_state,
        node.exit_status,
    )  # fmt: skip
    pks_found = sorted(reached)
    with get_storage().session() as session:
        for start in range(0, len(pks_found), _CHUNK):
            chunk = pks_found[start : start + _CHUNK]
            for row in session.execute(sa.select(*columns).where(node.id.in_(chunk))):
                plan.nodes.append(PlannedNode(*row, reason=reached[row[0]]))
    plan.nodes.sort(key=lambda n: n.pk)
    return plan


def delete_nodes(plan: DeletionPlan) -> int:
    """Delete what ``plan`` shows (with their links, logs, file records and group
    memberships); refuse when the graph changed since it was made or when a process in it
    is active. Returns how many nodes were deleted.

    The files' contents stay in the repository: other nodes may hold the same content.
    """
    again = plan_deletion(plan.asked)
    again.check_no_active()
    if set(again.pks) != set(plan.pks):
        raise StorageError(
            "The provenance around these nodes changed while you looked (a process started "
            "or ended); nothing was deleted. Run the deletion again to see what it takes now."
        )
    pks = again.pks
    with get_storage().session() as session:
        for start in range(0, len(pks), _CHUNK):
            chunk = pks[start : start + _CHUNK]
            session.execute(sa.delete(models.Node).where(models.Node.id.in_(chunk)))
    return len(pks)
