"""Blobs kept in the database: the repository of hosts that share a database, not a folder.

Chosen with ``storage.repository = database``. Reads fall back to the profile's folder
repository, so a profile switched to the database still finds the blobs it wrote before.
Each blob is one row, written once (``ON CONFLICT DO NOTHING``): its digest is its key.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import sqlalchemy as sa

from veglia.exceptions import NotExistent, RepositoryIntegrityError
from veglia.storage.repository import FileRepository
from veglia.storage.tables import repository_blobs

if TYPE_CHECKING:
    from veglia.storage.backend import StorageBackend

__all__ = ["DatabaseRepository"]


class DatabaseRepository:
    """Blobs addressed by their SHA-256 hex digest, in the ``repository_blobs`` table."""

    def __init__(self, storage: StorageBackend, fallback: FileRepository) -> None:
        self._storage = storage
        self.fallback = fallback
        self.root = fallback.root  # quarantined blobs go to the profile folder

    def __repr__(self) -> str:
        return "DatabaseRepository()"

    def put_stream(self, stream: BinaryIO) -> tuple[str, int]:
        content = stream.read()
        sha256 = hashlib.sha256(content).hexdigest()
        with self._storage.connection() as connection:
            connection.execute(
                self._storage.insert(repository_blobs)
                .values(sha256=sha256, size=len(content), content=content)
                .on_conflict_do_nothing()
            )
        return sha256, len(content)

    def put_bytes(self, data: bytes) -> tuple[str, int]:
        return self.put_stream(io.BytesIO(data))

    def put_file(self, path: Path | str) -> tuple[str, int]:
        with open(path, "rb") as handle:
            return self.put_stream(handle)

    def _content(self, sha256: str) -> bytes | None:
        with self._storage.connection() as connection:
            return connection.scalar(
                sa.select(repository_blobs.c.content).where(repository_blobs.c.sha256 == sha256)
            )

    def has(self, sha256: str) -> bool:
        with self._storage.connection() as connection:
            found = connection.scalar(
                sa.select(repository_blobs.c.sha256).where(repository_blobs.c.sha256 == sha256)
            )
        return found is not None or self.fallback.has(sha256)

    def get_bytes(self, sha256: str) -> bytes:
        content = self._content(sha256)
        if content is not None:
            return bytes(content)
        try:
            return self.fallback.get_bytes(sha256)
        except NotExistent:
            raise NotExistent(
                f"Blob {sha256} is in neither the database nor the folder {self.root}; it was "
                "deleted outside veglia, or written by a host whose repository is its own "
                "folder (set storage.repository to 'database' on every host)."
            ) from None

    def open(self, sha256: str) -> BinaryIO:
        return io.BytesIO(self.get_bytes(sha256))

    def copy_to(self, sha256: str, target: Path | str) -> None:
        Path(target).write_bytes(self.get_bytes(sha256))

    def hash_of_stored(self, sha256: str) -> str:
        return hashlib.sha256(self.get_bytes(sha256)).hexdigest()

    def verify(self, sha256: str) -> None:
        actual = self.hash_of_stored(sha256)
        if actual != sha256:
            raise RepositoryIntegrityError(
                f"Blob {sha256} now hashes to {actual}: its row in the database was modified."
            )

    def quarantine(self, sha256: str) -> Path | None:
        """Move a damaged blob out of the table (into the profile's ``quarantine/`` folder), so
        that storing its true content again restores it."""
        content = self._content(sha256)
        if content is None:
            return self.fallback.quarantine(sha256)
        target = self.root / "quarantine" / f"{sha256}.{int(time.time())}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        with self._storage.connection() as connection:
            connection.execute(
                sa.delete(repository_blobs).where(repository_blobs.c.sha256 == sha256)
            )
        return target

    def __iter__(self) -> Iterator[str]:
        with self._storage.connection() as connection:
            stored = list(connection.scalars(sa.select(repository_blobs.c.sha256)))
        yield from stored
        known = set(stored)
        yield from (sha256 for sha256 in self.fallback if sha256 not in known)
