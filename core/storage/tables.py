"""The database schema as SQLAlchemy Core tables: what every migration must arrive at.

The ORM classes of :mod:`veglia.storage.models` are mapped onto these tables. Code that
only reads or writes rows (the CLI's listings, the engine's hot statements) uses the tables
directly, and so never imports SQLAlchemy's ORM, which costs a command about a quarter of
its start-up. Schema changes go through an Alembic migration in ``migrations/versions``; a
test compares this metadata against the migrated database so the two never drift apart.
Plugins keep tables of their own out of it (:mod:`veglia.storage.plugin_schema`).
"""

from __future__ import annotations

import uuid as uuid_module
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)

from veglia.storage.attribute_text import attribute_text
from veglia.storage.times import utcnow

__all__ = [
    "INDEXED_ATTRIBUTES",
    "LINK_TYPES",
    "NAMING_CONVENTION",
    "JsonType",
    "authinfos",
    "codes",
    "computers",
    "group_nodes",
    "groups",
    "links",
    "logs",
    "metadata",
    "new_uuid",
    "nodes",
    "pipeline_elements",
    "pipeline_setups",
    "pipeline_sources",
    "process_leases",
    "repository_blobs",
    "repository_chunks",
    "repository_files",
    "users",
    "utcnow",
]

#: input: data -> process; create: calc job -> data it produced; output: workflow -> data it
#: returned; call: process -> process it launched.
LINK_TYPES = ("input", "create", "output", "call")

# Named constraints so Alembic migrations can refer to them on every backend. A plugin's
# own tables (``storage_migrations``) take the same convention.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def new_uuid() -> str:
    return str(uuid_module.uuid4())


