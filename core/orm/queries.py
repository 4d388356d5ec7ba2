"""Questions the CLI and the daemon ask of the stored processes, in one place."""

from __future__ import annotations

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import BLOCKED, PAUSED
from veglia.storage.models import Node

__all__ = ["ACTIVE_STATES", "active_process_pks"]

#: The states of a process that has not ended.
ACTIVE_STATES = ("created", "running", "waiting")


def active_process_pks(*, paused: bool | None = None, blocked: bool | None = None) -> list[int]:
    """The pks of unfinished processes, oldest first; only the paused (or not) ones, the
    blocked (or not) ones, when asked."""
    query = sa.select(Node.id).where(Node.process_state.in_(ACTIVE_STATES))
    if paused is not None:
        is_paused = Node.attributes[PAUSED].as_boolean().is_(True)
        query = query.where(is_paused if paused else sa.not_(is_paused))
    if blocked is not None:
        is_blocked = Node.attributes[BLOCKED].isnot(None)
        query = query.where(is_blocked if blocked else sa.not_(is_blocked))
    with get_storage().session() as session:
        return list(session.scalars(query.order_by(Node.id)))
