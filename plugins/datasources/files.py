"""What ``core.folder`` and ``core.fofn`` share: their path setting, the sha256 of files
(from the caller's ``known`` where a file did not change, else read on the computer in one
command), and elements made of files."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import Element, Known, combined_checksum
from veglia.plugins.datasources.remote import ask

if TYPE_CHECKING:
    from veglia.plugin_api import Transport

__all__ = ["Checksums", "assemble", "checksums", "computer_path", "unchanged"]


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
    to_read: list[list[Any]] = []  # [path, size, mtime], as the command takes them
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
