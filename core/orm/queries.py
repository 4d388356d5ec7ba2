"""Questions the CLI and the daemon ask of the stored nodes, in one place.

Each function opens its own short transaction on a Core connection and gives back plain
values (pks, tuples, rows, :class:`ProcessRow`), so callers need neither SQLAlchemy nor
``veglia.storage.models``; the module itself does not import SQLAlchemy's ORM, which is a
quarter of a command's start-up (``process list`` runs on it alone).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import (
    BLOCKED,
    CANCEL_PENDING,
    CODE,
    DAEMON,
    PAUSED,
    PIPELINE_RUN,
    RERUN_OF,
    REUSED_CALLS,
)
from veglia.storage.attribute_text import attribute_text
from veglia.storage.tables import (
    JsonType,
    authinfos,
    computers,
    group_nodes,
    links,
    logs,
    nodes,
    pipeline_elements,
    pipeline_setups,
)
from veglia.storage.tables import (
    repository_files as stored_files,
)

LOGGER = logging.getLogger("veglia.orm")

__all__ = [
    "ACTIVE_STATES",
    "CANCEL_PENDING_QUERY",
    "ORDER_BY",
    "ChangeStamp",
    "ProcessRow",
    "active_jobs_by_computer",
    "active_process_pks",
    "cancel_pending_pks",
    "change_stamp",
    "computer_summaries",
    "configured_computer_pks",
    "count_by_state",
    "created_or_returned",
    "creating_calcjobs",
    "disabled_computer_pks",
    "file_sizes",
    "has_attribute",
    "label_condition",
    "links_of",
    "list_processes",
    "logs_after",
    "node_mtime",
    "node_pks",
    "node_pks_on_computer",
    "nodes_touched_by",
    "process_tree",
    "process_tree_select",
    "processes_of_code",
    "processes_on_computer",
    "provenance_around",
    "recent_nodes",
    "recent_writes",
    "repository_files",
]

#: The states of a process that has not ended.
ACTIVE_STATES = ("created", "running", "waiting")
#: What :func:`list_processes` can order by -> the column.
ORDER_BY = {"pk": "id", "ctime": "ctime", "mtime": "mtime", "label": "label"}


def has_attribute(key: str) -> Any:
    """A condition on ``nodes``: the node has attribute ``key``, and it is not null.

    Not ``nodes.c.attributes[key].isnot(None)``: on SQLite that reads ``JSON_QUOTE(...) IS NOT
    NULL``, and JSON_QUOTE makes a missing key the string 'null', so every node matches.
    """
    return nodes.c.attributes[key].as_string().isnot(None)


# -- processes ---------------------------------------------------------------------------------
def active_process_pks(
    *,
    paused: bool | None = None,
    blocked: bool | None = None,
    daemon: bool | None = None,
    after: int | None = None,
) -> list[int]:
    """The pks of unfinished processes, oldest first; only the paused (or not) ones, the
    blocked (or not) ones, the ones handed to the daemon (or not), those of pk above
    ``after``, when asked."""
    query = sa.select(nodes.c.id).where(nodes.c.process_state.in_(ACTIVE_STATES))
    if after is not None:
        query = query.where(nodes.c.id > after)
    if paused is not None:
        is_paused = nodes.c.attributes[PAUSED].as_boolean().is_(True)
        query = query.where(is_paused if paused else sa.not_(is_paused))
    if blocked is not None:
        is_blocked = has_attribute(BLOCKED)
        query = query.where(is_blocked if blocked else sa.not_(is_blocked))
    if daemon is not None:
        is_daemon = nodes.c.attributes[DAEMON].as_boolean().is_(True)
        query = query.where(is_daemon if daemon else sa.not_(is_daemon))
    with get_storage().connection() as connection:
        return list(connection.scalars(query.order_by(nodes.c.id)))


#: The query of :func:`cancel_pending_pks`. ``attribute_text``, not ``has_attribute``: the
#: planners then match the partial index on it (migration 0013), and it stays empty nearly
#: always instead of reading every killed process's attributes.
CANCEL_PENDING_QUERY = (
    sa.select(nodes.c.id)
    .where(
        nodes.c.process_state.in_(("killed", "excepted")),
        attribute_text(nodes.c.attributes, CANCEL_PENDING).isnot(None),
    )
    .order_by(nodes.c.id)
)


def cancel_pending_pks() -> list[int]:
    """Ended processes whose scheduler job is still to be cancelled, oldest first: killed
    ones, and ones ended Excepted because the daemon could not load them."""
    with get_storage().connection() as connection:
        return list(connection.scalars(CANCEL_PENDING_QUERY))


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
    process_type_pattern: str | None = None,
    label: str | None = None,
    label_pattern: str | None = None,
    exit_status: int | None = None,
    pks: Iterable[int] | sa.Select[Any] | None = None,
    group: str | int | None = None,
    order_by: str = "ctime",
    descending: bool = False,
    attribute_keys: Iterable[str] | None = None,
    modified_after: datetime | None = None,
    with_any_attribute: Iterable[str] | None = None,
    paused: bool | None = None,
    caller: int | None = None,
    pipeline_setup: str | None = None,
) -> list[ProcessRow]:
    """Processes in one query, by ``order_by`` (one of :data:`ORDER_BY`), ascending unless
    ``descending``; with a ``limit``, the ``limit`` greatest by that key (the most recent by
    default). Only those in ``states``, finished with a non-zero exit status (``failed``),
    created in the last ``past_days`` days, of a ``process_type`` (or one that matches
    ``process_type_pattern``), with a ``label``, a label matching ``label_pattern`` (see
    :func:`label_condition`), an ``exit_status``, among ``pks``, in the ``group`` (label,
    pk or UUID), changed after ``modified_after``, with any of the attributes
    ``with_any_attribute``, paused (or not), called by process ``caller``, started by
    pipeline setup ``pipeline_setup`` (its runs, any version), as asked. Every
    filter applies before the ``limit``: it counts the processes that pass them. Each row's
    ``attributes`` holds only ``attribute_keys`` when given (those the node has): a finished
    job's other attributes (its trace record, its last job info, ...) are most of its row,
    and reading them is most of a long list's time."""
    if order_by not in ORDER_BY:
        raise ValueError(f"order_by must be one of {', '.join(ORDER_BY)}, not {order_by!r}")
    key = nodes.c[ORDER_BY[order_by]]
    call = links.alias()
    keys = None if attribute_keys is None else sorted(set(attribute_keys))
    attributes = [nodes.c.attributes] if keys is None else _attributes_of(keys)
    query = (
        sa.select(
            *(nodes.c[name] for name in _ROW_COLUMNS),
            computers.c.label,
            call.c.input_id,
            *attributes,
        )
        .outerjoin(computers, computers.c.id == nodes.c.computer_id)
        .outerjoin(call, sa.and_(call.c.output_id == nodes.c.id, call.c.link_type == "call"))
        .where(sa.or_(nodes.c.node_type == "process", nodes.c.node_type.like("process.%")))
        .order_by(key.desc(), nodes.c.id.desc())
    )
    if states:
        query = query.where(nodes.c.process_state.in_(tuple(states)))
    if failed:
        query = query.where(nodes.c.process_state == "finished", nodes.c.exit_status != 0)
    if past_days is not None:
        query = query.where(nodes.c.ctime >= datetime.now(timezone.utc) - timedelta(days=past_days))
    if process_type is not None:
        query = query.where(nodes.c.process_type == process_type)
    if process_type_pattern is not None:
        query = query.where(label_condition(process_type_pattern, nodes.c.process_type))
    if label is not None:
        query = query.where(nodes.c.label == label)
    if label_pattern is not None:
        query = query.where(label_condition(label_pattern))
    if exit_status is not None:
        query = query.where(nodes.c.exit_status == exit_status)
    if isinstance(pks, sa.Select):  # a statement giving them, as process_tree_select's
        query = query.where(nodes.c.id.in_(pks))
    elif pks is not None:
        query = query.where(nodes.c.id.in_(set(pks)))
    if modified_after is not None:
        query = query.where(nodes.c.mtime > modified_after)
    if with_any_attribute is not None:
        query = query.where(sa.or_(*(has_attribute(key) for key in with_any_attribute)))
    if paused is not None:
        is_paused = nodes.c.attributes[PAUSED].as_boolean().is_(True)
        query = query.where(is_paused if paused else sa.not_(is_paused))
    if caller is not None:
        query = query.where(call.c.input_id == caller)
    if pipeline_setup is not None:
        query = query.where(
            nodes.c.attributes[(PIPELINE_RUN, "setup")].as_string() == pipeline_setup
        )
    if group is not None:
        # Lazy: the ORM, only when a group is asked for.
        from veglia.orm.groups import load_group

        group_pk = load_group(group).pk
        members = sa.select(group_nodes.c.node_id).where(group_nodes.c.group_id == group_pk)
        query = query.where(nodes.c.id.in_(members))
    if limit is not None:
        query = query.limit(limit)
    with get_storage().connection() as connection:
        rows = connection.execute(query).all()
    seen: dict[int, ProcessRow] = {}
    for row in rows if descending else reversed(rows):
        if row[0] in seen:
            continue
        if keys is None:
            found = row[12] or {}
        elif len(attributes) == 1:  # one object of the keys; a missing key reads as null
            found = {k: v for k, v in (row[12] or {}).items() if v is not None}
        else:
            found = {k: v for k, v in zip(keys, row[12:], strict=True) if v is not None}
        # row[:10] holds the first ten fields; mypy sees a tuple of any length.
        seen[row[0]] = ProcessRow(*row[:10], found, row[10], row[11])  # type: ignore[call-arg]
    return list(seen.values())


