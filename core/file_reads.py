"""Reading slices of many files in one go: what batched monitors need from a computer.

A *read request* is plain data (it crosses to the computer as JSON)::

    {"path": "/abs/out.log", "glob": False, "mode": "new", "max": 1048576, "tail": 0,
     "known": {"/abs/out.log": [offset, inode]}}

``mode`` is ``new`` (the bytes after the known offset, at most ``max``), ``tail`` (the last
``tail`` bytes, at most ``max``) or ``stat`` (size and time only). The answer to each request
is a list of entries, one per file (a glob may match several, a missing plain path gives one
entry of kind ``-``)::

    [path, kind, size, mtime, inode, start, base64 data]

``kind`` is ``f`` for a regular file, ``-`` for a missing one and ``x`` for anything else (a
symlink, a FIFO, a folder), which is never opened nor followed. A request may name the job's
work dir as ``below``: a path under it is read only when no folder on the way, the work dir
included, is a link (a job can make one to lead the read out of its folder); otherwise its
kind is ``l`` and its last field is the link (an absolute path). ``start`` is where the data
begins in the file: 0 again when the file shrank below the known offset or is another file
(another inode: it was rotated). A ``budget`` caps the bytes read by one call, all files
together; what is left is read the next time.

:func:`read_requests` does it with the standard library only: the transports send its source
to the computer and run it with ``python3`` in one command (``core.local`` calls it in
process). :func:`read_per_file` is the fallback for a computer without ``python3`` or a
transport without commands: ``lstat`` and ``read_bytes`` per file, through the transport.
"""

from __future__ import annotations

import base64
import fnmatch
import glob
import os
import posixpath
import stat
from typing import TYPE_CHECKING, Any, Protocol

from veglia.exceptions import TransportError
from veglia.python_program import CommandRunner, PythonProgram

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DEFAULT_BUDGET",
    "FileReader",
    "link_above",
    "linked_part",
    "python_command",
    "read_per_file",
    "read_requests",
]


class _Stat(Protocol):
    """What is read of a :class:`veglia.transports.FileStat`."""

    @property
    def size(self) -> int: ...

    @property
    def mtime(self) -> float: ...

    @property
    def is_file(self) -> bool: ...


class FileReader(CommandRunner, Protocol):
    """What the reads use of a :class:`veglia.transports.Transport`, which delegates its
    file reads to this module (so is named here by what it does)."""

    def listdir(self, path: str = ".") -> list[str]: ...

    def lstat(self, path: str) -> _Stat: ...

    def lstat_mode(self, path: str) -> int | None: ...

    def read_bytes(self, remotepath: str, offset: int = 0, size: int | None = None) -> bytes: ...


#: Bytes one batched read may return, all files together (the rest waits for the next).
DEFAULT_BUDGET = 16 * 1024 * 1024
#: Files one glob may match; the first ones in sorted order are kept.
MAX_MATCHES = 200


# The functions down to read_requests run on the computer too (see _PROGRAM), as
# veglia.python_program says: the standard library only, Python 3.6 syntax.


def lstat_mode(path: str) -> "int | None":  # noqa: UP037
    """The ``st_mode`` of ``path`` itself (a link is not followed), None when it is missing."""
    try:
        return os.lstat(path).st_mode
    except OSError:
        return None


def linked_part(
    mode_of: "Callable[[str], int | None]",  # noqa: UP037
    folder: str,
    relative: str,
) -> "str | None":  # noqa: UP037
    """The first part of ``relative`` below ``folder`` that is a symlink (as a path relative
    to ``folder``), or None. ``mode_of`` gives a path's ``st_mode`` as ``lstat`` sees it (None
    when it is missing). Each part is looked at from the top down: a link anywhere along a
    path could lead out of ``folder``. A missing part, or one that is not a folder, ends the
    walk (None): there is nothing to follow."""
    path, walked = folder, ""
    for part in relative.split("/"):
        if part in ("", "."):
            continue
        path, walked = posixpath.join(path, part), posixpath.join(walked, part)
        mode = mode_of(path)
        if mode is None:
            return None
        if stat.S_ISLNK(mode):
            return walked
        if not stat.S_ISDIR(mode):
            return None
    return None


def link_above(
    mode_of: "Callable[[str], int | None]",  # noqa: UP037
    below: str,
    path: str,
) -> "str | None":  # noqa: UP037
    """The link (an absolute path) among the folders from ``below`` (a job's work dir, itself
    included) down to the one holding ``path``, or None. None too for a path outside
    ``below``: the folders above a work dir are not the job's to replace. The file itself is
    left to its reader (opened without following a link)."""
    below = posixpath.normpath(below)
    if below == "/" or not path.startswith(below + "/"):
        return None
    top = posixpath.dirname(below)
    walked = linked_part(mode_of, top, posixpath.relpath(posixpath.dirname(path), top))
    return posixpath.join(top, walked) if walked else None


