"""Content-addressed blob store on disk: each blob is kept once, under its SHA-256.

Layout: ``<root>/objects/ab/cdef...`` where ``abcdef...`` is the hex digest. Blobs are written
to a temporary file in the same folder and renamed into place, so a crashed process never
leaves a half-written blob under a valid name. There is no fsync per blob: like the database
(SQLite ``synchronous=NORMAL``), the repository survives process crashes, and an operating
system crash can lose the last writes; ``veglia verify`` (hash check) finds them.

A blob's modification time is when it was last stored: storing content already there (or
:meth:`FileRepository.keep`) touches it. ``veglia storage maintain`` removes only blobs that
no node refers to and that are older than its grace period, so a blob written for a node
whose row is not committed yet stays.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Set
from pathlib import Path
from typing import BinaryIO, Protocol

from veglia.config.private_paths import private_folder
from veglia.exceptions import NotExistent, RepositoryIntegrityError
from veglia.progress_report import ProgressReport, no_progress

__all__ = ["ByteSource", "FileRepository"]

_CHUNK = 1024 * 1024


class ByteSource(Protocol):
    """What :meth:`FileRepository.put_stream` reads: anything with ``read(size) -> bytes``
    (an open file, a zip entry, the archive import's bounded reader)."""

    def read(self, size: int = -1, /) -> bytes: ...


class FileRepository:
    """Blobs addressed by their SHA-256 hex digest."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.objects = self.root / "objects"
        self._tmp = self.root / "tmp"
        #: Where ``maintain`` moves a blob while it checks that no writer just stored it.
        self._aside = self.root / "maintain"
        # Folders this process has made (or found) private: checked once, not per blob.
        self._ready: set[Path] = set()

    def _folder(self, path: Path) -> Path:
        if path not in self._ready:
            private_folder(path)
            self._ready.add(path)
        return path

    def _path(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"{sha256!r} is not a SHA-256 hex digest")
        return self.objects / sha256[:2] / sha256[2:]

    def put_stream(self, stream: ByteSource) -> tuple[str, int]:
        """Store the stream's bytes; return ``(sha256, size)``."""
        fd, tmp_name = self._tmp_file()
        digest = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(fd, "wb") as handle:
                while chunk := stream.read(_CHUNK):
                    digest.update(chunk)
                    handle.write(chunk)
                    size += len(chunk)
            sha256 = digest.hexdigest()
            target = self._path(sha256)
            if self._refresh(target):
                os.unlink(tmp_name)
            else:
                self._place(tmp_name, target)
            return sha256, size
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise

    def put_bytes(self, data: bytes) -> tuple[str, int]:
        """Store ``data``; return ``(sha256, size)``. Content already stored is not
        written again."""
        sha256 = hashlib.sha256(data).hexdigest()
        target = self._path(sha256)
        if self._refresh(target):
            return sha256, len(data)
        fd, tmp_name = self._tmp_file()
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            self._place(tmp_name, target)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return sha256, len(data)

    @staticmethod
    def _refresh(target: Path) -> bool:
        """Whether the blob is stored; if so its time is now, so ``maintain`` leaves it for
        its grace period. A blob ``maintain`` is taking away is not found: the caller stores
        it again."""
        try:
            os.utime(target)
        except FileNotFoundError:
            return False
        return True

    def keep(self, sha256: str) -> bool:
        """Whether the blob is stored; if so it counts as just written, so ``maintain``
        leaves it for its grace period (call this before referencing a blob stored before)."""
        return self._refresh(self._path(sha256))

    def temporary_folder(self) -> Path:
        """The private folder of blobs being written, on the repository's file system."""
        if not self._tmp.is_dir():  # removed behind our back: make it again
            self._ready.clear()
        return self._folder(self._tmp)

    def _tmp_file(self) -> tuple[int, str]:
        return tempfile.mkstemp(dir=self.temporary_folder())

    def _place(self, tmp_name: str, target: Path) -> None:
        self._into_folder(os.replace, tmp_name, target)

    def _into_folder(
        self, put: Callable[[str | Path, Path], None], source: str | Path, target: Path
    ) -> None:
        """``put(source, path)`` (a rename, a link) to the blob's path ``target``."""
        try:
            put(source, self._folder(target.parent) / target.name)
        except FileNotFoundError:  # its folder was removed behind our back
            self._ready.discard(target.parent)
            put(source, self._folder(target.parent) / target.name)

    def put_file(self, path: Path | str) -> tuple[str, int]:
        with open(path, "rb") as handle:
            head = handle.read(_CHUNK)
            if len(head) < _CHUNK:
                # Hashed before anything is written: content already stored (an empty
                # stderr, an exit status) costs no temporary file made and deleted, which
                # on a file system without a journal slows every later file creation.
                return self.put_bytes(head)
            handle.seek(0)
            return self.put_stream(handle)

    def adopt(self, path: Path | str) -> tuple[str, int]:
        """Store a file written in :meth:`temporary_folder` (a job's retrieved file) by
        linking it into place: no second copy of its content, no file created for it. The
        file becomes the blob and must not be written again. A file anywhere else, or on a
        file system without hard links, is copied as :meth:`put_file` does."""
        source = Path(path)
        if not str(source).startswith(f"{self._tmp}{os.sep}"):
            return self.put_file(source)
        # Not followed: only a regular file veglia wrote is linked.
        with open(os.open(source, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
            sha256, size = _digest(handle)
        target = self._path(sha256)
        if self._refresh(target):
            return sha256, size
        os.chmod(source, 0o600)  # as private as the blobs written through a temporary file
        try:
            self._into_folder(os.link, source, target)
        except FileExistsError:  # stored meanwhile by another writer: the same content
            self._refresh(target)
        except OSError:  # a file system that makes no hard links
            return self.put_file(source)
        else:
            os.utime(target)  # stored now: maintain's grace period counts from here
        return sha256, size

    def has(self, sha256: str) -> bool:
        return self._path(sha256).exists()

    def open(self, sha256: str) -> BinaryIO:
        path = self._path(sha256)
        try:
            return open(path, "rb")
        except FileNotFoundError:
            raise NotExistent(
                f"Blob {sha256} is missing from the repository at {self.root}; the repository "
                "folder was changed outside veglia."
            ) from None

    def get_bytes(self, sha256: str) -> bytes:
        with self.open(sha256) as handle:
            return handle.read()

    def copy_to(self, sha256: str, target: Path | str) -> None:
        with self.open(sha256) as source, open(target, "wb") as handle:
            shutil.copyfileobj(source, handle, _CHUNK)

    def hash_of_stored(self, sha256: str) -> str:
        """Recompute the digest of the stored blob (for integrity checks)."""
        with self.open(sha256) as handle:
            return _digest(handle)[0]

    def verify(self, sha256: str) -> None:
        """Raise :class:`RepositoryIntegrityError` when the blob's content changed."""
        actual = self.hash_of_stored(sha256)
        if actual != sha256:
            raise RepositoryIntegrityError(
                f"Blob {sha256} now hashes to {actual}: the file at {self._path(sha256)} was "
                "modified."
            )

    def quarantine(self, sha256: str) -> Path | None:
        """Move a damaged blob aside (under ``quarantine/``), so that storing its true
        content again (a rerun of the job that made it) restores it."""
        path = self._path(sha256)
        if not path.exists():
            return None
        target = self.root / "quarantine" / f"{sha256}.{int(time.time())}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        return target

    def maintain(
        self,
        grace: float,
        referenced: Callable[[], Set[str]],
        dry_run: bool = False,
        progress: ProgressReport = no_progress,
    ) -> list[tuple[str, int]]:
        """Remove the blobs no node's file refers to and that were not stored (or kept) in
        the last ``grace`` seconds, and temporary files of writes older than that (their
        writer died); return what was removed (or, with ``dry_run``, would be) with sizes.

        veglia stores a node's files before the node's row is committed, so an unreferenced
        blob may be one a running job is about to refer to: the grace period, longer than any
        write, keeps it. ``referenced`` is read after the blobs' times, so a reference
        committed before is seen; a blob stored again meanwhile is touched, and this checks its
        time again once it has moved it aside (where a writer no longer finds it, and so
        stores it again) and puts it back if it was touched.
        """
        self._restore_set_aside()
        cutoff = time.time() - grace
        stale: list[tuple[str, int]] = []
        for seen, sha256 in enumerate(self):
            progress("reading blobs", seen, None)
            try:
                status = self._path(sha256).stat()
            except FileNotFoundError:
                continue
            if status.st_mtime < cutoff:
                stale.append((sha256, status.st_size))
        kept = referenced()
        freed: list[tuple[str, int]] = []
        for done, (sha256, size) in enumerate(stale):
            progress("checking old blobs", done, len(stale))
            if sha256 not in kept and (dry_run or self._remove_if_stale(sha256, cutoff)):
                freed.append((sha256, size))
        progress("checking old blobs", len(stale), len(stale))
        if self._tmp.is_dir():
            for leftover in sorted(self._tmp.iterdir()):
                try:
                    status = leftover.stat()
                except FileNotFoundError:  # its write just ended
                    continue
                if status.st_mtime < cutoff:
                    size = status.st_size
                    if leftover.is_dir():  # a job's retrieved files, its parse never done
                        size = _tree_size(leftover)
                        if not dry_run:
                            shutil.rmtree(leftover, ignore_errors=True)
                    elif not dry_run:
                        leftover.unlink(missing_ok=True)
                    freed.append((f"tmp/{leftover.name}", size))
        return freed

    def _remove_if_stale(self, sha256: str, cutoff: float) -> bool:
        path = self._path(sha256)
        aside = self._folder(self._aside) / sha256
        try:
            os.rename(path, aside)
            if aside.stat().st_mtime >= cutoff:  # stored again just now: it stays
                os.replace(aside, path)
                return False
            aside.unlink()
        except FileNotFoundError:  # another maintain took it, or put it back
            return False
        return True

    def _restore_set_aside(self) -> None:
        """Put back the blobs a ``maintain`` that died had set aside: the next look decides
        again whether they go."""
        if not self._aside.is_dir():
            return
        for blob in self._aside.iterdir():
            target = self._path(blob.name)
            if target.exists():
                blob.unlink(missing_ok=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.replace(blob, self._folder(target.parent) / target.name)

    def __iter__(self) -> Iterator[str]:
        if not self.objects.exists():
            return
        for folder in sorted(self.objects.iterdir()):
            for blob in sorted(folder.iterdir()):
                yield folder.name + blob.name


def _tree_size(folder: Path) -> int:
    """The bytes of the files below ``folder`` (one removed meanwhile counts none)."""
    size = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                size += path.stat().st_size
    return size


def _digest(handle: BinaryIO) -> tuple[str, int]:
    """The SHA-256 hex digest and size of what ``handle`` reads, a chunk at a time."""
    digest = hashlib.sha256()
    size = 0
    while chunk := handle.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size