#: The most keys :func:`_attributes_of` puts in one object (SQLite's functions take at most
#: 127 arguments, PostgreSQL's 100).
_MAX_OBJECT_KEYS = 40


def _attributes_of(keys: list[str]) -> list[Any]:
    """Columns of the attributes ``keys`` of each row: one JSON object of them all, so a
    row is decoded once rather than once a key (most of a long list's time on SQLite)."""
    if len(keys) > _MAX_OBJECT_KEYS:
        return [nodes.c.attributes[k] for k in keys]
    pairs = [part for k in keys for part in (sa.literal(k, sa.String), nodes.c.attributes[k])]
    if get_storage().engine.dialect.name == "postgresql":
        return [sa.func.jsonb_build_object(*pairs, type_=JsonType())]
    return [sa.func.json_object(*pairs, type_=JsonType())]


def count_by_state() -> dict[str, int]:
    """How many processes are in each state (``created``, ``finished``, ...), in one query."""
    query = (
        sa.select(nodes.c.process_state, sa.func.count())
        .where(sa.or_(nodes.c.node_type == "process", nodes.c.node_type.like("process.%")))
        .group_by(nodes.c.process_state)
    )
    with get_storage().connection() as connection:
        return {state or "unknown": count for state, count in connection.execute(query)}


