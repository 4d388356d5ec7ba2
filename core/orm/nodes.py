"""Nodes of the provenance graph as Python objects: the base :class:`Node`, with its
attributes, extras, files and links.

A node is built in memory, then :meth:`Node.store` writes it once; attributes of a stored
data node are frozen (provenance), while a process node's attributes keep changing as it
runs. Each method opens its own short transaction, so objects can be passed between
threads and processes by pk.

The kinds of node stand above it: data in :mod:`veglia.orm.data`, process records in
:mod:`veglia.orm.process_nodes`. Each subclass registers itself by its ``node_type`` (the
string stored in the row) when its module is imported; :mod:`veglia.orm.loading`, above
them, imports both and holds :func:`~veglia.orm.loading.load_node`, so a node loaded there
comes back as its class, and so do the nodes reached by its links (``veglia.orm`` loads its
names lazily: importing ``veglia.orm.attributes`` loads no storage layer).
"""

from __future__ import annotations

import copy
import functools
import io
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, NamedTuple

import sqlalchemy as sa

from veglia.exceptions import (
    InvalidKeyError,
    InvalidLinkError,
    ModificationNotAllowed,
    NotExistent,
    StorageError,
)
from veglia.manage import get_storage
from veglia.orm.provenance import link_fault
from veglia.orm.users import get_default_user
from veglia.relative_paths import checked_relative
from veglia.storage import tables
from veglia.storage.tables import new_uuid, utcnow
from veglia.storage.times import as_utc

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "MIN_UUID_PREFIX",
    "Node",
    "StoredBlob",
    "as_utc",
    "is_uuid_prefix",
    "row_by_uuid_prefix",
]


_SCALARS = (str, int, float, bool, type(None))


