"""SQLAlchemy models of the provenance graph and of the engine's records.

Schema changes go through an Alembic migration in ``migrations/versions``; a test compares
these models against the migrated database so the two never drift apart.
"""

from __future__ import annotations

import uuid as uuid_module
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from veglia.storage.attribute_text import attribute_text

__all__ = [
    "INDEXED_ATTRIBUTES",
    "LINK_TYPES",
    "AuthInfo",
    "Base",
    "Code",
    "Computer",
    "Group",
    "GroupNode",
    "Link",
    "Log",
    "Node",
    "ReportOutbox",
    "ReportRun",
    "RepositoryFile",
    "User",
]

#: input: data -> process; create: calc job -> data it produced; output: workflow -> data it
#: returned; call: process -> process it launched.
LINK_TYPES = ("input", "create", "output", "call")

JsonType = JSON().with_variant(JSONB(), "postgresql")

# Named constraints so Alembic migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_uuid() -> str:
    return str(uuid_module.uuid4())


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)
    first_name: Mapped[str] = mapped_column(String(254), default="")
    last_name: Mapped[str] = mapped_column(String(254), default="")
    institution: Mapped[str] = mapped_column(String(254), default="")


class Computer(Base):
    __tablename__ = "computers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True, default=new_uuid)
    label: Mapped[str] = mapped_column(String(255), unique=True)
    hostname: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    scheduler_type: Mapped[str] = mapped_column(String(255))
    transport_type: Mapped[str] = mapped_column(String(255))
    #: work dir, mpirun command, safe_interval, minimum_poll_interval, plugins' own, ...
    properties: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)