def label_condition(pattern: str, column: Any = None) -> Any:
    """A condition on ``nodes``: the label (or ``column``) holds ``pattern``, or matches it
    when it is a glob (``*`` any text, ``?`` one character); case-insensitive on every
    database."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    if "*" in pattern or "?" in pattern:
        like = escaped.replace("*", "%").replace("?", "_")
    else:
        like = f"%{escaped}%"
    return (nodes.c.label if column is None else column).ilike(like, escape="\\")


#: What a node is, in a line: pk, node type, label, process type, state, exit status.
_SUMMARY_COLUMNS = (
    nodes.c.id,
    nodes.c.node_type,
    nodes.c.label,
    nodes.c.process_type,
    nodes.c.process_state,
    nodes.c.exit_status,
)


def recent_nodes(
    pk_prefix: str = "", *, node_type: str | None = None, limit: int = 50
) -> list[tuple[int, str, str, str | None, str | None, int | None]]:
    """(pk, node type, label, process type, process state, exit status) of the ``limit``
    newest nodes whose pk starts with ``pk_prefix``, of ``node_type`` or a sub-type of it
    (``"process"``: every process), newest first: what shell completion offers."""
    if pk_prefix and not pk_prefix.isdigit():
        return []
    query = sa.select(*_SUMMARY_COLUMNS)
    if pk_prefix:
        query = query.where(sa.cast(nodes.c.id, sa.String).like(f"{pk_prefix}%"))
    if node_type is not None:
        query = query.where(
            sa.or_(nodes.c.node_type == node_type, nodes.c.node_type.like(f"{node_type}.%"))
        )
    with get_storage().connection() as connection:
        rows = connection.execute(query.order_by(nodes.c.id.desc()).limit(limit)).all()
    return [tuple(row) for row in rows]


def logs_after(pk: int, last_id: int = 0) -> list[Any]:
    """The log entries of node ``pk`` newer than entry ``last_id``, oldest first (rows with
    the columns of ``logs``: ``id``, ``time``, ``levelname``, ``message``, ``details``...)."""
    query = sa.select(logs).where(logs.c.node_id == pk, logs.c.id > last_id).order_by(logs.c.id)
    with get_storage().connection() as connection:
        return list(connection.execute(query))


@dataclass(frozen=True)
class ChangeStamp:
    """A stamp of everything the views show from the database (:func:`change_stamp`)."""

    #: The newest ``mtime`` of a node: a write of a node bumps it.
    newest_write: datetime | None
    #: How many nodes there are, and the newest pk: a delete shows as fewer than new pks add.
    nodes: int
    newest_node: int | None
    #: The newest log entry.
    newest_log: int | None
    #: Computers and authorizations (an outage, a new computer).
    computers: tuple[Any, ...]
    #: Pipeline setups (a new version, enabled or not) and their newest element: what the
    #: pipeline pages show that no node write tells.
    pipelines: tuple[Any, ...]
    #: The plugins' parts (``change_stamp_parts``: what their overview panels show).
    plugins: tuple[Any, ...] = ()


def change_stamp() -> ChangeStamp:
    """A stamp of everything the views show from the database, in one cheap statement: it
    differs from the one before once anything they show changed. Every part reads an index
    or a small table, except the count of nodes, which reads the smallest index of ``nodes``
    whole (2 ms for 100,000 nodes on SQLite); the newest ``mtime`` reads ``ix_nodes_mtime``.
    The plugins' parts (``change_stamp_parts``) are in the same statement."""
    parts = [
        sa.select(sa.func.max(nodes.c.mtime)),
        sa.select(sa.func.count()).select_from(nodes),
        sa.select(sa.func.max(nodes.c.id)),
        sa.select(sa.func.max(logs.c.id)),
        sa.select(sa.func.count()).select_from(computers),
        sa.select(sa.func.max(computers.c.id)),
        sa.select(sa.func.count()).select_from(authinfos),
        sa.select(sa.func.max(pipeline_setups.c.id)),
        sa.select(sa.func.count()).where(pipeline_setups.c.enabled.is_(True)),
        sa.select(sa.func.max(pipeline_elements.c.id)),
    ]
    parts += _plugin_stamp_parts()
    query = sa.select(*[part.scalar_subquery() for part in parts])
    with get_storage().connection() as connection:
        row = tuple(connection.execute(query).one())
    return ChangeStamp(row[0], row[1], row[2], row[3], row[4:7], row[7:10], row[10:])