def _copy(value: Any) -> Any:
    """A deep copy of attribute data. Attributes are JSON's dicts, lists and scalars:
    copied without ``copy.deepcopy``'s memo (several times faster, and done on every
    read); anything else still goes through ``deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


_UUID_LENGTH = 36
#: The fewest characters of a UUID that name a node or group by prefix. AiiDA takes any
#: hex prefix ("abc" too); with so few characters a typo (a label, a word) names some node
#: by chance, so veglia asks for at least as many as git does of an abbreviated hash.
MIN_UUID_PREFIX = 4
_HEX_OR_DASH = frozenset("0123456789abcdef-")


def is_uuid_prefix(text: str) -> bool:
    """Whether ``text`` may be looked up as the start of a UUID: hex digits and dashes (as
    AiiDA reads one), at least :data:`MIN_UUID_PREFIX` of them."""
    return len(text) >= MIN_UUID_PREFIX and set(text.lower()) <= _HEX_OR_DASH


def row_by_uuid_prefix(
    connection: Connection, table: sa.Table, text: str, kind: str
) -> sa.Row[Any] | None:
    """The row of ``table`` (nodes' or groups') whose UUID starts with ``text``; None when
    none does or ``text`` is no UUID prefix (:func:`is_uuid_prefix`: too short, or not hex).
    Raises :class:`NotExistent` when more than one does, naming them by their ``kind``."""
    if not is_uuid_prefix(text):
        return None
    rows = connection.execute(
        sa.select(table).where(table.c.uuid.startswith(text.lower())).limit(2)
    ).all()
    if len(rows) > 1:
        raise NotExistent(f"More than one {kind} has a UUID starting with {text!r}.")
    return rows[0] if rows else None


#: Every node class by its ``node_type``, filled in as subclasses are defined.
_NODE_CLASSES: dict[str, type[Node]] = {}


#: Strings of stored attributes up to this length are shared between nodes (interned).
_SHARED_LENGTH = 80


def shared_strings(value: Any) -> Any:
    """``value`` (decoded JSON) with its keys and short strings interned.

    A daemon worker holds the node of each process it runs, thousands of them: their
    attributes have the same keys and mostly the same values (options, computer, states),
    which JSON decodes into new strings for every node. (Walked whole: for process nodes,
    whose attributes are small; a data node's may be a large array.)
    """
    if isinstance(value, dict):
        return {sys.intern(k) if type(k) is str else k: shared_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared_strings(v) for v in value]
    if type(value) is str and len(value) <= _SHARED_LENGTH:
        return sys.intern(value)
    return value


def _json_path(key: str) -> str:
    """An SQLite JSON path to a top-level key (quoted: dots and spaces are fine)."""
    if '"' in key or "\\" in key or not key:
        raise InvalidKeyError(
            f"An attribute or extra name may not be empty or hold quotes or backslashes: {key!r}."
        )
    return f'$."{key}"'


@functools.lru_cache(maxsize=64)
def _patch_statement(dialect: str, column: str, n_set: int, n_removed: int) -> Any:
    """``UPDATE`` of some keys of a JSON column, returning the column: one text statement per
    shape, built once (building and caching an expression cost more than running it)."""
    assert column in ("attributes", "extras")
    if dialect == "postgresql":
        expression = column + "".join(f" - :r{i}" for i in range(n_removed))
        expression = f"({expression}) || CAST(:patch AS JSONB)"
    else:
        expression = column
        if n_removed:
            paths = ", ".join(f":r{i}" for i in range(n_removed))
            expression = f"json_remove({expression}, {paths})"
        if n_set:
            pairs = ", ".join(f":k{i}, json(:v{i})" for i in range(n_set))
            expression = f"json_set({expression}, {pairs})"
    return sa.text(
        f"UPDATE nodes SET {column} = {expression}, mtime = :now WHERE id = :pk RETURNING {column}"
    ).bindparams(sa.bindparam("now", type_=tables.nodes.c.mtime.type))


@functools.lru_cache(maxsize=64)
def _update_statement(columns: tuple[str, ...]) -> Any:
    """``UPDATE`` of some columns of one node, built once per set of columns (through the
    table: the ORM's bulk-update path cost more than the statement, and the engine writes a
    node at every state change)."""
    table = tables.nodes
    return (
        table.update()
        .where(table.c.id == sa.bindparam("node_pk"))
        .values({name: sa.bindparam(name, type_=table.c[name].type) for name in columns})
    )


@functools.lru_cache(maxsize=16)
def _insert_statement(columns: tuple[str, ...]) -> Any:
    """``INSERT`` of one node returning its id and UUID, built once per set of columns: the values
    go as parameters (a statement built with its values is cache-keyed value by value,
    which cost more than running it; every submission stores three nodes)."""
    table = tables.nodes
    return (
        table.insert()
        .values({name: sa.bindparam(name, type_=table.c[name].type) for name in columns})
        .returning(table.c.id, table.c.uuid)
    )


@functools.lru_cache(maxsize=1)
def _insert_many_statement() -> Any:
    """``INSERT`` of several nodes (the same columns in each row), returning their ids and
    UUIDs: the order of RETURNING rows is not guaranteed, the UUIDs say which is which."""
    table = tables.nodes
    return table.insert().returning(table.c.id, table.c.uuid)


def _uniform(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with the same columns, so that one statement inserts them all: a column some
    rows lack (a process's own, in a data node's row) is NULL in them, as it would be
    left out (those columns have no default)."""
    columns = tuple(dict.fromkeys(name for row in rows for name in row))
    if all(len(row) == len(columns) for row in rows):
        return rows
    table = tables.nodes
    for name in {name for name in columns for row in rows if name not in row}:
        column = table.c[name]
        assert column.nullable and column.default is None and column.server_default is None
    return [{name: row.get(name) for name in columns} for row in rows]


# The statements of a job's every step, built once: building one (and its cache key) cost
# about as much as running it.
_NODES = tables.nodes
_FILES = tables.repository_files
_LINKS = tables.links
_NODE_BY_PK = sa.select(_NODES).where(_NODES.c.id == sa.bindparam("key"))
_NODE_BY_UUID = sa.select(_NODES).where(_NODES.c.uuid == sa.bindparam("key"))
_FILES_OF_NODE = (
    sa.select(_FILES).where(_FILES.c.node_id == sa.bindparam("node_id")).order_by(_FILES.c.path)
)
_FILES_DELETE = _FILES.delete().where(
    _FILES.c.node_id == sa.bindparam("node_id"),
    _FILES.c.path.in_(sa.bindparam("paths", expanding=True)),
)
_FILES_INSERT = _FILES.insert()


class StoredBlob(NamedTuple):
    """A file's content already in the repository: what an unstored node holds of a file
    given by its path, rather than the content itself (which may not fit in memory)."""

    sha256: str
    size: int


def _put_blobs(files: dict[str, bytes | StoredBlob]) -> list[dict[str, Any]]:
    """Write the contents to the repository; the file rows to record, without their node."""
    repository = get_storage().repository
    blobs = []
    for path, content in files.items():
        sha256, size = content if isinstance(content, StoredBlob) else repository.put_bytes(content)
        blobs.append({"path": path, "sha256": sha256, "size": size})
    return blobs


_LINK_INSERT = _LINKS.insert()


@functools.lru_cache(maxsize=8)
def _linked_statement(incoming: bool, link_types: tuple[str, ...]) -> Any:
    """The nodes linked into (or out of) node ``:pk`` by these link types, in link order."""
    mine, other = (
        (_LINKS.c.output_id, _LINKS.c.input_id)
        if incoming
        else (_LINKS.c.input_id, _LINKS.c.output_id)
    )
    return (
        sa.select(_LINKS.c.label.label("link_label"), _LINKS.c.link_type, _NODES)
        .join(_NODES, _NODES.c.id == other)
        .where(mine == sa.bindparam("pk"), _LINKS.c.link_type.in_(link_types))
        .order_by(_LINKS.c.id)
    )


class Node:
    """A vertex of the provenance graph."""

    node_type: ClassVar[str] = "node"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _NODE_CLASSES[cls.node_type] = cls

    def __init__(self, *, label: str = "", description: str = "") -> None:
        self._pk: int | None = None
        self._uuid: str | None = None
        self.label = label
        self.description = description
        self._attributes: dict[str, Any] = {}
        self._extras: dict[str, Any] = {}
        #: The files of an unstored node: their content, or the blob it is already stored as.
        self._pending_files: dict[str, bytes | StoredBlob] = {}
        self._ctime: datetime | None = None
        self._row_extra: dict[str, Any] = {}

    # -- identity ----------------------------------------------------------------------
    @property
    def pk(self) -> int:
        if self._pk is None:
            raise StorageError(f"{type(self).__name__} is not stored yet, so it has no pk.")
        return self._pk

    @property
    def uuid(self) -> str:
        if self._uuid is None:
            raise StorageError(f"{type(self).__name__} is not stored yet, so it has no uuid.")
        return self._uuid

    @property
    def is_stored(self) -> bool:
        return self._pk is not None

    @property
    def ctime(self) -> datetime | None:
        return self._ctime

    def __repr__(self) -> str:
        where = f"pk={self._pk}" if self._pk is not None else "unstored"
        return f"<{type(self).__name__}: {where}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Node) and self.is_stored and other.is_stored:
            return self.pk == other.pk
        return self is other

    def __hash__(self) -> int:
        return hash(self._uuid) if self._uuid else id(self)

    # -- attributes and extras ---------------------------------------------------------
    _mutable_when_stored: ClassVar[bool] = False

    @property
    def attributes(self) -> dict[str, Any]:
        result: dict[str, Any] = _copy(self._attributes)
        return result

    def get_attribute(self, key: str, default: Any = None) -> Any:
        return _copy(self._attributes.get(key, default))

    def set_attribute(self, key: str, value: Any) -> None:
        self.set_attributes({key: value})

    def set_attributes(self, values: dict[str, Any]) -> None:
        if self.is_stored and not self._mutable_when_stored:
            raise ModificationNotAllowed(
                f"{self!r} is stored; its attributes are part of the provenance and cannot change."
            )
        values = _copy(values)
        if self.is_stored:
            self._attributes = self._patch_json("attributes", values, [])
        else:
            self._attributes.update(values)

    def note_attributes(self, values: dict[str, Any]) -> None:
        """Change attributes of this in-memory node only, not in the database: for values
        the engine refreshes at every poll and writes now and then (a job's elapsed time)."""
        if not self.is_stored:
            raise ModificationNotAllowed(f"{self!r} is not stored: set its attributes instead.")
        self._attributes.update(_copy(values))

    def delete_attribute(self, key: str) -> None:
        if self.is_stored and not self._mutable_when_stored:
            raise ModificationNotAllowed(f"{self!r} is stored; its attributes cannot change.")
        if self.is_stored:
            self._attributes = self._patch_json("attributes", {}, [key])
        else:
            self._attributes.pop(key, None)

    def _patch_json(
        self, column: str, values: dict[str, Any], removed: list[str]
    ) -> dict[str, Any]:
        """Change only the given keys, in the database, atomically; return the new column.

        Writers in other processes (the engine, the CLI, a monitor) change other keys of
        the same node: rewriting the whole column from a stale copy would undo theirs.
        """
        paths = [_json_path(key) for key in values]  # the same names on every database
        for key in removed:
            _json_path(key)
        dialect = get_storage().engine.dialect.name
        params: dict[str, Any] = {"pk": self.pk, "now": utcnow()}
        if dialect == "postgresql":
            params["patch"] = json.dumps(values, allow_nan=False)
            params.update({f"r{i}": key for i, key in enumerate(removed)})
        else:
            params.update({f"r{i}": _json_path(key) for i, key in enumerate(removed)})
            for i, (path, value) in enumerate(zip(paths, values.values(), strict=True)):
                params[f"k{i}"], params[f"v{i}"] = path, json.dumps(value, allow_nan=False)
        statement = _patch_statement(dialect, column, len(values), len(removed))
        with get_storage().connection() as connection:
            result = connection.execute(statement, params).scalar_one()
        decoded = result if isinstance(result, dict) else json.loads(result)
        return self._decoded(decoded, getattr(self, f"_{column}"))

    def _decoded(
        self, column: dict[str, Any] | None, previous: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The node's own copy of a JSON column as read (top-level keys shared); ``previous``
        is the node's copy before, when it had one."""
        return {sys.intern(k): v for k, v in (column or {}).items()}

    @property
    def extras(self) -> dict[str, Any]:
        result: dict[str, Any] = _copy(self._extras)
        return result

    def set_extra(self, key: str, value: Any) -> None:
        """Extras are free annotations; they may change at any time."""
        if self.is_stored:
            self._extras = self._patch_json("extras", {key: _copy(value)}, [])
        else:
            self._extras[key] = _copy(value)

    def delete_extra(self, key: str) -> None:
        """Remove an extra (nothing happens when there is none of that key)."""
        if self.is_stored:
            self._extras = self._patch_json("extras", {}, [key])
        else:
            self._extras.pop(key, None)

    # -- label and description -----------------------------------------------------------
    def set_label(self, label: str) -> None:
        """Change the label, in the database too once stored: labels and descriptions are
        notes, not provenance, and may change at any time."""
        if self.is_stored:
            self._update_row(label=label)
        self.label = label

    def set_description(self, description: str) -> None:
        """Change the description, in the database too once stored (see :meth:`set_label`)."""
        if self.is_stored:
            self._update_row(description=description)
        self.description = description

    def _update_row(self, **columns: Any) -> None:
        with get_storage().connection() as connection:
            connection.execute(_update_statement(tuple(columns)), {"node_pk": self.pk, **columns})

    # -- files ---------------------------------------------------------------------------
    def put_object_from_bytes(self, path: str, content: bytes) -> None:
        """Add a file to the node's repository (before storing, or on a process node)."""
        self.put_objects({path: content})

    def put_objects(self, files: Mapping[str, bytes | StoredBlob]) -> None:
        """Add several files at once (one database transaction)."""
        if self.is_stored and not self._mutable_when_stored:
            raise ModificationNotAllowed(f"{self!r} is stored; its files cannot change.")
        # The names become paths in work directories and retrieved folders.
        files = {checked_relative(path): content for path, content in files.items()}
        if self.is_stored:
            self._store_files(files)
        else:
            self._pending_files.update(files)

    def put_object_from_file(self, path: str, source: str | Path) -> None:
        """Add a file by copying the local file ``source``: streamed into the repository now
        (hashed while copied, through a temporary file), so a file of any size costs no more
        memory than a buffer. Until the node is stored the blob belongs to no node, which is
        harmless (as after a store that failed)."""
        self.put_objects({path: StoredBlob(*get_storage().repository.put_file(source))})

    def adopt_object_file(self, path: str, source: Path) -> None:
        """Add a file veglia wrote in the repository's temporary folder (a job's retrieved
        file): linked into the repository, not copied (see ``FileRepository.adopt``).
        ``source`` must not be written again."""
        self.put_objects({path: StoredBlob(*get_storage().repository.adopt(source))})

    def _store_files(self, files: dict[str, bytes | StoredBlob]) -> None:
        blobs = _put_blobs(files)
        with get_storage().connection() as connection:
            connection.execute(_FILES_DELETE, {"node_id": self.pk, "paths": list(files)})
            connection.execute(_FILES_INSERT, [{"node_id": self.pk, **blob} for blob in blobs])

    def list_objects(self) -> list[Any]:
        """The node's files (rows with ``path``, ``sha256`` and ``size``), sorted by path."""
        if not self.is_stored:
            return []
        with get_storage().connection() as connection:
            return list(connection.execute(_FILES_OF_NODE, {"node_id": self.pk}))

    def list_object_names(self) -> list[str]:
        if not self.is_stored:
            return sorted(self._pending_files)
        return [record.path for record in self.list_objects()]

    def get_object_content(self, path: str) -> bytes:
        """The whole content of a file, in memory (:meth:`open_object` reads a large one
        piece by piece)."""
        content = self._object(path)
        if isinstance(content, bytes):
            return content
        return get_storage().repository.get_bytes(content.sha256)

    def open_object(self, path: str) -> BinaryIO:
        """A file of the node opened for reading in binary: a parser reads a large output
        through it without holding it whole."""
        content = self._object(path)
        if isinstance(content, bytes):
            return io.BytesIO(content)
        return get_storage().repository.open(content.sha256)

    def get_object_blob(self, path: str) -> StoredBlob:
        """The blob a file is stored as; another node given it (``put_objects``) shares
        the content without a copy."""
        content = self._object(path)
        if isinstance(content, bytes):
            return StoredBlob(*get_storage().repository.put_bytes(content))
        return content

    def _object(self, path: str) -> bytes | StoredBlob:
        if not self.is_stored:
            if path not in self._pending_files:
                raise NotExistent(f"{type(self).__name__} (not stored) has no file {path!r}.")
            return self._pending_files[path]
        for record in self.list_objects():
            if record.path == path:
                return StoredBlob(record.sha256, record.size)
        names = ", ".join(self.list_object_names()) or "none"
        raise NotExistent(
            f"Node {self.pk} ({type(self).__name__}) has no file {path!r} (files: {names})."
        )

    # -- storing -------------------------------------------------------------------------
    def _row_values(self) -> dict[str, Any]:
        return {}

    def _new_row(self, user_pk: int | None) -> dict[str, Any]:
        """The row this node is stored as, with a new UUID and the time now."""
        ctime = utcnow()
        return {
            "uuid": new_uuid(),
            "ctime": ctime,
            "mtime": ctime,
            "node_type": self.node_type,
            "label": self.label,
            "description": self.description,
            "attributes": self._attributes,
            "extras": self._extras,
            "user_id": user_pk,
            **self._row_values(),
        }

    def store(
        self, incoming: Iterable[tuple[Node, str, str]] = (), *, together: Iterable[Node] = ()
    ) -> Node:
        """Write the node once; storing again is a no-op.

        ``incoming`` links (source, link type, label) of stored nodes are written in the same
        transaction, so no reader (and no worker that dies) ever sees the node without them.
        ``together``: nodes stored first, in the same statement (the unstored ones among a
        process's inputs: one INSERT for them and the process); they may be sources of
        ``incoming``.
        """
        if self.is_stored:
            return self
        for source, link_type, label in incoming:
            self._check_incoming(source, link_type, label)

        # dict.fromkeys: one row for a node given twice (the same input on two ports).
        nodes = [n for n in dict.fromkeys(together) if not n.is_stored and n is not self]
        nodes.append(self)
        user_pk = get_default_user().pk
        rows = _uniform([node._new_row(user_pk) for node in nodes])
        # The files first: in a transaction that writes nothing before, SQLite's write
        # lock is then not held while they go to disk (a blob of no node is harmless).
        blobs = {id(node): _put_blobs(node._pending_files) for node in nodes if node._pending_files}
        # Through the table, not the mapped classes: no unit of work to flush, and no ORM
        # execution path (it cost more than the INSERT itself).
        with get_storage().connection() as connection:
            try:
                if len(rows) == 1:
                    result = connection.execute(_insert_statement(tuple(rows[0])), rows[0])
                else:  # one INSERT ... VALUES (...), (...) RETURNING
                    result = connection.execute(_insert_many_statement(), rows)
                pks = {uuid: pk for pk, uuid in result}
            except sa.exc.StatementError as exc:
                if isinstance(exc.orig, ValueError):  # NaN or Infinity in the attributes
                    what = repr(self) if len(nodes) == 1 else f"{self!r} or one of its inputs"
                    raise ValueError(f"{what} cannot be stored: {exc.orig}.") from None
                raise
            pk = pks[rows[-1]["uuid"]]
            pk_of = {id(node): pks[row["uuid"]] for node, row in zip(nodes, rows, strict=True)}
            links = [
                {
                    "input_id": pk_of.get(id(source)) or source.pk,
                    "output_id": pk,
                    "label": label,
                    "link_type": link_type,
                }
                for source, link_type, label in incoming
            ]
            if links:
                connection.execute(_LINK_INSERT, links)
            files = [
                {"node_id": pk_of[id(node)], **blob}
                for node in nodes
                for blob in blobs.get(id(node), ())
            ]
            if files:
                connection.execute(_FILES_INSERT, files)
        # Only once written: a failed write leaves the nodes unstored, to be stored again (in
        # a storage transaction, a failed commit ends the step, whose objects are dropped).
        for node, row in zip(nodes, rows, strict=True):
            node._pk, node._uuid, node._ctime = pks[row["uuid"]], row["uuid"], row["ctime"]
            if id(node) in blobs:
                node._pending_files = {}
        return self

    @classmethod
    def _from_row(cls, row: Any) -> Node:
        """The node of a row of the nodes table (or an object with its names)."""
        # The kinds register themselves when imported; veglia.orm.loading imports them all.
        node_class = _NODE_CLASSES.get(row.node_type, Node)
        node = node_class.__new__(node_class)
        Node.__init__(node, label=row.label, description=row.description)
        node._pk, node._uuid, node._ctime = row.id, row.uuid, row.ctime
        node._attributes = node._decoded(row.attributes)
        node._extras = node._decoded(row.extras)
        node._load_row(row)
        return node

    def _load_row(self, row: Any) -> None:
        """Subclasses read their own columns here."""

    # -- links ---------------------------------------------------------------------------
    def _check_incoming(self, source: Node, link_type: str, label: str) -> None:
        fault = link_fault(link_type, source.node_type, self.node_type)
        if fault is not None:
            raise InvalidLinkError(
                f"Cannot link {source!r} to {self!r} as {link_type} {label!r}: {fault}."
            )

    def add_incoming(self, source: Node, link_type: str, label: str) -> None:
        self._check_incoming(source, link_type, label)
        values = {"input_id": source.pk, "output_id": self.pk, "label": label}
        with get_storage().connection() as connection:
            connection.execute(_LINK_INSERT, {**values, "link_type": link_type})

    def _linked(self, incoming: bool, link_types: tuple[str, ...]) -> list[tuple[str, str, Node]]:
        with get_storage().connection() as connection:
            rows = connection.execute(_linked_statement(incoming, link_types), {"pk": self.pk})
            return [(row.link_label, row.link_type, Node._from_row(row)) for row in rows]

    @property
    def inputs(self) -> LinkedNodes:
        """Nodes linked into this one, by label (``node.inputs.x``)."""
        return LinkedNodes(self._linked(True, ("input",)))

    @property
    def outputs(self) -> LinkedNodes:
        """Nodes this one created or returned, by label (``node.outputs.retrieved``)."""
        return LinkedNodes(self._linked(False, ("create", "output")))

    @property
    def creator(self) -> Node | None:
        found = self._linked(True, ("create",))
        return found[0][2] if found else None


class LinkedNodes:
    """Linked nodes by label, with attribute and item access; labels may be nested by '__'."""

    def __init__(self, links: list[tuple[str, str, Node]]) -> None:
        self._nodes = {label: node for label, _, node in links}

    def __getattr__(self, label: str) -> Node:
        try:
            return self._nodes[label]
        except KeyError:
            known = ", ".join(sorted(self._nodes)) or "none"
            raise AttributeError(f"no link labelled {label!r} (labels: {known})") from None

    def __getitem__(self, label: str) -> Node:
        return self._nodes[label]

    def __contains__(self, label: object) -> bool:
        return label in self._nodes

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def items(self) -> list[tuple[str, Node]]:
        return list(self._nodes.items())
