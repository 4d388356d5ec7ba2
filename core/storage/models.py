"""The ORM classes of the provenance graph and of the engine's records.

Each is mapped onto its Core table in :mod:`veglia.storage.tables`, where the schema is
written; code that needs only rows uses the tables and does not import the ORM.
"""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

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


class Computer(Base):
    __table__ = tables.computers


class AuthInfo(Base):
    """How one user reaches one computer (user name, key file, proxy, ...)."""

    __table__ = tables.authinfos


class Code(Base):
    """An executable on a computer that calc jobs run."""

    __table__ = tables.codes


class Node(Base):
    """A vertex of the provenance graph: a piece of data or a process."""

    __table__ = tables.nodes


class Link(Base):
    __table__ = tables.links


class Log(Base):
    __table__ = tables.logs


class RepositoryFile(Base):
    """A file of a node's repository: its path in the node and the hash of its content."""

    __table__ = tables.repository_files


class RepositoryBlob(Base):
    """A blob of the repository kept in the database (``storage.repository = database``)."""

    __table__ = tables.repository_blobs


class RepositoryChunk(Base):
    """A piece of the content of a :class:`RepositoryBlob`."""

    __table__ = tables.repository_chunks


class ProcessLease(Base):
    """Which daemon worker runs an active process, and since when it last said so."""

    __table__ = tables.process_leases


class Group(Base):
    """A named set of nodes, as AiiDA's groups: labels are unique, nodes may be in many."""

    __table__ = tables.groups


class GroupNode(Base):
    """A node in a group: deleting either deletes the membership, never the other."""

    __table__ = tables.group_nodes


class PipelineSetup(Base):
    """One version of a named pipeline setup."""

    __table__ = tables.pipeline_setups


class PipelineElement(Base):
    """An element a setup's source listed, and the run started for it."""

    __table__ = tables.pipeline_elements


class PipelineSource(Base):
    """What the last look at a setup's source found."""

    __table__ = tables.pipeline_sources