def _plugin_stamp_parts() -> list[Any]:
    """The plugins' parts of the stamp; a plugin whose hook fails adds none (its panel then
    moves with the others' changes only) and is logged, as the overview shows its panel's
    error."""
    # Lazy: the plugin manager only when a page watches the database.
    from veglia.plugin_manager import gather

    parts, errors = gather("change_stamp_parts")
    for plugin, error in errors:
        LOGGER.warning("plugin %r: change_stamp_parts failed: %s", plugin, error)
    return [part for _, part in parts]


def recent_writes(since: datetime, limit: int) -> dict[int, datetime]:
    """The nodes written after ``since``, pk -> ``mtime``: the newest ``limit`` of them
    (read down ``ix_nodes_mtime``); ``limit + 1`` entries say there were more."""
    query = (
        sa.select(nodes.c.id, nodes.c.mtime)
        .where(nodes.c.mtime > since)
        .order_by(nodes.c.mtime.desc())
        .limit(limit + 1)
    )
    with get_storage().connection() as connection:
        return {pk: mtime for pk, mtime in connection.execute(query)}


def nodes_touched_by(pks: Iterable[int], after_log: int | None) -> set[int]:
    """The nodes a view of another node may show as changed once new nodes ``pks`` were
    stored and log entries after ``after_log`` (None: none) added: the sources of the links
    into ``pks`` (the caller of a new step, the job that created a new output, the inputs of
    a new job) and the nodes of those log entries. One statement."""
    parts = []
    pks = set(pks)
    if pks:
        parts.append(sa.select(links.c.input_id).where(links.c.output_id.in_(pks)))
    if after_log is not None:
        parts.append(sa.select(logs.c.node_id).where(logs.c.id > after_log))
    if not parts:
        return set()
    query = parts[0] if len(parts) == 1 else sa.union(*parts)
    with get_storage().connection() as connection:
        return set(connection.scalars(query))


