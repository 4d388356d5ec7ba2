"""Groups: named sets of nodes, as AiiDA's (``Group(label="x").store()``, ``add_nodes``,
``nodes``, ``load_group``).

A group only holds references: adding, removing or deleting never touches the nodes, and
deleting a node takes it out of its groups.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa

from veglia.exceptions import InvalidOptionError, NotExistent, StorageError
from veglia.manage import get_storage
from veglia.orm.loading import node_of_row
from veglia.orm.nodes import Node, row_by_uuid_prefix
from veglia.orm.users import get_default_user
from veglia.row_ids import pk_of
from veglia.storage import models

__all__ = ["Group", "group_member_pks", "load_group"]


def check_label(label: str) -> str:
    """A group label: not empty, no surrounding spaces, not a number (numbers are pks)."""
    if not label or label != label.strip() or label.isdigit():
        raise InvalidOptionError(
            f"Group label {label!r} must be non-empty, without leading or trailing spaces, "
            "and not a number (numbers are read as pks)."
        )
    return label


def _as_nodes(nodes: Node | Iterable[Node]) -> list[Node]:
    found = [nodes] if isinstance(nodes, Node) else list(nodes)
    for node in found:
        if not isinstance(node, Node) or not node.is_stored:
            raise StorageError(
                f"Only stored nodes can be in a group, not {node!r}; store it first."
            )
    return found


class Group:
    """A named set of nodes; the label is unique in the profile."""

    def __init__(self, label: str, description: str = "", type_string: str = "core") -> None:
        self._pk: int | None = None
        self._uuid: str | None = None
        self._time: datetime | None = None
        self.label = check_label(label)
        self.description = description
        self.type_string = type_string

    # -- identity ------------------------------------------------------------------------
    @property
    def pk(self) -> int:
        if self._pk is None:
            raise StorageError(f"Group {self.label!r} is not stored yet, so it has no pk.")
        return self._pk

    @property
    def uuid(self) -> str:
        if self._uuid is None:
            raise StorageError(f"Group {self.label!r} is not stored yet, so it has no uuid.")
        return self._uuid

    @property
    def time(self) -> datetime | None:
        """When the group was created."""
        return self._time

    @property
    def is_stored(self) -> bool:
        return self._pk is not None

    def __repr__(self) -> str:
        return f"<Group: {self.label!r} {f'pk={self._pk}' if self._pk else 'unstored'}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Group) and self.is_stored and other.is_stored:
            return self.pk == other.pk
        return self is other

    def __hash__(self) -> int:
        return hash(self._uuid) if self._uuid else id(self)

    def store(self) -> Group:
        """Write the group once; storing again is a no-op."""
        if self.is_stored:
            return self
        with get_storage().session() as session:
            existing = session.scalar(
                sa.select(models.Group.id).where(models.Group.label == self.label)
            )
            if existing is not None:
                raise StorageError(
                    f"A group labelled {self.label!r} exists already (pk {existing}); pick "
                    f"another label, or add to it with `veglia group add {self.label} PK...`."
                )
            row = models.Group(
                label=self.label,
                description=self.description,
                type_string=self.type_string,
                user_id=get_default_user().pk,
            )
            session.add(row)
            session.flush()
            stored = row.id, row.uuid, row.time
        self._pk, self._uuid, self._time = stored
        return self

    @classmethod
    def _from_row(cls, row: Any) -> Group:
        group = cls.__new__(cls)
        group._pk, group._uuid, group._time = row.id, row.uuid, row.time
        group.label, group.description, group.type_string = (
            row.label,
            row.description,
            row.type_string,
        )
        return group

    @classmethod
    def list(cls) -> list[Group]:
        """Every group, oldest first."""
        with get_storage().session() as session:
            rows = session.scalars(sa.select(models.Group).order_by(models.Group.id))
            return [cls._from_row(row) for row in rows]

    # -- members -------------------------------------------------------------------------
    def add_nodes(self, nodes: Node | Iterable[Node]) -> int:
        """Add stored nodes; those in the group already are left as they are. Returns how
        many were added."""
        pks = list(dict.fromkeys(node.pk for node in _as_nodes(nodes)))
        if not pks:
            return 0
        storage = get_storage()
        insert = (
            storage.insert(models.GroupNode.__table__)
            .values([{"group_id": self.pk, "node_id": pk} for pk in pks])
            .on_conflict_do_nothing()
            .returning(models.GroupNode.__table__.c.node_id)
        )
        with storage.session() as session:
            return len(session.execute(insert).all())

    def remove_nodes(self, nodes: Node | Iterable[Node]) -> int:
        """Take nodes out of the group (the nodes stay); returns how many were in it."""
        pks = [node.pk for node in _as_nodes(nodes)]
        with get_storage().session() as session:
            # A DML statement's result is a CursorResult (Session.execute says Result).
            result = cast(
                "sa.CursorResult[Any]",
                session.execute(
                    sa.delete(models.GroupNode).where(
                        models.GroupNode.group_id == self.pk, models.GroupNode.node_id.in_(pks)
                    )
                ),
            )
        return result.rowcount or 0

    def clear(self) -> int:
        """Take every node out of the group; returns how many there were."""
        with get_storage().session() as session:
            # A DML statement's result is a CursorResult (Session.execute says Result).
            result = cast(
                "sa.CursorResult[Any]",
                session.execute(
                    sa.delete(models.GroupNode).where(models.GroupNode.group_id == self.pk)
                ),
            )
        return result.rowcount or 0

    @property
    def nodes(self) -> builtins.list[Node]:  # builtins: `list` here is Group.list
        """The group's nodes, in the order they were created."""
        with get_storage().session() as session:
            rows = session.scalars(
                sa.select(models.Node)
                .join(models.GroupNode, models.GroupNode.node_id == models.Node.id)
                .where(models.GroupNode.group_id == self.pk)
                .order_by(models.Node.id)
            ).all()
        return [node_of_row(row) for row in rows]

    def count(self) -> int:
        """How many nodes the group holds."""
        return group_sizes([self.pk]).get(self.pk, 0)

    def delete(self) -> None:
        """Delete the group; its nodes stay."""
        with get_storage().session() as session:
            session.execute(sa.delete(models.Group).where(models.Group.id == self.pk))
        self._pk = self._uuid = None