def read_requests(payload: "dict[str, Any]") -> "list[Any]":  # noqa: UP037
    """Answer ``payload`` (``{"budget": N, "requests": [...]}``): one list of entries per
    request. Only the standard library, and Python 3.6 syntax: this function's source runs
    on the computer."""
    budget = payload.get("budget", 16 * 1024 * 1024)
    answers = []
    links = {}  # (work dir, folder) -> the link on the way: looked at once per call
    for request in payload["requests"]:
        below = request.get("below")
        if request.get("glob"):
            # A link on the way to the pattern's folder: not even its names are listed.
            link = below and link_above(lstat_mode, below, request["path"])
            paths = [] if link else sorted(glob.glob(request["path"]))[:200]
            entries = [[request["path"], "l", -1, None, None, 0, link]] if link else []
        else:
            paths, entries = [request["path"]], []
        for path in paths:
            key = (below, posixpath.dirname(path))
            if below and key not in links:
                links[key] = link_above(lstat_mode, below, path)
            if below and links[key]:
                entries.append([path, "l", -1, None, None, 0, links[key]])
                continue
            try:
                info = os.lstat(path)
            except OSError:
                entries.append([path, "-", -1, None, None, 0, ""])
                continue
            if not stat.S_ISREG(info.st_mode):
                entries.append([path, "x", info.st_size, info.st_mtime, info.st_ino, 0, ""])
                continue
            known = request.get("known", {}).get(path)
            mode, size = request.get("mode", "new"), info.st_size
            start, count = size, 0
            if mode == "new":
                start = known[0] if known else 0
                if start > size or (known and known[1] is not None and known[1] != info.st_ino):
                    start = 0
                count = size - start
            count = max(0, min(count, request.get("max", count), budget))
            if mode == "tail":
                count = max(0, min(request.get("tail", 0), size, request.get("max", size), budget))
                start = size - count
            data = b""
            if count:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    entries.append([path, "x", size, info.st_mtime, info.st_ino, 0, ""])
                    continue
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode):  # the same checks, on the open file
                        os.lseek(fd, start, 0)
                        while len(data) < count:
                            chunk = os.read(fd, count - len(data))
                            if not chunk:
                                break
                            data += chunk
                finally:
                    os.close(fd)
                budget -= len(data)
            encoded = base64.b64encode(data).decode("ascii")
            entries.append([path, "f", size, info.st_mtime, info.st_ino, start, encoded])
        answers.append(entries)
    return answers


_PROGRAM = PythonProgram(
    "veglia: read the watched files",
    (lstat_mode, linked_part, link_above, read_requests),
    imports=("base64", "glob", "os", "posixpath", "stat"),
)


def python_command() -> str:
    """The shell command that reads a JSON payload on stdin and prints the answers."""
    return _PROGRAM.command


def read_via_command(transport: FileReader, payload: dict[str, Any]) -> list[Any] | None:
    """The answers from one ``python3`` command on the computer; None when it has no
    ``python3`` (exit 127), so the caller falls back to :func:`read_per_file`."""
    result: list[Any] | None = _PROGRAM.ask(
        transport, payload, what="Reading the watched files", timeout=120
    )
    return result


def _matches(transport: FileReader, pattern: str) -> list[str]:
    """A glob's matches, through ``listdir``: wildcards in the last part of the path only."""
    folder, name = posixpath.split(pattern)
    try:
        names = transport.listdir(folder)
    except TransportError:
        return []
    return [posixpath.join(folder, n) for n in sorted(fnmatch.filter(names, name))][:MAX_MATCHES]


def read_per_file(transport: FileReader, payload: dict[str, Any]) -> list[Any]:
    """The same answers as :func:`read_requests`, with the transport's file calls (no inode:
    a rotated file is only noticed when it is shorter than what was read)."""
    budget = payload.get("budget", DEFAULT_BUDGET)
    answers: list[Any] = []
    mode_of = transport.lstat_mode
    links: dict[tuple[str, str], str | None] = {}  # one lstat per folder and call
    for request in payload["requests"]:
        below = request.get("below")
        paths, entries = [request["path"]], []
        if request.get("glob"):
            link = below and link_above(mode_of, below, request["path"])
            paths = [] if link else _matches(transport, request["path"])
            entries = [[request["path"], "l", -1, None, None, 0, link]] if link else []
        for path in paths:
            key = (below, posixpath.dirname(path))
            if below and key not in links:
                links[key] = link_above(mode_of, below, path)
            if below and links[key]:
                entries.append([path, "l", -1, None, None, 0, links[key]])
                continue
            try:
                info = transport.lstat(path)
            except TransportError:
                entries.append([path, "-", -1, None, None, 0, ""])
                continue
            if not info.is_file:
                entries.append([path, "x", info.size, info.mtime, None, 0, ""])
                continue
            known = request.get("known", {}).get(path)
            mode, size = request.get("mode", "new"), info.size
            start, count = size, 0
            if mode == "new":
                start = known[0] if known and known[0] <= size else 0
                count = size - start
            count = max(0, min(count, request.get("max", count), budget))
            if mode == "tail":
                count = max(0, min(request.get("tail", 0), size, request.get("max", size), budget))
                start = size - count
            data = transport.read_bytes(path, start, count) if count else b""
            budget -= len(data)
            encoded = base64.b64encode(data).decode("ascii")
            entries.append([path, "f", size, info.mtime, None, start, encoded])
        answers.append(entries)
    return answers
