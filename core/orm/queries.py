"""Questions the CLI and the daemon ask of the stored nodes, in one place.

Each function opens its own short transaction and gives back plain values (pks, tuples,
:class:`ProcessRow`), so callers need neither SQLAlchemy nor ``veglia.storage.models``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import aliased

from veglia.manage import get_storage
from veglia.orm.attributes import BLOCKED, DAEMON, PAUSED
from veglia.orm.groups import load_group
from veglia.orm.users import get_default_user
from veglia.storage.models import AuthInfo, Computer, GroupNode, Link, Log, Node, RepositoryFile

__all__ = [
    "ACTIVE_STATES",
    "ORDER_BY",
    "ProcessRow",
    "active_process_pks",
    "configured_computer_pks",
    "created_or_returned",
    "creating_calcjobs",
    "has_attribute",
    "label_condition",
    "links_of",
    "list_processes",
    "logs_after",
    "node_mtime",
    "node_pks",
    "node_pks_on_computer",
    "process_tree",
    "processes_on_computer",
    "provenance_around",
    "recent_nodes",
    "repository_files",
]

#: The states of a process that has not ended.
ACTIVE_STATES = ("created", "running", "waiting")
#: What :func:`list_processes` can order by -> the column.
ORDER_BY = {"pk": "id", "ctime": "ctime", "mtime": "mtime", "label": "label"}


def has_attribute(key: str) -> Any:
    """A condition on ``Node``: the node has attribute ``key``, and it is not null.

    Not ``Node.attributes[key].isnot(None)``: on SQLite that reads ``JSON_QUOTE(...) IS NOT
    NULL``, and JSON_QUOTE makes a missing key the string 'null', so every node matches.
    """
    return Node.attributes[key].as_string().isnot(None)


# -- processes ---------------------------------------------------------------------------------
def active_process_pks(
    *, paused: bool | None = None, blocked: bool | None = None, daemon: bool | None = None
) -> list[int]:
    """The pks of unfinished processes, oldest first; only the paused (or not) ones, the
    blocked (or not) ones, the ones handed to the daemon (or not), when asked."""
    query = sa.select(Node.id).where(Node.process_state.in_(ACTIVE_STATES))
    if paused is not None:
        is_paused = Node.attributes[PAUSED].as_boolean().is_(True)
        query = query.where(is_paused if paused else sa.not_(is_paused))
    if blocked is not None:
        is_blocked = has_attribute(BLOCKED)
        query = query.where(is_blocked if blocked else sa.not_(is_blocked))
    if daemon is not None:
        is_daemon = Node.attributes[DAEMON].as_boolean().is_(True)
        query = query.where(is_daemon if daemon else sa.not_(is_daemon))
    with get_storage().session() as session:
        return list(session.scalars(query.order_by(Node.id)))


@dataclass(frozen=True)
class ProcessRow:
    """One process as :func:`list_processes` returns it (``veglia process list`` columns
    compute their cells from it)."""

    pk: int
    uuid: str
    ctime: datetime
    mtime: datetime
    label: str
    node_type: str
    process_type: str
    process_state: str | None
    exit_status: int | None
    exit_message: str | None
    attributes: dict[str, Any]
    computer: str | None
    caller_pk: int | None


_ROW_COLUMNS = (
    "id", "uuid", "ctime", "mtime", "label", "node_type", "process_type", "process_state",
    "exit_status", "exit_message",
)  # fmt: skip


def list_processes(
    states: Iterable[str] | None = None,
    *,
    failed: bool = False,
    past_days: int | None = None,
    limit: int | None = None,
    process_type: str | None = None,
    label: str | None = None,
    label_pattern: str | None = None,
    exit_status: int | None = None,
    pks: Iterable[int] | None = None,
    group: str | int | None = None,
    order_by: str = "ctime",
    descending: bool = False,
    attribute_keys: Iterable[str] | None = None,
) -> list[ProcessRow]:
    """Processes in one query, by ``order_by`` (one of :data:`ORDER_BY`), ascending unless
    ``descending``; with a ``limit``, the ``limit`` greatest by that key (the most recent by
    default). Only those in ``states``, finished with a non-zero exit status (``failed``),
    created in the last ``past_days`` days, of a ``process_type``, with a ``label``, a label
    matching ``label_pattern`` (see :func:`label_condition`), an ``exit_status``, among
    ``pks``, in the ``group`` (label, pk or UUID), as asked. Every filter applies before
    the ``limit``: it counts the processes that pass them. Each row's ``attributes`` holds
    only ``attribute_keys`` when given (those the node has): a finished job's other
    attributes (its trace record, its last job info, ...) are most of its row, and reading
    them is most of a long list's time."""
    if order_by not in ORDER_BY:
        raise ValueError(f"order_by must be one of {', '.join(ORDER_BY)}, not {order_by!r}")
    key = getattr(Node, ORDER_BY[order_by])
    call = aliased(Link)
    keys = None if attribute_keys is None else sorted(set(attribute_keys))
    attributes = [Node.attributes] if keys is None else [Node.attributes[k] for k in keys]
    query = (
        sa.select(
            *(getattr(Node, name) for name in _ROW_COLUMNS),
            Computer.label,
            call.input_id,
            *attributes,
        )
        .outerjoin(Computer, Computer.id == Node.computer_id)
        .outerjoin(call, sa.and_(call.output_id == Node.id, call.link_type == "call"))
        .where(sa.or_(Node.node_type == "process", Node.node_type.like("process.%")))
        .order_by(key.desc(), Node.id.desc())
    )
    if states:
        query = query.where(Node.process_state.in_(tuple(states)))
    if failed:
        query = query.where(Node.process_state == "finished", Node.exit_status != 0)
    if past_days is not None:
        query = query.where(Node.ctime >= datetime.now(timezone.utc) - timedelta(days=past_days))
    if process_type is not None:
        query = query.where(Node.process_type == process_type)
    if label is not None:
        query = query.where(Node.label == label)
    if label_pattern is not None:
        query = query.where(label_condition(label_pattern))
    if exit_status is not None:
        query = query.where(Node.exit_status == exit_status)
    if pks is not None:
        query = query.where(Node.id.in_(set(pks)))
    if group is not None:
        members = sa.select(GroupNode.node_id).where(GroupNode.group_id == load_group(group).pk)
        query = query.where(Node.id.in_(members))
    if limit is not None:
        query = query.limit(limit)
    with get_storage().session() as session:
        rows = session.execute(query).all()
    seen: dict[int, ProcessRow] = {}
    for row in rows if descending else reversed(rows):
        if row[0] in seen:
            continue
        if keys is None:
            found = row[12] or {}
        else:  # a missing key reads as null
            found = {k: v for k, v in zip(keys, row[12:], strict=True) if v is not None}
        seen[row[0]] = ProcessRow(*row[:10], found, row[10], row[11])
    return list(seen.values())


