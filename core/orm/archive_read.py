"""Reading an archive (see :mod:`veglia.orm.archive` for its format) and checking all of it
before anything is imported: the archive's own checksum of its rows, the SHA-256 of every
file content, the rows' shape and references. A damaged archive is refused whole.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid as uuid_module
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from veglia.exceptions import ArchiveError, ArchiveRowTooBig, UnsafePathError
from veglia.orm.archive import (
    ARCHIVE_FORMAT,
    ARCHIVE_VERSION,
    BLOBS,
    DATA,
    METADATA,
    is_process,
)
from veglia.orm.archive_stream import SECTIONS, rows
from veglia.orm.process_nodes import TERMINAL_STATES
from veglia.relative_paths import checked_relative
from veglia.storage import models
from veglia.storage.repository import ByteSource

__all__ = [
    "ArchiveContent",
    "ArchiveLimits",
    "BoundedReader",
    "RowChecker",
    "inspect_archive",
    "opened_archive",
    "parse_time",
    "read_archive",
]

_READ = 1024 * 1024
#: What reading a damaged zip file raises: a bad header, a CRC or decompression error, an
#: entry that claims a method or version zipfile does not know, a bad offset.
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    NotImplementedError,
    RuntimeError,
    ValueError,
)


# -- reading and checking ------------------------------------------------------------------
# What is wrong with a damaged archive is raised as a ValueError saying it in a few words,
# and reported by read_archive as an ArchiveError.
_Damaged = ValueError


def _no_constants(name: str) -> Any:
    raise _Damaged(f"{name} is not a JSON number")


def _json(content: bytes, name: str) -> Any:
    """``metadata.json``, a few lines, parsed."""
    try:
        return json.loads(content, parse_constant=_no_constants)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Damaged(f"{name} is not valid JSON ({exc})") from None


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise _Damaged(what)


def _is_uuid(value: Any) -> bool:
    try:
        return isinstance(value, str) and str(uuid_module.UUID(value)) == value
    except ValueError:
        return False


def _is_sha256(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def parse_time(value: Any, what: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise _Damaged(f"{what} has no valid time ({value!r})") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _strings(row: dict[str, Any], what: str, *keys: str, optional: Iterable[str] = ()) -> None:
    for key in keys:
        _check(isinstance(row.get(key), str), f"{what} has no text {key!r}")
    for key in optional:
        _check(row.get(key) is None or isinstance(row.get(key), str), f"{what}: bad {key!r}")


class RowChecker:
    """Checks the rows of ``data.json`` one at a time (:meth:`check`), keeping only what the
    checks between rows need: each node's type, files and links, and the references to
    check once all rows are read (:meth:`finish`). :class:`_Damaged` saying what is wrong."""

    def __init__(self) -> None:
        self.emails: set[str] = set()
        self.computers: set[str] = set()
        #: ``{UUID: node type}`` of the archive's nodes.
        self.nodes: dict[str, str] = {}
        #: ``{UUID: SHA-256 of its file contents}``, of the nodes with files.
        self.files: dict[str, tuple[str, ...]] = {}
        #: ``{sha256: size}`` the rows give each file content; one size per content.
        self.blobs: dict[str, int] = {}
        #: ``(input, output, link type, label)`` of each link, in order.
        self.links: list[tuple[str, str, str, str]] = []
        self.counts: dict[str, int] = dict.fromkeys(SECTIONS, 0)
        self._users_named: dict[str, str] = {}  # email -> who names it
        self._computers_named: dict[str, str] = {}  # UUID -> who names it
        self._nodes_named: dict[str, str] = {}  # UUID -> who names it

    def check(self, section: str, row: dict[str, Any]) -> None:
        getattr(self, f"_{section}")(row)
        self.counts[section] += 1

    def _users(self, user: dict[str, Any]) -> None:
        _strings(user, "a user", "email")
        self.emails.add(user["email"])

    def _computers(self, computer: dict[str, Any]) -> None:
        what = f"computer {computer.get('label')!r}"
        _strings(computer, what, "label", "hostname", "scheduler_type", "transport_type")
        _check(_is_uuid(computer.get("uuid")), f"{what} has no valid UUID")
        _check(isinstance(computer.get("properties", {}), dict), f"{what}: bad properties")
        self.computers.add(computer["uuid"])

    def _codes(self, code: dict[str, Any]) -> None:
        what = f"code {code.get('label')!r}"
        _strings(code, what, "label", "executable", optional=["default_calc_job_plugin"])
        _check(isinstance(code.get("computer"), str), f"{what} is on no computer")
        self._computers_named.setdefault(code["computer"], what)
        _check(isinstance(code.get("pk"), int), f"{what} has no pk")

    def _nodes(self, node: dict[str, Any]) -> None:
        check_node(node)
        uuid = node["uuid"]
        _check(uuid not in self.nodes, f"node {uuid!r} is in the archive twice")
        # Interned: a link's ends then share the node's UUID, nodes their type.
        self.nodes[sys.intern(uuid)] = sys.intern(node["node_type"])
        if node.get("user") is not None:
            self._users_named.setdefault(node["user"], f"node {uuid!r}")
        if node.get("computer") is not None:
            self._computers_named.setdefault(node["computer"], f"node {uuid!r}")
        if node["files"]:
            self.files[uuid] = tuple(sha256 for _, sha256, _ in node["files"])
        for _, sha256, size in node["files"]:
            _check(size >= 0, f"the file content {sha256} has a negative size")
            _check(
                self.blobs.setdefault(sha256, size) == size,
                f"the file content {sha256} is given two sizes",
            )

    def _links(self, link: dict[str, Any]) -> None:
        _strings(link, "a link", "label", "link_type", "input", "output")
        _check(link["link_type"] in models.LINK_TYPES, f"a link has type {link['link_type']!r}")
        key = (link["input"], link["output"], link["link_type"], link["label"])
        self.links.append(tuple(map(sys.intern, key)))  # type: ignore[arg-type]

    def _logs(self, log: dict[str, Any]) -> None:
        check_log(log)
        self._nodes_named.setdefault(log["node"], "a log message")

    def _groups(self, group: dict[str, Any]) -> None:
        what = f"group {group.get('label')!r}"
        _check(_is_uuid(group.get("uuid")), f"{what} has no valid UUID")
        _strings(group, what, "label")
        _check(bool(group["label"].strip()), f"{what} has an empty label")
        if group.get("time") is not None:
            parse_time(group["time"], what)
        _check(
            isinstance(group.get("nodes"), list)
            and all(isinstance(uuid, str) for uuid in group["nodes"]),
            f"{what} has no list of nodes",
        )
        for uuid in group["nodes"]:
            self._nodes_named.setdefault(uuid, what)

    def finish(self) -> None:
        """The checks between rows: every user, computer and node named is in the archive."""
        for email, what in self._users_named.items():
            _check(email in self.emails, f"{what} has an unknown user")
        for uuid, what in self._computers_named.items():
            _check(uuid in self.computers, f"{what} is on a computer not in the archive")
        for uuid, what in self._nodes_named.items():
            _check(uuid in self.nodes, f"{what} names a node not in the archive")
        for source, target, _, _ in self.links:
            _check(
                source in self.nodes and target in self.nodes,
                "a link names a node not in the archive",
            )


def check_node(node: dict[str, Any]) -> None:
    """A node row has the shape an archive's have, or :class:`_Damaged`."""
    what = f"node {node.get('uuid')!r}"
    _check(_is_uuid(node.get("uuid")), f"{what} has no valid UUID")
    _strings(node, what, "node_type", optional=["process_type", "process_state"])
    _check(node["node_type"] != "selftest", f"{what} is a self-test record")
    parse_time(node.get("ctime"), what)
    parse_time(node.get("mtime"), what)
    for key in ("user", "computer"):
        _check(node.get(key) is None or isinstance(node[key], str), f"{what}: bad {key}")
    for key in ("attributes", "extras"):
        _check(isinstance(node.get(key), dict), f"{what} has no {key}")
    _check(
        node.get("exit_status") is None or isinstance(node["exit_status"], int),
        f"{what}: bad exit status",
    )
    if is_process(node["node_type"]):
        _check(
            node.get("process_state") in TERMINAL_STATES,
            f"{what} is a process that has not ended ({node.get('process_state')})",
        )
    _check(isinstance(node.get("files"), list), f"{what} has no list of files")
    for entry in node["files"]:
        _check(
            isinstance(entry, list)
            and len(entry) == 3
            and isinstance(entry[2], int)
            and _is_sha256(entry[1]),
            f"{what} has a bad file entry",
        )
        try:
            checked_relative(entry[0])
        except UnsafePathError as exc:
            raise _Damaged(f"{what}: {exc}") from None