class JsonType(TypeDecorator[Any]):
    """JSON, stored as JSONB on PostgreSQL.

    Not ``JSON().with_variant(JSONB(), "postgresql")``: that imports SQLAlchemy's PostgreSQL
    dialect (and its asyncpg driver module) into every process, the CLI on SQLite included,
    for about 30 ms of each command's start-up.
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


def _json(name: str) -> Column[Any]:
    return Column(name, JsonType(), nullable=False, default=dict)


def _uuid() -> Column[Any]:
    return Column("uuid", String(36), nullable=False, unique=True, default=new_uuid)


def _id() -> Column[Any]:
    return Column("id", Integer, primary_key=True)


def _text(name: str, length: int | None = None, **kwargs: Any) -> Column[Any]:
    return Column(name, String(length) if length else Text, nullable=False, **kwargs)


def _time(name: str, **kwargs: Any) -> Column[Any]:
    return Column(name, DateTime(timezone=True), nullable=False, default=utcnow, **kwargs)


def _foreign(name: str, target: str, ondelete: str, **kwargs: Any) -> Column[Any]:
    kwargs.setdefault("nullable", False)
    return Column(name, ForeignKey(target, ondelete=ondelete), **kwargs)


users = Table(
    "users",
    metadata,
    _id(),
    _text("email", 254, unique=True),
    _text("first_name", 254, default=""),
    _text("last_name", 254, default=""),
    _text("institution", 254, default=""),
)

computers = Table(
    "computers",
    metadata,
    _id(),
    _uuid(),
    _text("label", 255, unique=True),
    _text("hostname", 255),
    _text("description", default=""),
    _text("scheduler_type", 255),
    _text("transport_type", 255),
    # work dir, mpirun command, safe_interval, minimum_poll_interval, plugins' own, ...
    _json("properties"),
)

#: How one user reaches one computer (user name, key file, proxy, ...).
authinfos = Table(
    "authinfos",
    metadata,
    _id(),
    _foreign("user_id", "users.id", "CASCADE"),
    _foreign("computer_id", "computers.id", "CASCADE"),
    Column("enabled", Boolean, nullable=False, default=True),
    _json("auth_params"),
    _json("properties"),
    UniqueConstraint("user_id", "computer_id"),
)

#: An executable on a computer that calc jobs run.
codes = Table(
    "codes",
    metadata,
    _id(),
    _uuid(),
    _text("label", 255),
    _text("description", default=""),
    _foreign("computer_id", "computers.id", "RESTRICT"),
    _text("executable"),
    Column("default_calc_job_plugin", String(255), nullable=True),
    _text("prepend_text", default=""),
    _text("append_text", default=""),
    _time("ctime"),
    # `veglia code hide`: left out of `veglia code list` (unless -a), as AiiDA's hidden codes.
    Column("hidden", Boolean, nullable=False, default=False, server_default=false()),
    UniqueConstraint("label", "computer_id"),
)

#: A vertex of the provenance graph: a piece of data or a process.
nodes = Table(
    "nodes",
    metadata,
    _id(),
    _uuid(),
    _text("node_type", 255, index=True),
    Column("process_type", String(255), nullable=True, index=True),
    _text("label", 255, default="", index=True),
    _text("description", default=""),
    _time("ctime", index=True),
    _time("mtime", onupdate=utcnow),
    _foreign("user_id", "users.id", "RESTRICT", nullable=True),
    _foreign("computer_id", "computers.id", "RESTRICT", nullable=True),
    _json("attributes"),
    _json("extras"),
    Column("process_state", String(32), nullable=True),
    Column("exit_status", Integer, nullable=True),
    Column("exit_message", Text, nullable=True),
    # Versioned plain-data checkpoint of a running process (JSON text).
    Column("checkpoint", Text, nullable=True),
    Index("ix_nodes_process_state_node_type", "process_state", "node_type"),
    # The web view's change probe reads the newest mtime; the overview lists recent ends.
    Index("ix_nodes_mtime", "mtime"),
)

#: Attributes looked up by value among many finished jobs (caching, right-sizing), by
#: index name: ``veglia.orm.attributes.CACHE_HASH`` and ``SIMILARITY_KEY`` (storage does not
#: import the ORM; a test checks that the names agree). Query them with ``attribute_text``.
INDEXED_ATTRIBUTES = {
    "ix_nodes_cache_hash": "cache_hash",
    "ix_nodes_similarity_key": "similarity_key",
}
for _name, _key in INDEXED_ATTRIBUTES.items():
    Index(_name, attribute_text(nodes.c.attributes, _key))

#: The processes that finished successfully, by type (and similarity key), newest first:
#: a workflow's estimate of the time left reads the latest runs of its type and of each
#: kind of step it runs (``veglia.engine.calcjob.history``). PostgreSQL keeps the equal keys
#: of an index in the order of their rows on disk, not of their ids, and read every run of
#: the type to sort them. In the database (migration 0014) they are partial, on the
#: processes that finished with exit status 0 (the look-ups write that condition in their
#: SQL, ``history.FINISHED_OK``); not given here, as for ``ix_nodes_cancel_pending``.
Index("ix_nodes_finished_ok_type", nodes.c.process_type, nodes.c.id)
Index(
    "ix_nodes_finished_ok_key",
    attribute_text(nodes.c.attributes, INDEXED_ATTRIBUTES["ix_nodes_similarity_key"]),
    nodes.c.process_type,
    nodes.c.id,
)

#: The ended processes whose scheduler job is still to be cancelled, asked for by every
#: ``process list`` and by the daemon (``veglia.orm.attributes.CANCEL_PENDING``). In the
#: database (migration 0013) it is partial, on the nodes that carry the attribute only:
#: nearly always empty, instead of a read of every killed process's attributes. Its
#: condition is not given here: ``postgresql_where`` would import SQLAlchemy's PostgreSQL
#: dialect into every command on SQLite (about 30 ms), and the migrations, not this
#: metadata, make the databases.
Index("ix_nodes_cancel_pending", nodes.c.process_state)

links = Table(
    "links",
    metadata,
    _id(),
    _foreign("input_id", "nodes.id", "CASCADE"),
    _foreign("output_id", "nodes.id", "CASCADE"),
    _text("label", 255),
    _text("link_type", 16),
    CheckConstraint("link_type IN ('input', 'create', 'output', 'call')", name="link_type"),
    Index("ix_links_input_id_link_type", "input_id", "link_type"),
    Index("ix_links_output_id_link_type", "output_id", "link_type"),
)

logs = Table(
    "logs",
    metadata,
    _id(),
    _uuid(),
    _foreign("node_id", "nodes.id", "CASCADE", index=True),
    _time("time"),
    _text("levelname", 16, index=True),
    _text("loggername", 255, default=""),
    _text("message"),
    _json("details"),
)

#: A file of a node's repository: its path in the node and the hash of its content.
repository_files = Table(
    "repository_files",
    metadata,
    _id(),
    _foreign("node_id", "nodes.id", "CASCADE", index=True),
    _text("path"),
    _text("sha256", 64, index=True),
    Column("size", BigInteger, nullable=False),
    UniqueConstraint("node_id", "path"),
)

#: A blob of the repository kept in the database (``storage.repository = database``), so
#: hosts that share the database need no shared folder. Its content is in
#: :data:`repository_chunks`; this row is written once all of them are in, so a reader never
#: sees part of a blob. ``written`` (seconds since the epoch, on the database's clock) is
#: when it was last stored: ``veglia storage maintain`` leaves younger blobs alone.
repository_blobs = Table(
    "repository_blobs",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("chunks", Integer, nullable=False),
    Column("written", Float, nullable=False),
)

#: The content of a database blob in pieces of at most 4 MiB (PostgreSQL's ``bytea`` holds
#: 1 GB at most, and a blob is never held whole in memory), numbered from 0.
repository_chunks = Table(
    "repository_chunks",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    # Before the content: SQLite reads a row's columns in order, and `maintain` reads this
    # one without the content that follows it in overflow pages.
    Column("written", Float, nullable=False),
    Column("content", LargeBinary, nullable=False),
)

#: Which daemon worker runs an active process, and since when it last said so.
#: ``heartbeat`` is seconds since the epoch on the database's clock, so workers on hosts
#: whose clocks differ still agree on which leases have expired.
process_leases = Table(
    "process_leases",
    metadata,
    _foreign("process_id", "nodes.id", "CASCADE", primary_key=True),
    # "host/pid/token": the token tells a restarted worker from one that reused its pid.
    _text("worker", 255, index=True),
    _text("host", 255),
    Column("pid", Integer, nullable=False),
    Column("heartbeat", Float, nullable=False),
    Column("acquired", Float, nullable=False),
)

#: A named set of nodes, as AiiDA's groups: labels are unique, nodes may be in many.
groups = Table(
    "groups",
    metadata,
    _id(),
    _uuid(),
    _text("label", 255, unique=True),
    _text("type_string", 255, default="core"),
    _text("description", default=""),
    _time("time"),
    _foreign("user_id", "users.id", "SET NULL", nullable=True),
)

#: A node in a group: deleting either deletes the membership, never the other.
group_nodes = Table(
    "group_nodes",
    metadata,
    _foreign("group_id", "groups.id", "CASCADE", primary_key=True),
    _foreign("node_id", "nodes.id", "CASCADE", primary_key=True, index=True),
)

#: A pipeline setup: a process run once per element of a data source, with fixed inputs and
#: options. Never changed but for ``enabled``: an edit adds the next version, so work
#: started from a version keeps reading what it started with.
pipeline_setups = Table(
    "pipeline_setups",
    metadata,
    _id(),
    _text("name", 255),
    Column("version", Integer, nullable=False),
    Column("enabled", Boolean, nullable=False, default=False),
    # a veglia.calculations or veglia.workflows entry point
    _text("process", 255),
    _json("inputs"),
    # computer, monitors and the calc job's metadata.options (queue_name, resources, ...)
    _json("options"),
    # the input (dotted for a namespace's, "job.files") that receives each element
    _text("input_port", 255),
    # a veglia.datasources entry point, its settings, and the computer it is read on
    _text("source", 255),
    _json("source_settings"),
    Column("source_computer", String(255), nullable=True),
    Column("max_active", Integer, nullable=True),
    _text("description", default=""),
    _time("created"),
    _foreign("user_id", "users.id", "SET NULL", nullable=True),
    UniqueConstraint("name", "version"),
)

#: Each element a setup's source listed, once per content: the unique (setup name, key) is
#: what keeps two workers, or two hosts, from starting a run for the same element twice.
pipeline_elements = Table(
    "pipeline_elements",
    metadata,
    _id(),
    _text("setup_name", 255),
    # the version that saw it first (and, once started, the one its run reads)
    _foreign("setup_id", "pipeline_setups.id", "CASCADE", index=True),
    _text("identity"),
    _text("checksum", 64),
    # sha256 of identity and checksum: the unique key fits any index, whatever the identity
    _text("key", 64),
    _json("files"),
    _json("element_metadata"),
    # new: waiting to start; starting: claimed by a worker; started: its run exists;
    # refused: its run could not be made (``problem`` says why); superseded: its content
    # changed before it started
    _text("state", 16, default="new"),
    Column("problem", Text, nullable=True),
    Column("claimed_by", String(255), nullable=True),
    # when it was claimed, on the database's clock (epoch seconds)
    Column("claimed_at", Float, nullable=True),
    _foreign("process_id", "nodes.id", "SET NULL", nullable=True, index=True),
    _time("seen"),
    UniqueConstraint("setup_name", "key"),
    Index("ix_pipeline_elements_setup_name_state", "setup_name", "state"),
)

#: What the last look at each setup's source found (``pipeline show`` says it).
pipeline_sources = Table(
    "pipeline_sources",
    metadata,
    Column("setup_name", String(255), primary_key=True),
    Column("polled", DateTime(timezone=True), nullable=True),
    # why the source could not be listed (the folder is missing, the host does not answer)
    Column("error", Text, nullable=True),
    # what the listing left out, one line each, and the identities still being written
    _json("problems"),
    _json("waiting"),
    Column("listed", Integer, nullable=False, default=0),
    # the listing whose elements had all ended when the one notification said so
    Column("notified_done", String(64), nullable=True),
)