def group_sizes(pks: Iterable[int]) -> dict[int, int]:
    """How many nodes each group holds, by group pk (absent when empty)."""
    query = (
        sa.select(models.GroupNode.group_id, sa.func.count())
        .where(models.GroupNode.group_id.in_(list(pks)))
        .group_by(models.GroupNode.group_id)
    )
    with get_storage().session() as session:
        return {group: count for group, count in session.execute(query)}


def load_group(identifier: str | int) -> Group:
    """A group by label, pk, or UUID (or a unique UUID prefix)."""
    text = str(identifier)
    with get_storage().session() as session:
        row: models.Group | sa.Row[Any] | None = None
        if (pk := pk_of(identifier)) is not None:
            row = session.get(models.Group, pk)
        # Digits that are no pk may still start a UUID ("86536159").
        if row is None and not isinstance(identifier, int):
            row = session.scalar(sa.select(models.Group).where(models.Group.label == text))
            if row is None:
                row = row_by_uuid_prefix(
                    session.connection(), models.Group.__table__, text, "group"
                )
        if row is not None:
            return Group._from_row(row)
        labels = list(session.scalars(sa.select(models.Group.label).order_by(models.Group.id)))
    known = ", ".join(labels[:20]) + (", ..." if len(labels) > 20 else "") if labels else "none"
    raise NotExistent(
        f"No group {text!r} (groups: {known}). Create one with `veglia group create LABEL`."
    )


def group_member_pks(identifier: str | int) -> set[int]:
    """The pks of the nodes in a group (by label, pk or UUID), in one query."""
    group = load_group(identifier)
    with get_storage().session() as session:
        return set(
            session.scalars(
                sa.select(models.GroupNode.node_id).where(models.GroupNode.group_id == group.pk)
            )
        )