def label_condition(pattern: str) -> Any:
    """A condition on ``Node``: the label holds ``pattern``, or matches it when it is a glob
    (``*`` any text, ``?`` one character); case-insensitive on every database."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    if "*" in pattern or "?" in pattern:
        like = escaped.replace("*", "%").replace("?", "_")
    else:
        like = f"%{escaped}%"
    return Node.label.ilike(like, escape="\\")


def recent_nodes(
    pk_prefix: str = "", *, node_type: str | None = None, limit: int = 50
) -> list[tuple[int, str, str, str | None, str | None, int | None]]:
    """(pk, node type, label, process type, process state, exit status) of the ``limit``
    newest nodes whose pk starts with ``pk_prefix``, of ``node_type`` or a sub-type of it
    (``"process"``: every process), newest first: what shell completion offers."""
    if pk_prefix and not pk_prefix.isdigit():
        return []
    query = sa.select(
        Node.id, Node.node_type, Node.label, Node.process_type, Node.process_state, Node.exit_status
    )
    if pk_prefix:
        query = query.where(sa.cast(Node.id, sa.String).like(f"{pk_prefix}%"))
    if node_type is not None:
        query = query.where(
            sa.or_(Node.node_type == node_type, Node.node_type.like(f"{node_type}.%"))
        )
    with get_storage().session() as session:
        rows = session.execute(query.order_by(Node.id.desc()).limit(limit)).all()
    return [tuple(row) for row in rows]  # type: ignore[misc]


def logs_after(pk: int, last_id: int = 0) -> list[Log]:
    """The log entries of node ``pk`` newer than entry ``last_id``, oldest first."""
    query = sa.select(Log).where(Log.node_id == pk, Log.id > last_id).order_by(Log.id)
    with get_storage().session() as session:
        return list(session.scalars(query))


# -- any node ----------------------------------------------------------------------------------
def node_mtime(pk: int) -> datetime | None:
    """When node ``pk`` last changed, read now (a loaded node's ``mtime`` is as of its load)."""
    with get_storage().session() as session:
        return session.scalar(sa.select(Node.mtime).where(Node.id == pk))


def node_pks(pks: Iterable[int] | None = None) -> list[int]:
    """The pks of every node, or of those of ``pks`` that exist, in order."""
    query = sa.select(Node.id).order_by(Node.id)
    if pks is not None:
        query = query.where(Node.id.in_(set(pks)))
    with get_storage().session() as session:
        return list(session.scalars(query))


def links_of(pk: int, *, incoming: bool) -> list[tuple[str, str, int, str]]:
    """(label, link type, pk, node type) of every link into or out of node ``pk``."""
    mine, other = (Link.output_id, Link.input_id) if incoming else (Link.input_id, Link.output_id)
    query = (
        sa.select(Link.label, Link.link_type, Node.id, Node.node_type)
        .join(Node, Node.id == other)
        .where(mine == pk)
        .order_by(Link.id)
    )
    with get_storage().session() as session:
        return [tuple(row) for row in session.execute(query)]  # type: ignore[misc]


def provenance_around(pk: int, depth: int) -> tuple[list[Any], list[tuple[int, int, str, str]]]:
    """The nodes within ``depth`` links of node ``pk``, one query a level, and the links
    between them: (rows with ``id``, ``node_type``, ``label``, ``process_type``,
    ``process_state``, ``exit_status`` and ``attributes``, by pk; (source, target, label,
    link type), in the order they were made)."""
    seen, frontier = {pk}, {pk}
    edges: dict[int, tuple[int, int, str, str]] = {}
    with get_storage().session() as session:
        for _ in range(depth):
            if not frontier:
                break
            rows = session.execute(
                sa.select(Link.id, Link.input_id, Link.output_id, Link.label, Link.link_type).where(
                    sa.or_(Link.input_id.in_(frontier), Link.output_id.in_(frontier))
                )
            ).all()
            found = set()
            for link_id, source, target, label, kind in rows:
                edges[link_id] = (source, target, label, kind)
                found |= {source, target}
            frontier = found - seen
            seen |= found
        nodes = session.execute(
            sa.select(
                Node.id,
                Node.node_type,
                Node.label,
                Node.process_type,
                Node.process_state,
                Node.exit_status,
                Node.attributes,
            )
            .where(Node.id.in_(seen))
            .order_by(Node.id)
        ).all()
    return list(nodes), [edges[key] for key in sorted(edges)]


def process_tree(pks: Iterable[int]) -> set[int]:
    """``pks`` and every process they called, however deep."""
    found = set(pks)
    frontier = set(found)
    with get_storage().session() as session:
        while frontier:
            called = session.scalars(
                sa.select(Link.output_id).where(
                    Link.input_id.in_(frontier), Link.link_type == "call"
                )
            )
            frontier = set(called) - found
            found |= frontier
    return found


def created_or_returned(process_pks: Iterable[int]) -> set[int]:
    """The nodes these processes created (calc jobs) or returned (workflows)."""
    with get_storage().session() as session:
        return set(
            session.scalars(
                sa.select(Link.output_id).where(
                    Link.input_id.in_(set(process_pks)), Link.link_type.in_(("create", "output"))
                )
            )
        )


def creating_calcjobs(node_pks: Iterable[int]) -> dict[int, list[int]]:
    """The calc job that created each of these nodes: ``{calc job pk: [node pks]}``."""
    with get_storage().session() as session:
        rows = session.execute(
            sa.select(Link.input_id, Link.output_id)
            .join(Node, Node.id == Link.input_id)
            .where(
                Link.output_id.in_(set(node_pks)),
                Link.link_type == "create",
                Node.node_type == "process.calcjob",
            )
        ).all()
    producers: dict[int, list[int]] = {}
    for producer, made in rows:
        producers.setdefault(producer, []).append(made)
    return producers


def repository_files(node_pks: Iterable[int]) -> list[tuple[int, str, str]]:
    """(node pk, path, SHA-256) of every stored file of these nodes, by node and path."""
    with get_storage().session() as session:
        return [
            tuple(row)  # type: ignore[misc]
            for row in session.execute(
                sa.select(RepositoryFile.node_id, RepositoryFile.path, RepositoryFile.sha256)
                .where(RepositoryFile.node_id.in_(set(node_pks)))
                .order_by(RepositoryFile.node_id, RepositoryFile.path)
            )
        ]


# -- computers ---------------------------------------------------------------------------------
def configured_computer_pks() -> set[int]:
    """The pks of the computers the default user configured (``veglia computer configure``)."""

    query = sa.select(AuthInfo.computer_id).where(AuthInfo.user_id == get_default_user().pk)
    with get_storage().session() as session:
        return set(session.scalars(query))


def processes_on_computer(computer_pk: int, *, active: bool = True) -> list[tuple[int, str, str]]:
    """(pk, process type, state) of the processes run on the computer, oldest first; only
    those that have not ended, unless ``active`` is False."""
    query = sa.select(Node.id, Node.process_type, Node.process_state).where(
        Node.computer_id == computer_pk, Node.process_state.isnot(None)
    )
    if active:
        query = query.where(Node.process_state.in_(ACTIVE_STATES))
    with get_storage().session() as session:
        return [
            (pk, kind or "", state) for pk, kind, state in session.execute(query.order_by(Node.id))
        ]


def node_pks_on_computer(computer_pk: int) -> list[int]:
    """The pks of every node that points at the computer (its jobs, their remote folders)."""
    query = sa.select(Node.id).where(Node.computer_id == computer_pk).order_by(Node.id)
    with get_storage().session() as session:
        return list(session.scalars(query))
