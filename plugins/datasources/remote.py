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
set its mtime. The functions down to :func:`answer` run on the computer: the standard
library only, Python 3.6 syntax.
"""

from __future__ import annotations

import glob
import hashlib
import inspect
import json
import os
import shlex
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veglia.datasources import Element, Known, combined_checksum
from veglia.exceptions import DataSourceError, TransportError

if TYPE_CHECKING:
    from veglia.transports import Transport

__all__ = [
    "Checksums",
    "ask",
    "assemble",
    "checksums",
    "computer_path",
    "hash_files",
    "list_files",
    "read_text",
    "stat_paths",
    "unchanged",
]


def list_files(root: str, pattern: str) -> dict:
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


def stat_paths(paths: list) -> dict:
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


def read_text(path: str) -> dict:
    """A text file's content (UTF-8) and its absolute path."""
    path = os.path.abspath(os.path.expanduser(path))
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return {"error": "cannot read " + path + " (" + (exc.strerror or str(exc)) + ")"}
    return {"path": path, "text": data.decode("utf-8", "replace")}


def hash_files(files: list) -> list:
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


def answer(payload: dict) -> object:
    if payload["op"] == "list":
        return list_files(payload["root"], payload["glob"])
    if payload["op"] == "stat":
        return stat_paths(payload["paths"])
    if payload["op"] == "read":
        return read_text(payload["path"])
    return hash_files(payload["files"])


_PROGRAM = (
    "import glob, hashlib, json, os, stat, sys, time\n"
    + "".join(inspect.getsource(f) for f in (list_files, stat_paths, read_text, hash_files, answer))
    + "sys.stdout.write(json.dumps(answer(json.load(sys.stdin))))\n"
)
_COMMAND = f"python3 -c {shlex.quote(_PROGRAM)}"

#: Seconds a listing may take, and a hash command besides its reading time.
BASE_TIMEOUT = 120.0
#: The slowest reading rate a hash command's timeout allows for, in bytes a second.
SLOWEST_READ = 20 * 2**20


def ask(transport: Transport, payload: dict, *, read_bytes: int = 0) -> Any:
    """The computer's answer to ``payload`` (one ``python3`` command); ``read_bytes`` is how
    much it will read, which the command's timeout allows for."""
    timeout = BASE_TIMEOUT + read_bytes / SLOWEST_READ
    try:
        code, out, err = transport.exec_command(
            _COMMAND, stdin=json.dumps(payload).encode(), timeout=timeout
        )
    except TransportError as exc:
        # The message quotes the command: the whole program, kilobytes of it.
        shown = f"the data source's {payload['op']} command"
        message = str(exc).replace(f"`{_COMMAND}`", shown)
        raise type(exc)(message[:1].upper() + message[1:]) from exc
    if code == 127:
        raise DataSourceError(
            f"python3 is not found on {transport.hostname}, and the file data sources run it "
            "there to list and hash files: install python3 (3.6 or later) on that computer."
        )
    if code != 0:
        raise TransportError(
            f"Listing files on {transport.hostname} failed (exit {code}): {err.strip()[-500:]}"
        )
    try:
        return json.loads(out)
    except ValueError:
        raise TransportError(
            f"Listing files on {transport.hostname} gave output that is not the expected "
            f"JSON (a login script printing to stdout?): {out[:200]!r}"
        ) from None


def computer_path(value: Any) -> str:
    """A setting naming a file or folder on the computer: absolute, or below ``~``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("give a path on the computer, such as /data/runs")
    if not (value.startswith("/") or value == "~" or value.startswith("~/")):
        raise ValueError(
            "give an absolute path (or one starting with ~/): the folder the "
            "daemon runs in is no place to count on"
        )
    return value


@dataclass
class Checksums:
    """The sha256 of the files asked for: ``sha256`` by path, and ``problems`` by path for
    those not read (``changed`` when a file is being written); ``hashed`` were read now,
    the others came from ``known``, which holds every file with a sha256."""

    sha256: dict[str, str] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    hashed: list[str] = field(default_factory=list)
    known: Known = field(default_factory=dict)


def unchanged(known: Known, files: Sequence[Sequence[Any]]) -> Known:
    """The entries of ``known`` for ``files`` (path, size, mtime as listed now) whose size
    and mtime are the same: an element that waits (for another file being written, for a
    missing one) keeps its other files' sha256 until it is complete."""
    listed = {path: (size, mtime) for path, size, mtime in files}
    return {path: entry for path, entry in known.items() if listed.get(path) == entry[:2]}


def checksums(
    transport: Transport, files: Sequence[tuple[str, int, float]], known: Known
) -> Checksums:
    """The sha256 of ``files`` (path, size, mtime as listed): taken from ``known`` where
    size and mtime are the same, read on the computer for the others, all in one command."""
    result = Checksums()
    to_read = []
    for path, size, mtime in files:
        entry = known.get(path)
        if entry is not None and entry[:2] == (size, mtime):
            result.sha256[path] = entry[2]
            result.known[path] = entry
        else:
            to_read.append([path, size, mtime])
    if not to_read:
        return result
    payload = {"op": "hash", "files": to_read}
    answers = ask(transport, payload, read_bytes=sum(size for _, size, _ in to_read))
    listed = {path: (size, mtime) for path, size, mtime in to_read}
    for path, sha256, problem in answers:
        if problem:
            result.problems[path] = problem
            continue
        result.sha256[path] = sha256
        result.known[path] = (*listed[path], sha256)
        result.hashed.append(path)
    return result


def assemble(
    members: Mapping[str, Sequence[str]], metadata: Mapping[str, dict[str, str]], sums: Checksums
) -> tuple[list[Element], set[str], list[str]]:
    """The elements whose files (``members``: paths by identity) all have a sha256, sorted
    by identity; the identities with a file being written; the files that cannot be read."""
    elements: list[Element] = []
    waiting: set[str] = set()
    problems: list[str] = []
    for identity, paths in members.items():
        unread = [(path, sums.problems[path]) for path in paths if path in sums.problems]
        if any(problem == "changed" for _, problem in unread):
            waiting.add(identity)
        elif unread:
            problems += [f"{identity}: {p} cannot be read ({why}); left out" for p, why in unread]
        else:
            checksum = combined_checksum([sums.sha256[path] for path in paths])
            elements.append(Element(identity, tuple(paths), checksum, metadata[identity]))
    elements.sort(key=lambda element: element.identity)
    return elements, waiting, problems
