"""The ORM classes of the provenance graph and of the engine's records.

Each is mapped onto its Core table in :mod:`veglia.storage.tables`, where the schema is
written; code that needs only rows uses the tables and does not import the ORM. The
``Mapped[...]`` annotations only tell type checkers what each column holds (SQLAlchemy's
"declarative with imperative table"): the columns, their types and defaults come from
``__table__``. Keep them in step with the table when a column changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import DeclarativeBase, Mapped

from veglia.storage import tables
from veglia.storage.tables import INDEXED_ATTRIBUTES, LINK_TYPES, JsonType, new_uuid, utcnow

__all__ = [
    "INDEXED_ATTRIBUTES",
    "LINK_TYPES",
    "AuthInfo",
    "Base",
    "Code",
    "Computer",
    "Group",
    "GroupNode",
    "JsonType",
    "Link",
    "Log",
    "Node",
    "PipelineSetup",
    "ProcessLease",
    "RepositoryBlob",
    "RepositoryChunk",
    "RepositoryFile",
    "User",
    "new_uuid",
    "utcnow",
]


class Base(DeclarativeBase):
    metadata = tables.metadata


class User(Base):
    __table__ = tables.users

    id: Mapped[int]
    email: Mapped[str]
    first_name: Mapped[str]
    last_name: Mapped[str]
    institution: Mapped[str]


class Computer(Base):
    __table__ = tables.computers

    id: Mapped[int]
    uuid: Mapped[str]
    label: Mapped[str]
    hostname: Mapped[str]
    description: Mapped[str]
    scheduler_type: Mapped[str]
    transport_type: Mapped[str]
    properties: Mapped[dict[str, Any]]


class AuthInfo(Base):
    """How one user reaches one computer (user name, key file, proxy, ...)."""

    __table__ = tables.authinfos

    id: Mapped[int]
    user_id: Mapped[int]
    computer_id: Mapped[int]
    enabled: Mapped[bool]
    auth_params: Mapped[dict[str, Any]]
    properties: Mapped[dict[str, Any]]


class Code(Base):
    """An executable on a computer that calc jobs run."""

    __table__ = tables.codes

    id: Mapped[int]
    uuid: Mapped[str]
    label: Mapped[str]
    description: Mapped[str]
    computer_id: Mapped[int]
    executable: Mapped[str]
    default_calc_job_plugin: Mapped[str | None]
    prepend_text: Mapped[str]
    append_text: Mapped[str]
    ctime: Mapped[datetime]
    hidden: Mapped[bool]


class Node(Base):
    """A vertex of the provenance graph: a piece of data or a process."""

    __table__ = tables.nodes

    id: Mapped[int]
    uuid: Mapped[str]
    node_type: Mapped[str]
    process_type: Mapped[str | None]
    label: Mapped[str]
    description: Mapped[str]
    ctime: Mapped[datetime]
    mtime: Mapped[datetime]
    user_id: Mapped[int | None]
    computer_id: Mapped[int | None]
    attributes: Mapped[dict[str, Any]]
    extras: Mapped[dict[str, Any]]
    process_state: Mapped[str | None]
    exit_status: Mapped[int | None]
    exit_message: Mapped[str | None]
    checkpoint: Mapped[str | None]


class Link(Base):
    __table__ = tables.links

    id: Mapped[int]
    input_id: Mapped[int]
    output_id: Mapped[int]
    label: Mapped[str]
    link_type: Mapped[str]


class Log(Base):
    __table__ = tables.logs

    id: Mapped[int]
    uuid: Mapped[str]
    node_id: Mapped[int]
    time: Mapped[datetime]
    levelname: Mapped[str]
    loggername: Mapped[str]
    message: Mapped[str]
    details: Mapped[dict[str, Any]]


class RepositoryFile(Base):
    """A file of a node's repository: its path in the node and the hash of its content."""

    __table__ = tables.repository_files

    id: Mapped[int]
    node_id: Mapped[int]
    path: Mapped[str]
    sha256: Mapped[str]
    size: Mapped[int]


class RepositoryBlob(Base):
    """A blob of the repository kept in the database (``storage.repository = database``)."""

    __table__ = tables.repository_blobs

    sha256: Mapped[str]
    size: Mapped[int]
    chunks: Mapped[int]
    written: Mapped[float]


class RepositoryChunk(Base):
    """A piece of the content of a :class:`RepositoryBlob`."""

    __table__ = tables.repository_chunks

    sha256: Mapped[str]
    seq: Mapped[int]
    written: Mapped[float]
    content: Mapped[bytes]


class ProcessLease(Base):
    """Which daemon worker runs an active process, and since when it last said so."""

    __table__ = tables.process_leases

    process_id: Mapped[int]
    worker: Mapped[str]
    host: Mapped[str]
    pid: Mapped[int]
    heartbeat: Mapped[float]
    acquired: Mapped[float]


class Group(Base):
    """A named set of nodes, as AiiDA's groups: labels are unique, nodes may be in many."""

    __table__ = tables.groups

    id: Mapped[int]
    uuid: Mapped[str]
    label: Mapped[str]
    type_string: Mapped[str]
    description: Mapped[str]
    time: Mapped[datetime]
    user_id: Mapped[int | None]


class GroupNode(Base):
    """A node in a group: deleting either deletes the membership, never the other."""

    __table__ = tables.group_nodes

    group_id: Mapped[int]
    node_id: Mapped[int]


class PipelineSetup(Base):
    """One version of a named pipeline setup."""

    __table__ = tables.pipeline_setups

    id: Mapped[int]
    name: Mapped[str]
    version: Mapped[int]
    enabled: Mapped[bool]
    process: Mapped[str]
    inputs: Mapped[dict[str, Any]]
    options: Mapped[dict[str, Any]]
    input_port: Mapped[str]
    source: Mapped[str]
    source_settings: Mapped[dict[str, Any]]
    source_computer: Mapped[str | None]
    max_active: Mapped[int | None]
    description: Mapped[str]
    created: Mapped[datetime]
    user_id: Mapped[int | None]


class PipelineElement(Base):
    """An element a setup's source listed, and the run started for it."""

    __table__ = tables.pipeline_elements

    id: Mapped[int]
    setup_name: Mapped[str]
    setup_id: Mapped[int]
    identity: Mapped[str]
    checksum: Mapped[str]
    key: Mapped[str]
    files: Mapped[dict[str, Any]]
    element_metadata: Mapped[dict[str, Any]]
    state: Mapped[str]
    problem: Mapped[str | None]
    claimed_by: Mapped[str | None]
    claimed_at: Mapped[float | None]
    process_id: Mapped[int | None]
    seen: Mapped[datetime]


class PipelineSource(Base):
    """What the last look at a setup's source found."""

    __table__ = tables.pipeline_sources

    setup_name: Mapped[str]
    polled: Mapped[datetime | None]
    error: Mapped[str | None]
    problems: Mapped[list[str]]
    waiting: Mapped[list[str]]
    listed: Mapped[int]
    notified_done: Mapped[str | None]