class AuthInfo(Base):
    """How one user reaches one computer (user name, key file, proxy, ...)."""

    __tablename__ = "authinfos"
    __table_args__ = (UniqueConstraint("user_id", "computer_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    computer_id: Mapped[int] = mapped_column(ForeignKey("computers.id", ondelete="CASCADE"))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    auth_params: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    properties: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)


class Code(Base):
    """An executable on a computer that calc jobs run."""

    __tablename__ = "codes"
    __table_args__ = (UniqueConstraint("label", "computer_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True, default=new_uuid)
    label: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    computer_id: Mapped[int] = mapped_column(ForeignKey("computers.id", ondelete="RESTRICT"))
    executable: Mapped[str] = mapped_column(Text)
    default_calc_job_plugin: Mapped[str | None] = mapped_column(String(255), nullable=True)
    prepend_text: Mapped[str] = mapped_column(Text, default="")
    append_text: Mapped[str] = mapped_column(Text, default="")
    ctime: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Node(Base):
    """A vertex of the provenance graph: a piece of data or a process."""

    __tablename__ = "nodes"
    __table_args__ = (Index("ix_nodes_process_state_node_type", "process_state", "node_type"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True, default=new_uuid)
    node_type: Mapped[str] = mapped_column(String(255), index=True)
    process_type: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    label: Mapped[str] = mapped_column(String(255), default="", index=True)
    description: Mapped[str] = mapped_column(Text, default="")
    ctime: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    mtime: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="RESTRICT"), nullable=True
    )
    computer_id: Mapped[int | None] = mapped_column(
        ForeignKey("computers.id", ondelete="RESTRICT"), nullable=True
    )
    attributes: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    extras: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    process_state: Mapped[str | None] = mapped_column(String(32), nullable=True)
    exit_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    exit_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: Versioned plain-data checkpoint of a running process (JSON text).
    checkpoint: Mapped[str | None] = mapped_column(Text, nullable=True)


#: Attributes looked up by value among many finished jobs (caching, right-sizing), by
#: index name: ``veglia.orm.attributes.CACHE_HASH`` and ``SIMILARITY_KEY`` (storage does not
#: import the ORM; a test checks that the names agree). Query them with ``attribute_text``.
INDEXED_ATTRIBUTES = {
    "ix_nodes_cache_hash": "cache_hash",
    "ix_nodes_similarity_key": "similarity_key",
}
for _name, _key in INDEXED_ATTRIBUTES.items():
    Index(_name, attribute_text(Node.attributes, _key))


class Link(Base):
    __tablename__ = "links"
    __table_args__ = (
        CheckConstraint("link_type IN ('input', 'create', 'output', 'call')", name="link_type"),
        Index("ix_links_input_id_link_type", "input_id", "link_type"),
        Index("ix_links_output_id_link_type", "output_id", "link_type"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    input_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    output_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(255))
    link_type: Mapped[str] = mapped_column(String(16))


class Log(Base):
    __tablename__ = "logs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True, default=new_uuid)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    time: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    levelname: Mapped[str] = mapped_column(String(16), index=True)
    loggername: Mapped[str] = mapped_column(String(255), default="")
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)


class RepositoryFile(Base):
    """A file of a node's repository: its path in the node and the hash of its content."""

    __tablename__ = "repository_files"
    __table_args__ = (UniqueConstraint("node_id", "path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(BigInteger)


class RepositoryBlob(Base):
    """A blob of the repository kept in the database (``storage.repository = database``),
    so hosts that share the database need no shared folder."""

    __tablename__ = "repository_blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    content: Mapped[bytes] = mapped_column(LargeBinary)


class ReportOutbox(Base):
    """Records a reporter plugin must deliver: kept until they are sent.

    The unique key makes queueing idempotent: a record queued twice is stored once.
    """

    __tablename__ = "report_outbox"
    __table_args__ = (UniqueConstraint("reporter", "run_key", "kind", "task_id", "attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reporter: Mapped[str] = mapped_column(String(64), index=True)
    run_key: Mapped[str] = mapped_column(String(255), index=True)
    #: a task event ("submitted", "running", "task" for its end) or "complete" (the run ended)
    kind: Mapped[str] = mapped_column(String(16))
    task_id: Mapped[int] = mapped_column(Integer, default=0)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    #: pending, sent ("failed" in rows of 0.x, sent again by the reporter's retry command)
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    tries: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ReportRun(Base):
    """A run as a reporter knows it remotely (a Seqera Platform workflow id, say)."""

    __tablename__ = "report_runs"
    __table_args__ = (UniqueConstraint("reporter", "run_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    reporter: Mapped[str] = mapped_column(String(64))
    run_key: Mapped[str] = mapped_column(String(255))
    remote_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: new, begun, completed, or refused (``data["refused"]`` says which request and why)
    state: Mapped[str] = mapped_column(String(16), default="new")
    data: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    last_sent: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ProcessLease(Base):
    """Which daemon worker runs an active process, and since when it last said so.

    ``heartbeat`` is seconds since the epoch on the database's clock, so workers on hosts
    whose clocks differ still agree on which leases have expired.
    """

    __tablename__ = "process_leases"

    process_id: Mapped[int] = mapped_column(
        ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True
    )
    #: "host/pid/token": the token tells a restarted worker from one that reused its pid.
    worker: Mapped[str] = mapped_column(String(255), index=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    heartbeat: Mapped[float] = mapped_column(Float)
    acquired: Mapped[float] = mapped_column(Float)


class Group(Base):
    """A named set of nodes, as AiiDA's groups: labels are unique, nodes may be in many."""

    __tablename__ = "groups"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True, default=new_uuid)
    label: Mapped[str] = mapped_column(String(255), unique=True)
    type_string: Mapped[str] = mapped_column(String(255), default="core")
    description: Mapped[str] = mapped_column(Text, default="")
    time: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )


class GroupNode(Base):
    """A node in a group: deleting either deletes the membership, never the other."""

    __tablename__ = "group_nodes"

    group_id: Mapped[int] = mapped_column(
        ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True
    )
    node_id: Mapped[int] = mapped_column(
        ForeignKey("nodes.id", ondelete="CASCADE"), primary_key=True, index=True
    )