def check_log(log: dict[str, Any]) -> None:
    """A log row has the shape an archive's have, or :class:`_Damaged`."""
    _check(_is_uuid(log.get("uuid")), "a log message has no valid UUID")
    _strings(log, "a log message", "node", "levelname", "message")
    _check(isinstance(log.get("details", {}), dict), "a log message has bad details")
    parse_time(log.get("time"), "a log message")


MIB = 1024 * 1024
GIB = 1024 * MIB
#: Entries this small are not checked for their compression ratio: they cannot bomb.
_RATIO_FLOOR = MIB
#: metadata.json holds a few counts.
_MAX_METADATA = MIB


@dataclass(frozen=True)
class ArchiveLimits:
    """How much an archive may unpack to; an archive past one is refused before anything is
    written. Sizes in bytes."""

    #: ``data.json`` is read a row at a time, so its size does not bound the memory an
    #: import takes; this bounds the time it takes.
    max_data_size: int = 256 * MIB
    #: One row of ``data.json`` (a node with its attributes, a log message...), as held in
    #: memory, about; also its longest string. An import holds a few rows at a time.
    max_row_size: int = 16 * MIB
    #: Everything the archive unpacks to: ``data.json`` and the file contents.
    max_total_size: int = 64 * GIB
    #: Most uncompressed bytes per compressed byte of an entry past 1 MiB. Deflate reaches
    #: about 1,000 on repeated bytes, which only a zip bomb or a file of one repeated byte
    #: has; honest JSON and outputs stay far below 100.
    max_ratio: int = 100


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return ""


