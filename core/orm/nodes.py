"""Nodes of the provenance graph as Python objects: the base :class:`Node`, with its
attributes, extras, files and links, and :func:`load_node`.

A node is built in memory, then :meth:`Node.store` writes it once; attributes of a stored
data node are frozen (provenance), while a process node's attributes keep changing as it
runs. Each method opens its own short transaction, so objects can be passed between
threads and processes by pk.

The kinds of node live beside it: data in :mod:`veglia.orm.data`, process records in
:mod:`veglia.orm.process_nodes`. Each subclass registers itself by its ``node_type`` (the
string stored in the row) when its module is imported, and :func:`load_node` gives a stored
node that class; :func:`node_class` imports both modules the first time it is asked, so
every importer of this one loads stored nodes as their classes (``veglia.orm`` loads its
names lazily: importing ``veglia.orm.attributes`` loads no storage layer).
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from veglia.exceptions import ModificationNotAllowed, NotExistent, StorageError
from veglia.manage import get_storage
from veglia.orm.users import get_default_user
from veglia.relative_paths import checked_relative
from veglia.storage import models

__all__ = ["Node", "as_utc", "load_node", "node_type_class"]

#: Every node class by its ``node_type``, filled in as subclasses are defined.
_NODE_CLASSES: dict[str, type[Node]] = {}


def _json_path(key: str) -> str:
    """An SQLite JSON path to a top-level key (quoted: dots and spaces are fine)."""
    if '"' in key or "\\" in key or not key:
        raise ValueError(f"Attribute names may not be empty or hold quotes or backslashes: {key!r}")
    return f'$."{key}"'


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
        self._pending_files: dict[str, bytes] = {}
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
        return copy.deepcopy(self._attributes)

    def get_attribute(self, key: str, default: Any = None) -> Any:
        return copy.deepcopy(self._attributes.get(key, default))

    def set_attribute(self, key: str, value: Any) -> None:
        self.set_attributes({key: value})

    def set_attributes(self, values: dict[str, Any]) -> None:
        if self.is_stored and not self._mutable_when_stored:
            raise ModificationNotAllowed(
                f"{self!r} is stored; its attributes are part of the provenance and cannot change."
            )
        values = copy.deepcopy(values)
        if self.is_stored:
            self._attributes = self._patch_json("attributes", values, [])
        else:
            self._attributes.update(values)

    def note_attributes(self, values: dict[str, Any]) -> None:
        """Change attributes of this in-memory node only, not in the database: for values
        the engine refreshes at every poll and writes now and then (a job's elapsed time)."""
        if not self.is_stored:
            raise ModificationNotAllowed(f"{self!r} is not stored: set its attributes instead.")
        self._attributes.update(copy.deepcopy(values))

    def delete_attribute(self, key: str) -> None:
        if self.is_stored and not self._mutable_when_stored:
            raise ModificationNotAllowed(f"{self!r} is stored; its attributes cannot change.")
        if self.is_stored:
            self._attributes = self._patch_json("attributes", {}, [key])
        else:
            self._attributes.pop(key, None)

    def _patch_json(self, column: str, values: dict[str, Any], removed: list[str]) -> dict:
        """Change only the given keys, in the database, atomically; return the new column.

        Writers in other processes (the engine, the CLI, a monitor) change other keys of
        the same node: rewriting the whole column from a stale copy would undo theirs.
        """
        for key in [*values, *removed]:
            _json_path(key)  # the same names are allowed on every database
        storage = get_storage()
        table = models.Node.__table__
        target = table.c[column]
        dialect = storage.engine.dialect.name
        if dialect == "postgresql":
            expression: Any = target
            for key in removed:
                expression = expression.op("-")(sa.literal(key))
            patch = sa.cast(sa.literal(json.dumps(values, allow_nan=False)), JSONB)
            expression = expression.op("||")(patch)
        else:
            expression = target
            if removed:
                expression = sa.func.json_remove(expression, *[_json_path(k) for k in removed])
            for key, value in values.items():
                expression = sa.func.json_set(
                    expression, _json_path(key), sa.func.json(json.dumps(value, allow_nan=False))
                )
        with storage.session() as session:
            result = session.execute(
                table.update()
                .where(table.c.id == self.pk)
                .values({column: expression})
                .returning(target)
            ).scalar_one()
        return dict(result if isinstance(result, dict) else json.loads(result))

    @property
    def extras(self) -> dict[str, Any]:
        return copy.deepcopy(self._extras)

    def set_extra(self, key: str, value: Any) -> None:
        """Extras are free annotations; they may change at any time."""
        if self.is_stored:
            self._extras = self._patch_json("extras", {key: copy.deepcopy(value)}, [])
        else:
            self._extras[key] = copy.deepcopy(value)

    def _update_row(self, **columns: Any) -> None:
        with get_storage().session() as session:
            session.execute(
                sa.update(models.Node).where(models.Node.id == self.pk).values(**columns)
            )

    # -- files ---------------------------------------------------------------------------
    def put_object_from_bytes(self, path: str, content: bytes) -> None:
        """Add a file to the node's repository (before storing, or on a process node)."""
        self.put_objects({path: content})

    def put_objects(self, files: dict[str, bytes]) -> None:
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
        self.put_object_from_bytes(path, Path(source).read_bytes())

    def _store_files(self, files: dict[str, bytes], *, new: bool = False) -> None:
        storage = get_storage()
        records = []
        for path, content in files.items():
            sha256, size = storage.repository.put_stream(io.BytesIO(content))
            records.append({"node_id": self.pk, "path": path, "sha256": sha256, "size": size})
        table = models.RepositoryFile.__table__
        with storage.session() as session:
            if not new:
                session.execute(
                    table.delete().where(table.c.node_id == self.pk, table.c.path.in_(files))
                )
            session.execute(table.insert(), records)

    def list_objects(self) -> list[models.RepositoryFile]:
        """The node's files with their hashes and sizes, sorted by path."""
        if not self.is_stored:
            return []
        with get_storage().session() as session:
            return list(
                session.scalars(
                    sa.select(models.RepositoryFile)
                    .where(models.RepositoryFile.node_id == self.pk)
                    .order_by(models.RepositoryFile.path)
                )
            )

    def list_object_names(self) -> list[str]:
        if not self.is_stored:
            return sorted(self._pending_files)
        return [record.path for record in self.list_objects()]

    def get_object_content(self, path: str) -> bytes:
        if not self.is_stored:
            if path not in self._pending_files:
                raise NotExistent(f"{self!r} has no file {path!r}.")
            return self._pending_files[path]
        for record in self.list_objects():
            if record.path == path:
                return get_storage().repository.get_bytes(record.sha256)
        names = ", ".join(self.list_object_names()) or "none"
        raise NotExistent(f"{self!r} has no file {path!r} (files: {names}).")

    # -- storing -------------------------------------------------------------------------
    def _row_values(self) -> dict[str, Any]:
        return {}

    def store(self, incoming: Iterable[tuple[Node, str, str]] = ()) -> Node:
        """Write the node once; storing again is a no-op.

        ``incoming`` links (source, link type, label) of stored nodes are written in the same
        transaction, so no reader (and no worker that dies) ever sees the node without them.
        """
        if self.is_stored:
            return self

        row = models.Node(
            node_type=self.node_type,
            label=self.label,
            description=self.description,
            attributes=self._attributes,
            extras=self._extras,
            user_id=get_default_user().pk,
            **self._row_values(),
        )
        with get_storage().session() as session:
            session.add(row)
            try:
                session.flush()
            except sa.exc.StatementError as exc:
                if isinstance(exc.orig, ValueError):  # NaN or Infinity in the attributes
                    raise ValueError(f"{self!r} cannot be stored: {exc.orig}.") from None
                raise
            stored = row.id, row.uuid, row.ctime
            for source, link_type, label in incoming:
                session.add(
                    models.Link(
                        input_id=source.pk, output_id=row.id, label=label, link_type=link_type
                    )
                )
        # Only once committed: a failed commit leaves the node unstored, to be stored again.
        self._pk, self._uuid, self._ctime = stored
        if self._pending_files:
            self._store_files(self._pending_files, new=True)
            self._pending_files = {}
        return self

    @classmethod
    def _from_row(cls, row: models.Node) -> Node:
        node_class = node_type_class(row.node_type)
        node = node_class.__new__(node_class)
        Node.__init__(node, label=row.label, description=row.description)
        node._pk, node._uuid, node._ctime = row.id, row.uuid, row.ctime
        node._attributes = dict(row.attributes or {})
        node._extras = dict(row.extras or {})
        node._load_row(row)
        return node

    def _load_row(self, row: models.Node) -> None:
        """Subclasses read their own columns here."""

    # -- links ---------------------------------------------------------------------------
    def add_incoming(self, source: Node, link_type: str, label: str) -> None:
        with get_storage().session() as session:
            session.add(
                models.Link(input_id=source.pk, output_id=self.pk, label=label, link_type=link_type)
            )

    def _linked(self, incoming: bool, link_types: tuple[str, ...]) -> list[tuple[str, str, Node]]:
        link = models.Link
        mine, other = (
            (link.output_id, link.input_id) if incoming else (link.input_id, link.output_id)
        )
        with get_storage().session() as session:
            rows = session.execute(
                sa.select(link.label, link.link_type, models.Node)
                .join(models.Node, models.Node.id == other)
                .where(mine == self.pk, link.link_type.in_(link_types))
                .order_by(link.id)
            ).all()
        return [(label, link_type, Node._from_row(row)) for label, link_type, row in rows]

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


def as_utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite gives back naive ones)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def node_type_class(node_type: str) -> type[Node]:
    """The class of nodes stored with ``node_type`` (:class:`Node` for an unknown one)."""
    if node_type not in _NODE_CLASSES:
        # Lazy: the kinds of node import this module; they register themselves on import.
        import veglia.orm.data
        import veglia.orm.process_nodes  # noqa: F401
    return _NODE_CLASSES.get(node_type, Node)


def load_node(identifier: int | str) -> Node:
    """A stored node by pk, or by UUID (or a unique UUID prefix)."""
    with get_storage().session() as session:
        if isinstance(identifier, int) or str(identifier).isdigit():
            row = session.get(models.Node, int(identifier))
        else:
            rows = session.scalars(
                sa.select(models.Node).where(models.Node.uuid.startswith(str(identifier))).limit(2)
            ).all()
            if len(rows) > 1:
                raise NotExistent(f"More than one node has a UUID starting with {identifier!r}.")
            row = rows[0] if rows else None
    if row is None or row.node_type == "selftest":
        raise NotExistent(f"No node with pk or UUID {identifier!r}.")
    return Node._from_row(row)
