"""Blobs kept in the database: the repository of hosts that share a database, not a folder.

Chosen with ``storage.repository = database``. Reads fall back to the profile's folder
repository, so a profile switched to the database still finds the blobs it wrote before.

A blob's content lies in ``repository_chunks``, :data:`CHUNK_SIZE` bytes a row, and its row
in ``repository_blobs`` is written once all its chunks are in: a reader never sees part of a
blob. Storing copies the stream through a temporary file while hashing it (the key is the
digest, known only at the end), then into the table one chunk at a time; reading fetches one
chunk at a time. Neither holds more than a chunk in memory, whatever the blob's size. Rows
are written with ``ON CONFLICT``: the same content stored twice, or by two writers at once,
is kept once.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Set
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import sqlalchemy as sa

from veglia.exceptions import NotExistent, RepositoryIntegrityError
from veglia.progress_report import ProgressReport, no_progress
from veglia.storage.repository import ByteSource, FileRepository
from veglia.storage.tables import repository_blobs, repository_chunks, repository_files

__all__ = ["CHUNK_SIZE", "DatabaseRepository"]


class StorageBackend(Protocol):
    """What this repository uses of :class:`veglia.storage.backend.StorageBackend`, which
    makes it: described here, as the backend imports this module."""

    engine: sa.Engine

    def connection(self) -> AbstractContextManager[sa.Connection]: ...

    def insert(self, table: Any) -> Any: ...


#: The most content one row of ``repository_chunks`` holds.
CHUNK_SIZE = 4 * 1024 * 1024

_BLOBS = repository_blobs
_CHUNKS = repository_chunks


class _ChunkReader(io.RawIOBase):
    """A blob's content, read from its chunks one at a time."""

    def __init__(self, repository: DatabaseRepository, sha256: str, chunks: int) -> None:
        self._repository = repository
        self._sha256 = sha256
        self._chunks = chunks
        self._next = 0
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._pending:
            if self._next >= self._chunks:
                return 0
            self._pending = memoryview(self._repository._chunk(self._sha256, self._next))
            self._next += 1
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count