# -- any node ----------------------------------------------------------------------------------
def node_mtime(pk: int) -> datetime | None:
    """When node ``pk`` last changed, read now (a loaded node's ``mtime`` is as of its load)."""
    with get_storage().connection() as connection:
        return connection.scalar(sa.select(nodes.c.mtime).where(nodes.c.id == pk))


def node_pks(pks: Iterable[int] | None = None) -> list[int]:
    """The pks of every node, or of those of ``pks`` that exist, in order."""
    query = sa.select(nodes.c.id).order_by(nodes.c.id)
    if pks is not None:
        query = query.where(nodes.c.id.in_(set(pks)))
    with get_storage().connection() as connection:
        return list(connection.scalars(query))


def links_of(pk: int, *, incoming: bool) -> list[tuple[str, str, int, str]]:
    """(label, link type, pk, node type) of every link into or out of node ``pk``."""
    mine, other = (
        (links.c.output_id, links.c.input_id) if incoming else (links.c.input_id, links.c.output_id)
    )
    query = (
        sa.select(links.c.label, links.c.link_type, nodes.c.id, nodes.c.node_type)
        .join(nodes, nodes.c.id == other)
        .where(mine == pk)
        .order_by(links.c.id)
    )
    with get_storage().connection() as connection:
        return [tuple(row) for row in connection.execute(query)]


def provenance_around(
    pk: int, depth: int, attribute_keys: Iterable[str] | None = None
) -> tuple[list[Any], list[tuple[int, int, str, str]]]:
    """The nodes within ``depth`` links of node ``pk``, one query a level, and the links
    between them: (rows with ``id``, ``node_type``, ``label``, ``process_type``,
    ``process_state``, ``exit_status`` and ``attributes`` (only ``attribute_keys`` when
    given, a missing one as None), by pk; (source, target, label, link type), in the order
    they were made).

    A process run again (``process rerun``, ``verify --rerun``) counts as linked to the run
    it repeats (link type ``rerun of``) and to the children of that run it reused (link
    type ``reused``, labelled by call key): no stored links, but how the two tries relate."""
    keys = None if attribute_keys is None else list(attribute_keys)
    attributes = (
        nodes.c.attributes
        if keys is None or len(keys) > _MAX_OBJECT_KEYS
        else _attributes_of(keys)[0].label("attributes")
    )
    seen, frontier = {pk}, {pk}
    edges: dict[int, tuple[int, int, str, str]] = {}
    reruns: dict[tuple[int, int, str, str], None] = {}
    with get_storage().connection() as connection:
        for _ in range(depth):
            if not frontier:
                break
            rows = connection.execute(
                sa.select(
                    links.c.id,
                    links.c.input_id,
                    links.c.output_id,
                    links.c.label,
                    links.c.link_type,
                ).where(sa.or_(links.c.input_id.in_(frontier), links.c.output_id.in_(frontier)))
            ).all()
            found = set()
            for link_id, source, target, label, kind in rows:
                edges[link_id] = (source, target, label, kind)
                found |= {source, target}
            for edge in _rerun_edges(connection, frontier):
                reruns.setdefault(edge, None)
                found.add(edge[1])
            frontier = found - seen
            seen |= found
        near = connection.execute(
            sa.select(*_SUMMARY_COLUMNS, attributes)
            .where(nodes.c.id.in_(seen))
            .order_by(nodes.c.id)
        ).all()
    # A rerun names its earlier run by pk: one deleted since leaves no edge to nothing.
    present = {row.id for row in near}
    return list(near), [edges[key] for key in sorted(edges)] + [
        edge for edge in reruns if edge[1] in present
    ]


