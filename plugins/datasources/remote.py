"""What the file sources ask of a computer, one ``python3`` command per question.

Each question is answered for every file at once (a round trip per file would take minutes
for 10,000 files over SSH):

- ``{"op": "list", "root": folder, "glob": pattern}``: the regular files matching the
  pattern below the folder (links followed), as ``[relative path, size, mtime]``, sorted;
- ``{"op": "stat", "paths": [...]}``: the same for the paths given (absolute, or ``~/``),
  ``[path, size, mtime]``, with null size and mtime for a missing one;
- ``{"op": "read", "path": file}``: a text file's ``text`` and its absolute ``path``;
- ``{"op": "hash", "files": [[path, size, mtime], ...]}``: each file's sha256, as ``[path,
  sha256, problem]``, read only when its size and mtime are the ones given (the listing's):
  otherwise, or when it changes while being read, its problem is ``changed``.

Both listings give the computer's clock (``now``): a file's age is judged by the clock that
set its mtime. The functions down to :func:`answer` run on the computer
(:class:`veglia.python_program.PythonProgram`): the standard library only, Python 3.6 syntax.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
import time
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import DataSourceError, PythonProgram

if TYPE_CHECKING:
    from veglia.plugin_api import Transport

__all__ = ["ask", "hash_files", "list_files", "read_text", "stat_paths"]


def list_files(root: str, pattern: str) -> "dict[str, Any]":  # noqa: UP037
    """The regular files matching ``pattern`` (``**`` crosses folders) below ``root``."""
    root = os.path.expanduser(root)
    if not os.path.isdir(root):
        return {"error": "no folder " + root}
    found = []
    for path in glob.glob(os.path.join(glob.escape(root), pattern), recursive=True):
        try:
            info = os.stat(path)
        except OSError:
            continue  # a link to nothing, or gone since the glob
        if stat.S_ISREG(info.st_mode):
            found.append([os.path.relpath(path, root), info.st_size, info.st_mtime])
    found.sort()
    return {"root": root, "now": time.time(), "files": found}


def stat_paths(paths: "list[Any]") -> "dict[str, Any]":  # noqa: UP037
    """``[path, size, mtime]`` per path (size and mtime null when it is no regular file)."""
    found = []
    for path in paths:
        path = os.path.expanduser(path)
        try:
            info = os.stat(path)
        except OSError:
            found.append([path, None, None])
            continue
        if stat.S_ISREG(info.st_mode):
            found.append([path, info.st_size, info.st_mtime])
        else:
            found.append([path, None, None])
    return {"now": time.time(), "files": found}


def read_text(path: str) -> "dict[str, Any]":  # noqa: UP037
    """A text file's content (UTF-8) and its absolute path."""
    path = os.path.abspath(os.path.expanduser(path))
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return {"error": "cannot read " + path + " (" + (exc.strerror or str(exc)) + ")"}
    return {"path": path, "text": data.decode("utf-8", "replace")}


def hash_files(files: "list[Any]") -> "list[Any]":  # noqa: UP037
    """``[path, sha256, problem]`` per ``[path, size, mtime]`` asked."""
    answers = []
    for path, size, mtime in files:
        try:
            with open(path, "rb") as handle:
                before = os.fstat(handle.fileno())
                if (before.st_size, before.st_mtime) != (size, mtime):
                    answers.append([path, None, "changed"])
                    continue
                digest = hashlib.sha256()
                chunk = handle.read(1 << 20)
                while chunk:
                    digest.update(chunk)
                    chunk = handle.read(1 << 20)
                after = os.fstat(handle.fileno())
        except OSError as exc:
            answers.append([path, None, exc.strerror or str(exc)])
            continue
        if (after.st_size, after.st_mtime) != (size, mtime):
            answers.append([path, None, "changed"])
        else:
            answers.append([path, digest.hexdigest(), ""])
    return answers


def answer(payload: "dict[str, Any]") -> object:  # noqa: UP037
    if payload["op"] == "list":
        return list_files(payload["root"], payload["glob"])
    if payload["op"] == "stat":
        return stat_paths(payload["paths"])
    if payload["op"] == "read":
        return read_text(payload["path"])
    return hash_files(payload["files"])


_PROGRAM = PythonProgram(
    "veglia: list, stat, read or hash files for a data source",
    (list_files, stat_paths, read_text, hash_files, answer),
    imports=("glob", "hashlib", "os", "stat", "time"),
)

#: Seconds a listing may take, and a hash command besides its reading time.
BASE_TIMEOUT = 120.0
#: The slowest reading rate a hash command's timeout allows for, in bytes a second.
SLOWEST_READ = 20 * 2**20


def ask(transport: Transport, payload: dict[str, Any], *, read_bytes: int = 0) -> Any:
    """The computer's answer to ``payload`` (one ``python3`` command); ``read_bytes`` is how
    much it will read, which the command's timeout allows for."""
    timeout = BASE_TIMEOUT + read_bytes / SLOWEST_READ
    what = f"The data source's {payload['op']} command"
    answered = _PROGRAM.ask(transport, payload, what=what, timeout=timeout)
    if answered is None:
        raise DataSourceError(
            f"python3 is not found on {transport.hostname}, and the file data sources run it "
            "there to list and hash files: install python3 (3.6 or later) on that computer."
        )
    return answered