class DatabaseRepository:
    """Blobs addressed by their SHA-256 hex digest, in the ``repository_blobs`` and
    ``repository_chunks`` tables."""

    def __init__(self, storage: StorageBackend, fallback: FileRepository) -> None:
        self._storage = storage
        self.fallback = fallback
        self.root = fallback.root  # quarantined blobs go to the profile folder

    def __repr__(self) -> str:
        return "DatabaseRepository()"

    def _now(self) -> sa.ColumnElement[Any]:
        """The database's clock in epoch seconds: hosts that share the database need not
        agree on the time for ``maintain``'s grace period."""
        if self._storage.engine.dialect.name == "postgresql":
            return sa.func.extract("epoch", sa.func.clock_timestamp())
        return (sa.func.julianday("now") - 2440587.5) * 86400.0

    def put_stream(self, stream: ByteSource) -> tuple[str, int]:
        """Store the stream's bytes; return ``(sha256, size)``. Memory holds one chunk."""
        digest = hashlib.sha256()
        size = 0
        with tempfile.TemporaryFile(dir=self.fallback.temporary_folder()) as spool:
            while piece := stream.read(CHUNK_SIZE):
                digest.update(piece)
                spool.write(piece)
                size += len(piece)
            sha256 = digest.hexdigest()
            if self.keep(sha256, in_database_only=True):
                return sha256, size
            spool.seek(0)
            seq = 0
            # A connection block each: outside a storage transaction, each chunk commits on
            # its own (SQLite's write lock is let go between chunks); inside one, they commit
            # with it. The blob's row comes last either way.
            while piece := spool.read(CHUNK_SIZE):
                with self._storage.connection() as connection:
                    connection.execute(self._chunk_insert(sha256, seq, piece))
                seq += 1
        with self._storage.connection() as connection:
            connection.execute(
                self._storage.insert(_BLOBS)
                .values(sha256=sha256, size=size, chunks=seq, written=self._now())
                .on_conflict_do_update(
                    index_elements=[_BLOBS.c.sha256], set_={"written": self._now()}
                )
            )
        return sha256, size

    def _chunk_insert(self, sha256: str, seq: int, content: bytes) -> Any:
        # A chunk already there (left by a writer that died before its blob's row) is
        # refreshed, not skipped: `maintain` must not take it as an old leftover now.
        return (
            self._storage.insert(_CHUNKS)
            .values(sha256=sha256, seq=seq, content=content, written=self._now())
            .on_conflict_do_update(
                index_elements=[_CHUNKS.c.sha256, _CHUNKS.c.seq], set_={"written": self._now()}
            )
        )

    def put_bytes(self, data: bytes) -> tuple[str, int]:
        return self.put_stream(io.BytesIO(data))

    def put_file(self, path: Path | str) -> tuple[str, int]:
        with open(path, "rb") as handle:
            return self.put_stream(handle)

    def adopt(self, path: Path | str) -> tuple[str, int]:
        """As :meth:`FileRepository.adopt`: here the content goes into the database."""
        return self.put_file(path)

    def temporary_folder(self) -> Path:
        """Where files on their way into the repository are written (the folder's)."""
        return self.fallback.temporary_folder()

    def keep(self, sha256: str, *, in_database_only: bool = False) -> bool:
        """Whether the blob is stored; if so it counts as just written, so ``maintain``
        leaves it for its grace period (call this before referencing a blob stored before).
        """
        with self._storage.connection() as connection:
            touched = connection.execute(
                sa.update(_BLOBS).where(_BLOBS.c.sha256 == sha256).values(written=self._now())
            ).rowcount
        if touched:
            return True
        return False if in_database_only else self.fallback.keep(sha256)

    def _blob_chunks(self, sha256: str) -> int | None:
        with self._storage.connection() as connection:
            return connection.scalar(sa.select(_BLOBS.c.chunks).where(_BLOBS.c.sha256 == sha256))

    def _chunk(self, sha256: str, seq: int) -> bytes:
        with self._storage.connection() as connection:
            content = connection.scalar(
                sa.select(_CHUNKS.c.content).where(_CHUNKS.c.sha256 == sha256, _CHUNKS.c.seq == seq)
            )
        if content is None:
            raise NotExistent(
                f"Chunk {seq} of blob {sha256} is missing from the database; it was deleted "
                "outside veglia. Run `veglia verify` to find the nodes it belongs to."
            )
        return bytes(content)

    def has(self, sha256: str) -> bool:
        return self._blob_chunks(sha256) is not None or self.fallback.has(sha256)

    def open(self, sha256: str) -> BinaryIO:
        """The blob's content as a stream that reads one chunk at a time."""
        chunks = self._blob_chunks(sha256)
        if chunks is not None:
            return io.BufferedReader(_ChunkReader(self, sha256, chunks), CHUNK_SIZE)
        try:
            return self.fallback.open(sha256)
        except NotExistent:
            raise NotExistent(
                f"Blob {sha256} is in neither the database nor the folder {self.root}; it was "
                "deleted outside veglia, or written by a host whose repository is its own "
                "folder (set storage.repository to 'database' on every host)."
            ) from None

    def get_bytes(self, sha256: str) -> bytes:
        with self.open(sha256) as handle:
            return handle.read()

    def copy_to(self, sha256: str, target: Path | str) -> None:
        with self.open(sha256) as source, open(target, "wb") as handle:
            shutil.copyfileobj(source, handle, CHUNK_SIZE)

    def hash_of_stored(self, sha256: str) -> str:
        digest = hashlib.sha256()
        with self.open(sha256) as handle:
            while piece := handle.read(CHUNK_SIZE):
                digest.update(piece)
        return digest.hexdigest()

    def verify(self, sha256: str) -> None:
        actual = self.hash_of_stored(sha256)
        if actual != sha256:
            raise RepositoryIntegrityError(
                f"Blob {sha256} now hashes to {actual}: its rows in the database were modified."
            )

    def quarantine(self, sha256: str) -> Path | None:
        """Move a damaged blob out of the tables (into the profile's ``quarantine/`` folder),
        so that storing its true content again restores it."""
        if self._blob_chunks(sha256) is None:
            return self.fallback.quarantine(sha256)
        target = self.root / "quarantine" / f"{sha256}.{int(time.time())}"
        target.parent.mkdir(parents=True, exist_ok=True)
        self.copy_to(sha256, target)
        with self._storage.connection() as connection:
            connection.execute(sa.delete(_BLOBS).where(_BLOBS.c.sha256 == sha256))
            connection.execute(sa.delete(_CHUNKS).where(_CHUNKS.c.sha256 == sha256))
        return target

    def maintain(
        self,
        grace: float,
        referenced: Callable[[], Set[str]],
        dry_run: bool = False,
        progress: ProgressReport = no_progress,
    ) -> list[tuple[str, int]]:
        """Delete the blobs no node's file refers to and that were not stored (or kept) in
        the last ``grace`` seconds, then the folder's (:meth:`FileRepository.maintain`);
        return the blobs freed (or, with ``dry_run``, that would be) with their sizes.

        Each blob goes in a statement of its own that checks again, in the database, that it
        is still old and unreferenced: a writer that stores or keeps it meanwhile refreshes
        its time first (on PostgreSQL the row's lock orders the two), so it stays. Chunks
        whose blob has no row (their writer died before it) go after the same period.
        """
        freed: list[tuple[str, int]] = []
        cutoff = sa.select(self._now() - grace).scalar_subquery()
        with self._storage.connection() as connection:
            stale = list(
                connection.execute(
                    sa.select(_BLOBS.c.sha256, _BLOBS.c.size)
                    .where(_BLOBS.c.written < cutoff)
                    .order_by(_BLOBS.c.sha256)
                )
            )
        # Read after the stale blobs: a file row committed before them is seen here, and a
        # later one's writer refreshed the blob, which the delete below checks again.
        kept = referenced()
        references = sa.select(repository_files.c.id).where(
            repository_files.c.sha256 == _BLOBS.c.sha256
        )
        for done, (sha256, size) in enumerate(stale):
            progress("checking old blobs", done, len(stale))
            if sha256 in kept:
                continue
            if dry_run:
                freed.append((sha256, size))
                continue
            with self._storage.connection() as connection:
                deleted = connection.execute(
                    sa.delete(_BLOBS).where(
                        _BLOBS.c.sha256 == sha256,
                        _BLOBS.c.written < cutoff,
                        ~sa.exists(references),
                    )
                ).rowcount
                if deleted:
                    connection.execute(sa.delete(_CHUNKS).where(_CHUNKS.c.sha256 == sha256))
            if deleted:
                freed.append((sha256, size))
        freed.extend(self._orphan_chunks(cutoff, dry_run))
        progress("checking old blobs", len(stale), len(stale))
        freed.extend(self.fallback.maintain(grace, referenced, dry_run, progress))
        return freed

    def _orphan_chunks(self, cutoff: Any, dry_run: bool) -> list[tuple[str, int]]:
        """Chunks of blobs whose row was never written, older than the cutoff."""
        orphan = (
            _CHUNKS.c.written < cutoff,
            ~sa.exists(sa.select(_BLOBS.c.sha256).where(_BLOBS.c.sha256 == _CHUNKS.c.sha256)),
        )
        with self._storage.connection() as connection:
            found = list(
                connection.execute(
                    sa.select(_CHUNKS.c.sha256, sa.func.sum(sa.func.length(_CHUNKS.c.content)))
                    .where(*orphan)
                    .group_by(_CHUNKS.c.sha256)
                )
            )
            if found and not dry_run:
                connection.execute(sa.delete(_CHUNKS).where(*orphan))
        return [(sha256, int(size)) for sha256, size in found]

    def __iter__(self) -> Iterator[str]:
        with self._storage.connection() as connection:
            stored = list(connection.scalars(sa.select(_BLOBS.c.sha256)))
        yield from stored
        known = set(stored)
        yield from (sha256 for sha256 in self.fallback if sha256 not in known)