def _rerun_edges(connection: Any, pks: set[int]) -> list[tuple[int, int, str, str]]:
    """From the processes among ``pks`` run again: to the run each repeats, and to the
    children of it each reused."""
    rows = connection.execute(
        sa.select(nodes.c.id, nodes.c.attributes[RERUN_OF], nodes.c.attributes[REUSED_CALLS]).where(
            nodes.c.id.in_(pks), nodes.c.node_type.like("process%")
        )
    ).all()
    found: list[tuple[int, int, str, str]] = []
    for pk, rerun_of, reused in rows:
        if isinstance(rerun_of, int):
            found.append((pk, rerun_of, "RERUN", "rerun of"))
        for call_key, child in (reused or {}).items():
            if isinstance(child, int):
                found.append((pk, child, call_key, "reused"))
    return found


def process_tree_select(pks: Iterable[int]) -> sa.Select[Any]:
    """A statement giving ``pks`` and every process they called, however deep (a recursive
    query): for ``list_processes(pks=...)``, which then needs no bound value per process."""
    tree = sa.select(nodes.c.id).where(nodes.c.id.in_(set(pks))).cte("tree", recursive=True)
    called = (
        sa.select(links.c.output_id)
        .join(tree, links.c.input_id == tree.c.id)
        .where(links.c.link_type == "call")
    )
    tree = tree.union(called)  # union, not union all: a cycle ends
    return sa.select(tree.c.id)


def process_tree(pks: Iterable[int]) -> set[int]:
    """``pks`` and every process they called, however deep, in one statement."""
    with get_storage().connection() as connection:
        return set(connection.scalars(process_tree_select(pks)))


def created_or_returned(process_pks: Iterable[int]) -> set[int]:
    """The nodes these processes created (calc jobs) or returned (workflows)."""
    with get_storage().connection() as connection:
        return set(
            connection.scalars(
                sa.select(links.c.output_id).where(
                    links.c.input_id.in_(set(process_pks)),
                    links.c.link_type.in_(("create", "output")),
                )
            )
        )


def creating_calcjobs(node_pks: Iterable[int]) -> dict[int, list[int]]:
    """The calc job that created each of these nodes: ``{calc job pk: [node pks]}``."""
    with get_storage().connection() as connection:
        rows = connection.execute(
            sa.select(links.c.input_id, links.c.output_id)
            .join(nodes, nodes.c.id == links.c.input_id)
            .where(
                links.c.output_id.in_(set(node_pks)),
                links.c.link_type == "create",
                nodes.c.node_type == "process.calcjob",
            )
        ).all()
    producers: dict[int, list[int]] = {}
    for producer, made in rows:
        producers.setdefault(producer, []).append(made)
    return producers


def file_sizes(node_pks: Iterable[int]) -> dict[int, int]:
    """The total size in bytes of each node's stored files (nodes without files left out)."""
    with get_storage().connection() as connection:
        rows = connection.execute(
            sa.select(stored_files.c.node_id, sa.func.sum(stored_files.c.size))
            .where(stored_files.c.node_id.in_(set(node_pks)))
            .group_by(stored_files.c.node_id)
        ).all()
    # PostgreSQL sums a bigint as numeric (a Decimal), which no JSON answer takes.
    return {pk: int(size) for pk, size in rows}