@dataclass
class ArchiveContent:
    """An archive read and checked, its rows and blobs still in the zip file: what the
    checks between rows need, from :class:`RowChecker`."""

    path: Path
    metadata: dict[str, Any]
    checked: RowChecker
    limits: ArchiveLimits

    @property
    def blobs(self) -> dict[str, int]:
        """``{sha256: size}`` of every file content, checked against what the zip file
        holds."""
        return self.checked.blobs

    def rows(
        self, archive: zipfile.ZipFile, *sections: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(section, row)`` of the rows of ``sections`` in ``data.json``, read again from
        ``archive`` a row at a time; :class:`ArchiveError` when it no longer matches the
        checksum the checks read (at the end: what was made of its rows must then be
        undone)."""
        try:
            yield from _stream(archive, self.metadata, self.limits, sections)
        except (*_ZIP_ERRORS, ArchiveRowTooBig) as exc:
            raise ArchiveError(
                f"{self.path} changed while it was imported ({exc}); import it again."
            ) from None


class BoundedReader:
    """Reads a zip entry and refuses it when it unpacks to more than ``size`` bytes, or, at
    its end, to fewer or to other bytes than ``sha256`` (when given).

    zipfile reads no more than an entry's declared compressed size, so bounding what comes
    out bounds the compression ratio too, whatever the entry's header claims.
    """

    def __init__(self, handle: ByteSource, size: int, what: str, sha256: str | None = None):
        self._handle, self._size, self._what, self._sha256 = handle, size, what, sha256
        self._digest = hashlib.sha256()
        self._read = 0

    def read(self, count: int = -1) -> bytes:
        if count is None or count < 0:
            return b"".join(iter(lambda: self.read(_READ), b""))
        chunk = self._handle.read(min(count, self._size - self._read + 1))
        self._read += len(chunk)
        if self._read > self._size:
            raise _Damaged(f"{self._what} unpacks to more than the {self._size} bytes it claims")
        self._digest.update(chunk)
        if not chunk and count:
            self._finish()
        return chunk

    def _finish(self) -> None:
        _check(
            self._read == self._size,
            f"{self._what} unpacks to {self._read} bytes, not the {self._size} it claims",
        )
        _check(
            self._sha256 is None or self._digest.hexdigest() == self._sha256,
            f"{self._what} does not match its hash",
        )

    @property
    def sha256(self) -> str:
        """The SHA-256 of what was read so far."""
        return self._digest.hexdigest()


def _entry(archive: zipfile.ZipFile, name: str, what: str) -> zipfile.ZipInfo:
    try:
        return archive.getinfo(name)
    except KeyError:
        raise _Damaged(f"{what} is missing") from None


def _refuse_bomb(path: Path, info: zipfile.ZipInfo, limits: ArchiveLimits) -> None:
    """Refuse an entry whose declared sizes say it is compressed past any honest ratio."""
    if info.file_size <= _RATIO_FLOOR:
        return
    ratio = info.file_size / max(info.compress_size, 1)
    if ratio > limits.max_ratio:
        raise ArchiveError(
            f"{path} is refused: its entry {info.filename} unpacks {ratio:.0f} times its "
            f"compressed size ({_size(info.file_size)} from {_size(info.compress_size)}), past "
            f"the limit of {limits.max_ratio}; if you trust it, raise it with --max-ratio. "
            "Nothing was imported."
        )


def _over(path: Path, what: str, size: int, limit: int, option: str) -> ArchiveError:
    return ArchiveError(
        f"{path} is refused: {what} unpacks to {_size(size)}, past the limit of {_size(limit)}; "
        f"if you trust it, raise it with {option}. Nothing was imported."
    )


def _open(path: Path) -> zipfile.ZipFile:
    if not path.is_file():
        raise ArchiveError(f"No archive file {path}; check the name.")
    try:
        return zipfile.ZipFile(path)
    except _ZIP_ERRORS as exc:
        raise ArchiveError(
            f"{path} is not a veglia archive, or is damaged: it is not a whole zip file "
            f"({exc}). Copy it again, or write it again with `veglia archive create`. "
            "Nothing was imported."
        ) from None


def _read_metadata(archive: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    try:
        info = archive.getinfo(METADATA)
    except KeyError:
        raise ArchiveError(
            f"{path} is not a veglia archive: it has no {METADATA}. Make one with "
            "`veglia archive create`. Nothing was imported."
        ) from None
    _check(
        info.file_size <= _MAX_METADATA,
        f"{METADATA} unpacks to {_size(info.file_size)}, where an archive's holds a few lines",
    )
    with archive.open(info) as handle:
        metadata = _json(BoundedReader(handle, info.file_size, METADATA).read(), METADATA)
    if not isinstance(metadata, dict) or metadata.get("format") != ARCHIVE_FORMAT:
        raise ArchiveError(
            f"{path} is not a veglia archive (its {METADATA} does not say so). Nothing was "
            "imported."
        )
    version = metadata.get("version")
    if not isinstance(version, int) or version > ARCHIVE_VERSION:
        raise ArchiveError(
            f"{path} was written by a newer veglia (archive version {version}; this release "
            f"reads up to {ARCHIVE_VERSION}). Upgrade veglia to import it."
        )
    return metadata


def _stream(
    archive: zipfile.ZipFile, metadata: dict[str, Any], limits: ArchiveLimits, sections: Any
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(section, row)`` of ``data.json``'s rows in ``sections``; at the end, checks it
    unpacked to its declared size and to the checksum in ``metadata``."""
    info = _entry(archive, DATA, DATA)
    with archive.open(info) as handle:
        reader = BoundedReader(handle, info.file_size, DATA)
        for section, _, row in rows(reader, sections, limits.max_row_size):
            yield section, row
        while reader.read(_READ):  # the parser may stop before the end of the file
            pass
    _check(
        reader.sha256 == metadata.get("data_sha256"),
        f"{DATA} does not match the checksum in {METADATA}",
    )


def _read_checked(archive: zipfile.ZipFile, path: Path, limits: ArchiveLimits) -> ArchiveContent:
    metadata = _read_metadata(archive, path)
    info = _entry(archive, DATA, DATA)
    if info.file_size > limits.max_data_size:
        raise _over(path, DATA, info.file_size, limits.max_data_size, "--max-data-size")
    _refuse_bomb(path, info, limits)
    checked = RowChecker()
    try:
        for section, row in _stream(archive, metadata, limits, SECTIONS):
            checked.check(section, row)
    except ArchiveRowTooBig as exc:
        where = f"row {exc.number} of {exc.section} in {DATA}" if exc.number else DATA
        raise ArchiveError(
            f"{path} is refused: {where} holds more than {_size(exc.limit)}, the limit for one "
            "row (or one text in it); if you trust it, raise it with --max-row-size. Nothing "
            "was imported."
        ) from None
    checked.finish()
    blobs = checked.blobs
    entries = {
        sha256: _entry(archive, BLOBS + sha256, f"the file content {sha256}") for sha256 in blobs
    }
    total = info.file_size + sum(entry.file_size for entry in entries.values())
    if total > limits.max_total_size:
        raise _over(path, "it", total, limits.max_total_size, "--max-size")
    for sha256, entry in entries.items():
        _check(
            entry.file_size == blobs[sha256],
            f"the file content {sha256} is {entry.file_size} bytes in the zip file, "
            f"{blobs[sha256]} in {DATA}",
        )
        _refuse_bomb(path, entry, limits)
    for sha256, entry in entries.items():
        with archive.open(entry) as handle:
            reader = BoundedReader(handle, blobs[sha256], f"the file content {sha256}", sha256)
            while reader.read(_READ):
                pass
    return ArchiveContent(path, metadata, checked, limits)


@contextmanager
def opened_archive(
    path: Path | str, limits: ArchiveLimits | None = None
) -> Iterator[tuple[ArchiveContent, zipfile.ZipFile]]:
    """The archive read and checked within ``limits`` (:class:`ArchiveError` saying what is
    wrong), and its zip file still open: the contents copied from it come from the file
    checked, even if ``path`` is replaced meanwhile. Memory: a row of ``data.json`` and
    one chunk of a file content at a time, and what the checks between rows need (a few
    short strings per node and link)."""
    path = Path(path)
    with _open(path) as archive:
        try:
            content = _read_checked(archive, path, limits or ArchiveLimits())
        except _ZIP_ERRORS as exc:  # ValueError (_Damaged) among them
            raise ArchiveError(
                f"{path} is damaged: {exc}. Copy it again, or write it again with "
                "`veglia archive create`. Nothing was imported."
            ) from None
        yield content, archive


def read_archive(path: Path | str, limits: ArchiveLimits | None = None) -> ArchiveContent:
    """Read and check the whole archive within ``limits``; :class:`ArchiveError` saying what
    is wrong."""
    with opened_archive(path, limits) as (content, _):
        return content


def inspect_archive(path: Path | str, limits: ArchiveLimits | None = None) -> dict[str, Any]:
    """What the archive holds, read and checked as an import would (nothing is written):
    its format, version, the veglia that wrote it and when, the rows of each section
    (``counts``), its nodes by node type (``node_types``), and its file contents (``files``,
    ``bytes``). :class:`ArchiveError` saying what is wrong with it."""
    try:
        content = read_archive(path, limits)
    except ArchiveError as exc:
        # The reader's messages are written for an import; an inspection imports nothing.
        exc.args = (str(exc).removesuffix(" Nothing was imported."),)
        raise
    metadata = content.metadata
    node_types: dict[str, int] = {}
    for node_type in content.checked.nodes.values():
        node_types[node_type] = node_types.get(node_type, 0) + 1
    return {
        "format": metadata["format"],
        "version": metadata["version"],
        "veglia_version": metadata.get("veglia_version"),
        "created": metadata.get("created"),
        "counts": dict(content.checked.counts),
        "node_types": dict(sorted(node_types.items())),
        "files": len(content.blobs),
        "bytes": sum(content.blobs.values()),
    }


# -- writing ------------------------------------------------------------------------------------
