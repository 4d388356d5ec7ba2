"""Nodes of the provenance graph as Python objects: data, processes, and their links.

A node is built in memory, then :meth:`Node.store` writes it once; attributes of a stored
data node are frozen (provenance), while a process node's attributes keep changing as it
runs. Each method opens its own short transaction, so objects can be passed between
threads and processes by pk.
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
from veglia.orm.attributes import (
    BLOCKED,
    CACHED_FROM,
    COMPUTER,
    GPU_METRICS,
    JOB_ID,
    JOB_OUTCOME,
    LAST_JOB_INFO,
    OPTIONS,
    PAUSED,
    PAUSED_REASON,
    REMOTE_WORKDIR,
    RETRIEVE_LIST,
    RIGHT_SIZED,
    SCHEDULER_STATE,
    SIMILARITY_KEY,
    STARTED_AT,
    STOPPED_BY_MONITOR,
    SUBMITTED_AT,
    UNREACHABLE,
    USAGE,
    WAITING_FOR,
)
from veglia.orm.users import get_default_user
from veglia.relative_paths import checked_relative
from veglia.storage import models

__all__ = [
    "TERMINAL_STATES",
    "Bool",
    "CalcJobNode",
    "Data",
    "Dict",
    "Float",
    "FolderData",
    "Int",
    "List",
    "Node",
    "ProcessNode",
    "RemoteData",
    "SinglefileData",
    "Str",
    "WorkflowNode",
    "as_utc",
    "load_node",
    "to_node",
]

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
        node_class = _NODE_CLASSES.get(row.node_type, Node)
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


# -- data ----------------------------------------------------------------------------------
class Data(Node):
    """Data: immutable once stored."""

    node_type = "data"


class _BaseType(Data):
    _python_type: ClassVar[type] = object

    def __init__(self, value: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if value is None:
            value = self._python_type()
        try:
            self._attributes["value"] = self._python_type(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"{type(self).__name__} needs a {self._python_type.__name__}, not {value!r}"
            ) from None

    @property
    def value(self) -> Any:
        return self._attributes["value"]

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.value!r}{'' if self.is_stored else ' unstored'}>"


class Int(_BaseType):
    node_type = "data.int"
    _python_type = int


class Float(_BaseType):
    node_type = "data.float"
    _python_type = float


class Str(_BaseType):
    node_type = "data.str"
    _python_type = str


class Bool(_BaseType):
    node_type = "data.bool"
    _python_type = bool


class Dict(Data):
    """A JSON-serialisable dictionary."""

    node_type = "data.dict"

    def __init__(self, value: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attributes.update(copy.deepcopy(value or {}))

    def get_dict(self) -> dict[str, Any]:
        return self.attributes

    def __getitem__(self, key: str) -> Any:
        return self.get_attribute(key)


class List(Data):
    node_type = "data.list"

    def __init__(self, value: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attributes["list"] = list(value or [])

    def get_list(self) -> list[Any]:
        return self.get_attribute("list")


class SinglefileData(Data):
    """One file, kept in the repository."""

    node_type = "data.singlefile"

    def __init__(
        self,
        content: bytes | str | None = None,
        filename: str = "file.txt",
        *,
        file: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if file is not None:
            filename = Path(file).name if filename == "file.txt" else filename
            content = Path(file).read_bytes()
        data = content.encode() if isinstance(content, str) else (content or b"")
        filename = checked_relative(filename)
        self._attributes["filename"] = filename
        self._pending_files[filename] = data

    @property
    def filename(self) -> str:
        return self._attributes["filename"]

    def get_content(self) -> bytes:
        return self.get_object_content(self.filename)


class FolderData(Data):
    """A tree of files, kept in the repository."""

    node_type = "data.folder"


class RemoteData(Data):
    """A folder on a computer (a job's work directory)."""

    node_type = "data.remote"

    def __init__(self, remote_path: str = "", computer_label: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attributes.update({"remote_path": remote_path, COMPUTER: computer_label})

    @property
    def remote_path(self) -> str:
        return self._attributes["remote_path"]


# -- processes -------------------------------------------------------------------------------
#: The states a process ends in.
TERMINAL_STATES = ("finished", "killed", "excepted")


def as_utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite gives back naive ones)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


class ProcessNode(Node):
    """The record of a process: its state, exit status, checkpoint, logs and links."""

    node_type = "process"
    _mutable_when_stored = True

    def __init__(self, process_type: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.process_type = process_type
        self.process_state: str | None = None
        self.exit_status: int | None = None
        self.exit_message: str | None = None
        self.computer_pk: int | None = None
        self._mtime: datetime | None = None

    def _row_values(self) -> dict[str, Any]:
        return {
            "process_type": self.process_type,
            "process_state": self.process_state,
            "computer_id": self.computer_pk,
        }

    def _load_row(self, row: models.Node) -> None:
        self.process_type = row.process_type or ""
        self.process_state = row.process_state
        self.exit_status = row.exit_status
        self.exit_message = row.exit_message
        self.computer_pk = row.computer_id
        self._mtime = row.mtime

    def refresh(self) -> ProcessNode:
        """Re-read the state written by the engine (possibly in another process)."""
        with get_storage().session() as session:
            row = session.get(models.Node, self.pk)
            assert row is not None
            self._attributes = dict(row.attributes or {})
            self._extras = dict(row.extras or {})
            self._load_row(row)
        return self

    def set_exit(self, status: int | None, message: str | None) -> None:
        self.exit_status, self.exit_message = status, message
        self._update_row(exit_status=status, exit_message=message)

    def set_checkpoint(self, checkpoint: str | None) -> None:
        self._update_row(checkpoint=checkpoint)

    def set_state_and_checkpoint(self, state: str, checkpoint: str | None) -> None:
        """Both in one write: the engine does this at every state change."""
        self.process_state = state
        self._update_row(process_state=state, checkpoint=checkpoint)

    def get_checkpoint(self) -> str | None:
        with get_storage().session() as session:
            return session.scalar(
                sa.select(models.Node.checkpoint).where(models.Node.id == self.pk)
            )

    @property
    def mtime(self) -> datetime | None:
        """When the record last changed, as of the last load or :meth:`refresh`."""
        return self._mtime

    @property
    def is_terminated(self) -> bool:
        return self.process_state in TERMINAL_STATES

    @property
    def is_finished(self) -> bool:
        return self.process_state == "finished"

    @property
    def is_finished_ok(self) -> bool:
        return self.is_finished and self.exit_status == 0

    @property
    def is_failed(self) -> bool:
        return self.is_finished and self.exit_status not in (0, None)

    @property
    def is_killed(self) -> bool:
        return self.process_state == "killed"

    @property
    def is_excepted(self) -> bool:
        return self.process_state == "excepted"

    @property
    def paused(self) -> bool:
        return bool(self.get_attribute(PAUSED, False))

    @property
    def paused_reason(self) -> str:
        """Why it was paused ("" when it was not, or no reason was given)."""
        return self.get_attribute(PAUSED_REASON) or ""

    @property
    def similarity_key(self) -> str | None:
        """Which finished processes are like this one (history, estimates, right-sizing)."""
        return self.get_attribute(SIMILARITY_KEY)

    @property
    def called(self) -> list[ProcessNode]:
        return [n for _, _, n in self._linked(False, ("call",)) if isinstance(n, ProcessNode)]

    @property
    def caller(self) -> ProcessNode | None:
        found = [n for _, _, n in self._linked(True, ("call",)) if isinstance(n, ProcessNode)]
        return found[0] if found else None

    def add_log(self, level: str, message: str, **details: Any) -> None:
        with get_storage().session() as session:
            session.add(
                models.Log(
                    node_id=self.pk,
                    levelname=level,
                    loggername="veglia",
                    message=message,
                    details=details,
                )
            )

    @property
    def logs(self) -> list[models.Log]:
        with get_storage().session() as session:
            return list(
                session.scalars(
                    sa.select(models.Log)
                    .where(models.Log.node_id == self.pk)
                    .order_by(models.Log.id)
                )
            )


class CalcJobNode(ProcessNode):
    """The record of a calc job; its properties read what the engine wrote as it ran (the
    names are in :mod:`veglia.orm.attributes`)."""

    node_type = "process.calcjob"

    @property
    def options(self) -> dict[str, Any]:
        return self.get_attribute(OPTIONS, {})

    @property
    def computer_label(self) -> str | None:
        return self.get_attribute(COMPUTER)

    @property
    def job_id(self) -> str | None:
        """The scheduler's id of the job, once submitted."""
        return self.get_attribute(JOB_ID)

    @property
    def scheduler_state(self) -> str | None:
        """The job's state as last polled (a ``JobState`` value: queued, running, done...)."""
        return self.get_attribute(SCHEDULER_STATE)

    @property
    def last_job_info(self) -> dict[str, Any] | None:
        """The scheduler's last view of the job (a ``JobInfo`` as a dict)."""
        return self.get_attribute(LAST_JOB_INFO)

    @property
    def submitted_at(self) -> float | None:
        return self.get_attribute(SUBMITTED_AT)

    @property
    def started_at(self) -> float | None:
        """When a poll first saw the job run (None if none did)."""
        return self.get_attribute(STARTED_AT)

    @property
    def remote_workdir(self) -> str | None:
        return self.get_attribute(REMOTE_WORKDIR)

    @property
    def retrieve_list(self) -> list[str]:
        return self.get_attribute(RETRIEVE_LIST, [])

    @property
    def blocked(self) -> dict[str, Any] | None:
        """{"reason", "time", "computer"} while held until ``veglia process unblock``."""
        return self.get_attribute(BLOCKED)

    @property
    def unreachable(self) -> dict[str, Any] | None:
        """{"computer", "since", "next_probe"} while paused for an outage of its computer."""
        return self.get_attribute(UNREACHABLE)

    @property
    def stopped_by_monitor(self) -> dict[str, Any] | None:
        """{"name", "message", "time", ...} of the monitor that stopped the job."""
        return self.get_attribute(STOPPED_BY_MONITOR)

    @property
    def cached_from(self) -> dict[str, Any] | None:
        """{"pk", "uuid"} of the finished job whose outputs this one reused."""
        return self.get_attribute(CACHED_FROM)

    @property
    def job_outcome(self) -> dict[str, Any]:
        """What retrieving found: exit status, failure, usage ({} before retrieval)."""
        return self.get_attribute(JOB_OUTCOME) or {}

    @property
    def usage(self) -> dict[str, Any] | None:
        """What the job used, as measured: {"peak_memory_kb", "runtime_seconds", "source"}."""
        return self.get_attribute(USAGE)

    @property
    def right_sized(self) -> dict[str, Any] | None:
        """{option: {"from", "to"}} of the requests right-sizing changed."""
        return self.get_attribute(RIGHT_SIZED)

    @property
    def gpu_metrics(self) -> dict[str, Any] | None:
        """The GPU block of the trace record, when a plugin put one there."""
        return self.get_attribute(GPU_METRICS)


class WorkflowNode(ProcessNode):
    node_type = "process.workflow"

    @property
    def waiting_for(self) -> list[int]:
        """The pks of the children it waits for, while it waits."""
        return self.get_attribute(WAITING_FOR) or []


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


def to_node(value: Any) -> Node:
    """Wrap a plain Python value in a data node (as the engine does for inputs)."""
    if isinstance(value, Node):
        return value
    for python_type, node_class in ((bool, Bool), (int, Int), (float, Float), (str, Str)):
        if isinstance(value, python_type):
            return node_class(value)
    if isinstance(value, dict):
        return Dict(value)
    if isinstance(value, list | tuple):
        return List(list(value))
    raise TypeError(f"Cannot store {value!r} of type {type(value).__name__} as a node.")