def repository_files(node_pks: Iterable[int]) -> list[tuple[int, str, str]]:
    """(node pk, path, SHA-256) of every stored file of these nodes, by node and path."""
    with get_storage().connection() as connection:
        return [
            tuple(row)
            for row in connection.execute(
                sa.select(stored_files.c.node_id, stored_files.c.path, stored_files.c.sha256)
                .where(stored_files.c.node_id.in_(set(node_pks)))
                .order_by(stored_files.c.node_id, stored_files.c.path)
            )
        ]


# -- computers ---------------------------------------------------------------------------------
def configured_computer_pks() -> set[int]:
    """The pks of the computers the default user configured (``veglia computer configure``)."""
    # Lazy: the user's node class needs the ORM, which this module does without.
    from veglia.orm.users import get_default_user

    user_pk = get_default_user().pk
    query = sa.select(authinfos.c.computer_id).where(authinfos.c.user_id == user_pk)
    with get_storage().connection() as connection:
        return set(connection.scalars(query))


def disabled_computer_pks() -> set[int]:
    """The pks of the computers the default user disabled (``veglia computer disable``)."""
    # Lazy: the user's node class needs the ORM, which this module does without.
    from veglia.orm.users import get_default_user

    user_pk = get_default_user().pk
    query = sa.select(authinfos.c.computer_id).where(
        authinfos.c.user_id == user_pk, authinfos.c.enabled.is_(False)
    )
    with get_storage().connection() as connection:
        return set(connection.scalars(query))


def processes_of_code(code_pk: int) -> list[tuple[int, str, str]]:
    """(pk, process type, state) of the jobs that ran (or run) with the code, oldest first."""
    query = sa.select(nodes.c.id, nodes.c.process_type, nodes.c.process_state).where(
        nodes.c.process_state.isnot(None),
        has_attribute(CODE),
        nodes.c.attributes[CODE]["pk"].as_integer() == code_pk,
    )
    with get_storage().connection() as connection:
        return [
            (pk, kind or "", state)
            for pk, kind, state in connection.execute(query.order_by(nodes.c.id))
        ]


def computer_summaries() -> list[tuple[str, str, str, str]]:
    """(label, hostname, transport type, scheduler type) of every computer, by label."""
    query = sa.select(
        computers.c.label,
        computers.c.hostname,
        computers.c.transport_type,
        computers.c.scheduler_type,
    ).order_by(computers.c.label)
    with get_storage().connection() as connection:
        return [tuple(row) for row in connection.execute(query)]


def active_jobs_by_computer(state_key: str) -> dict[tuple[str, str | None], int]:
    """How many unfinished processes each computer has, by the value of their attribute
    ``state_key`` (the scheduler state): ``{(computer label, value): count}``, one query."""
    value = nodes.c.attributes[state_key].as_string()
    query = (
        sa.select(computers.c.label, value, sa.func.count())
        .join(computers, computers.c.id == nodes.c.computer_id)
        .where(nodes.c.process_state.in_(ACTIVE_STATES))
        .group_by(computers.c.label, value)
    )
    with get_storage().connection() as connection:
        return {(label, state): count for label, state, count in connection.execute(query)}


def processes_on_computer(computer_pk: int, *, active: bool = True) -> list[tuple[int, str, str]]:
    """(pk, process type, state) of the processes run on the computer, oldest first; only
    those that have not ended, unless ``active`` is False."""
    query = sa.select(nodes.c.id, nodes.c.process_type, nodes.c.process_state).where(
        nodes.c.computer_id == computer_pk, nodes.c.process_state.isnot(None)
    )
    if active:
        query = query.where(nodes.c.process_state.in_(ACTIVE_STATES))
    with get_storage().connection() as connection:
        return [
            (pk, kind or "", state)
            for pk, kind, state in connection.execute(query.order_by(nodes.c.id))
        ]


def node_pks_on_computer(computer_pk: int) -> list[int]:
    """The pks of every node that points at the computer (its jobs, their remote folders)."""
    query = sa.select(nodes.c.id).where(nodes.c.computer_id == computer_pk).order_by(nodes.c.id)
    with get_storage().connection() as connection:
        return list(connection.scalars(query))
