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
symlink, a FIFO, a folder), which is never opened nor followed. ``start`` is where the data
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
import inspect
import json
import os
import posixpath
import shlex
import stat
from typing import TYPE_CHECKING, Any

from veglia.exceptions import TransportError

if TYPE_CHECKING:
    from veglia.transports import Transport

__all__ = ["DEFAULT_BUDGET", "python_command", "read_per_file", "read_requests"]

#: Bytes one batched read may return, all files together (the rest waits for the next).
DEFAULT_BUDGET = 16 * 1024 * 1024
#: Files one glob may match; the first ones in sorted order are kept.
MAX_MATCHES = 200


def read_requests(payload: dict) -> list:
    """Answer ``payload`` (``{"budget": N, "requests": [...]}``): one list of entries per
    request. Only the standard library, and Python 3.6 syntax: this function's source runs
    on the computer."""
    budget = payload.get("budget", 16 * 1024 * 1024)
    answers = []
    for request in payload["requests"]:
        if request.get("glob"):
            paths = sorted(glob.glob(request["path"]))[:200]
        else:
            paths = [request["path"]]
        entries = []
        for path in paths:
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


_PROGRAM = (
    "import base64, glob, json, os, stat, sys\n"
    + inspect.getsource(read_requests)
    + "sys.stdout.write(json.dumps(read_requests(json.load(sys.stdin))))\n"
)


def python_command() -> str:
    """The shell command that reads a JSON payload on stdin and prints the answers."""
    return f"python3 -c {shlex.quote(_PROGRAM)}"


def read_via_command(transport: Transport, payload: dict) -> list | None:
    """The answers from one ``python3`` command on the computer; None when it has no
    ``python3`` (exit 127), so the caller falls back to :func:`read_per_file`."""
    code, out, err = transport.exec_command(
        python_command(), stdin=json.dumps(payload).encode(), timeout=120
    )
    if code == 127:
        return None
    if code != 0:
        raise TransportError(
            f"Reading the watched files on {transport.hostname} failed (exit {code}): "
            f"{err.strip()[-500:]}"
        )
    try:
        return json.loads(out)
    except ValueError:
        raise TransportError(
            f"Reading the watched files on {transport.hostname} gave output that is not "
            f"the expected JSON (a login script printing to stdout?): {out[:200]!r}"
        ) from None


def _matches(transport: Transport, pattern: str) -> list[str]:
    """A glob's matches, through ``listdir``: wildcards in the last part of the path only."""
    folder, name = posixpath.split(pattern)
    try:
        names = transport.listdir(folder)
    except TransportError:
        return []
    return [posixpath.join(folder, n) for n in sorted(fnmatch.filter(names, name))][:MAX_MATCHES]


def read_per_file(transport: Transport, payload: dict) -> list:
    """The same answers as :func:`read_requests`, with the transport's file calls (no inode:
    a rotated file is only noticed when it is shorter than what was read)."""
    budget = payload.get("budget", DEFAULT_BUDGET)
    answers: list[Any] = []
    for request in payload["requests"]:
        paths = _matches(transport, request["path"]) if request.get("glob") else [request["path"]]
        entries = []
        for path in paths:
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
