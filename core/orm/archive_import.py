"""Importing an archive (see :mod:`veglia.orm.archive` for its format) into this profile.

Everything is checked before anything is written: the archive's own checksum of its rows,
the SHA-256 of every file content, the rows' shape and references. A damaged archive is
refused whole. Then the contents go into the repository, and the rows into the database in
one transaction.

Nodes keep their UUIDs; a node whose UUID is here already is skipped (so importing the same
archive again adds nothing), and links are added only to new nodes. Computers and codes are
matched by label and created when missing (not configured: `veglia computer configure`
before running jobs on them); users by email. A group is matched by UUID and gets the
archive's nodes it lacks; a new group whose label is taken gets ``label_1`` (``_2``, ...).
"""

from __future__ import annotations

import hashlib
import json
import uuid as uuid_module
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from veglia.exceptions import ArchiveError, UnsafePathError
from veglia.manage import get_storage
from veglia.orm.archive import (
    ARCHIVE_FORMAT,
    ARCHIVE_VERSION,
    BLOBS,
    DATA,
    METADATA,
    is_process,
)
from veglia.orm.attributes import CACHED_FROM, CODE
from veglia.orm.process_nodes import TERMINAL_STATES
from veglia.relative_paths import checked_relative
from veglia.storage import models

__all__ = ["ImportSummary", "import_archive", "read_archive"]

_CHUNK = 500
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


@dataclass
class ImportSummary:
    """What an import added, and what it found here already."""

    path: Path
    nodes_new: int = 0
    nodes_present: int = 0
    links: int = 0
    logs: int = 0
    files: int = 0
    groups_new: list[str] = field(default_factory=list)
    groups_renamed: list[tuple[str, str]] = field(default_factory=list)
    group_members: int = 0
    computers_created: list[str] = field(default_factory=list)
    codes_created: list[str] = field(default_factory=list)
    users_created: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.nodes_new or self.links or self.logs or self.groups_new or self.group_members
        )


# -- reading and checking ------------------------------------------------------------------
# What is wrong with a damaged archive is raised as a ValueError saying it in a few words,
# and reported by read_archive as an ArchiveError.
_Damaged = ValueError


def _no_constants(name: str) -> Any:
    raise _Damaged(f"{name} is not a JSON number")


def _json(content: bytes, name: str) -> Any:
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


def _time(value: Any, what: str) -> datetime:
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


def _validate(data: Any) -> None:
    """The rows have the shape and references an archive's rows have, or :class:`_Damaged`."""
    _check(isinstance(data, dict), "data.json is not an object")
    for key in ("users", "computers", "codes", "nodes", "links", "logs", "groups"):
        _check(isinstance(data.get(key), list), f"data.json has no list {key!r}")
        _check(all(isinstance(row, dict) for row in data[key]), f"{key} are not all objects")
    emails = set()
    for user in data["users"]:
        _strings(user, "a user", "email")
        emails.add(user["email"])
    computers = set()
    for computer in data["computers"]:
        what = f"computer {computer.get('label')!r}"
        _strings(computer, what, "label", "hostname", "scheduler_type", "transport_type")
        _check(_is_uuid(computer.get("uuid")), f"{what} has no valid UUID")
        _check(isinstance(computer.get("properties", {}), dict), f"{what}: bad properties")
        computers.add(computer["uuid"])
    for code in data["codes"]:
        what = f"code {code.get('label')!r}"
        _strings(code, what, "label", "executable", optional=["default_calc_job_plugin"])
        _check(code.get("computer") in computers, f"{what} is on a computer not in the archive")
        _check(isinstance(code.get("pk"), int), f"{what} has no pk")
    nodes = set()
    for node in data["nodes"]:
        what = f"node {node.get('uuid')!r}"
        _check(_is_uuid(node.get("uuid")), f"{what} has no valid UUID")
        _check(node["uuid"] not in nodes, f"{what} is in the archive twice")
        nodes.add(node["uuid"])
        _strings(node, what, "node_type", optional=["process_type", "process_state"])
        _check(node["node_type"] != "selftest", f"{what} is a self-test record")
        _time(node.get("ctime"), what)
        _time(node.get("mtime"), what)
        _check(node.get("user") is None or node["user"] in emails, f"{what} has an unknown user")
        _check(
            node.get("computer") is None or node["computer"] in computers,
            f"{what} is on a computer not in the archive",
        )
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
                isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], int),
                f"{what} has a bad file entry",
            )
            try:
                checked_relative(entry[0])
            except UnsafePathError as exc:
                raise _Damaged(f"{what}: {exc}") from None
            _check(_is_sha256(entry[1]), f"{what} has a file without a valid SHA-256")
    for link in data["links"]:
        _strings(link, "a link", "label", "link_type")
        _check(link["link_type"] in models.LINK_TYPES, f"a link has type {link['link_type']!r}")
        _check(
            link.get("input") in nodes and link.get("output") in nodes,
            "a link names a node not in the archive",
        )
    for log in data["logs"]:
        _check(_is_uuid(log.get("uuid")), "a log message has no valid UUID")
        _check(log.get("node") in nodes, "a log message is of a node not in the archive")
        _strings(log, "a log message", "levelname", "message")
        _check(isinstance(log.get("details", {}), dict), "a log message has bad details")
        _time(log.get("time"), "a log message")
    for group in data["groups"]:
        what = f"group {group.get('label')!r}"
        _check(_is_uuid(group.get("uuid")), f"{what} has no valid UUID")
        _strings(group, what, "label")
        _check(bool(group["label"].strip()), f"{what} has an empty label")
        if group.get("time") is not None:
            _time(group["time"], what)
        _check(
            isinstance(group.get("nodes"), list) and set(group["nodes"]) <= nodes,
            f"{what} holds nodes not in the archive",
        )


@dataclass
class ArchiveContent:
    """An archive read and checked, its blobs still in the zip file."""

    path: Path
    metadata: dict[str, Any]
    data: dict[str, Any]
    blobs: list[str]


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


def _read_checked(archive: zipfile.ZipFile, path: Path) -> ArchiveContent:
    try:
        metadata = _json(archive.read(METADATA), METADATA)
    except KeyError:
        raise ArchiveError(
            f"{path} is not a veglia archive: it has no {METADATA}. Make one with "
            "`veglia archive create`. Nothing was imported."
        ) from None
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
    try:
        text = archive.read(DATA)
    except KeyError:
        raise _Damaged(f"it has no {DATA}") from None
    _check(
        hashlib.sha256(text).hexdigest() == metadata.get("data_sha256"),
        f"{DATA} does not match the checksum in {METADATA}",
    )
    data = _json(text, DATA)
    _validate(data)
    blobs = sorted({entry[1] for node in data["nodes"] for entry in node["files"]})
    names = set(archive.namelist())
    for sha256 in blobs:
        _check(BLOBS + sha256 in names, f"the file content {sha256} is missing")
        digest = hashlib.sha256()
        with archive.open(BLOBS + sha256) as handle:
            while chunk := handle.read(_READ):
                digest.update(chunk)
        _check(digest.hexdigest() == sha256, f"the file content {sha256} does not match its hash")
    return ArchiveContent(path, metadata, data, blobs)


def read_archive(path: Path | str) -> ArchiveContent:
    """Read and check the whole archive; :class:`ArchiveError` saying what is wrong."""
    path = Path(path)
    with _open(path) as archive:
        try:
            return _read_checked(archive, path)
        except _ZIP_ERRORS as exc:  # ValueError (_Damaged) among them
            raise ArchiveError(
                f"{path} is damaged: {exc}. Copy it again, or write it again with "
                "`veglia archive create`. Nothing was imported."
            ) from None


# -- writing ------------------------------------------------------------------------------------
def _existing(session: Any, column: Any, values: list[Any]) -> dict[Any, Any]:
    """``{value: row id}`` of the rows whose ``column`` is one of ``values``."""
    table = column.class_
    found = {}
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        query = sa.select(column, table.id).where(column.in_(chunk))
        found.update({row[0]: row[1] for row in session.execute(query)})
    return found


def _free_label(session: Any, label: str) -> str:
    taken = set(
        session.scalars(sa.select(models.Group.label).where(models.Group.label.startswith(label)))
    )
    number = 1
    while f"{label}_{number}" in taken:
        number += 1
    return f"{label}_{number}"


def _remap_attributes(
    attributes: dict[str, Any], codes: dict[int, int], nodes: dict[str, int]
) -> dict[str, Any]:
    """The ``code`` and ``cached_from`` attributes name pks of the other profile: here's."""
    code = attributes.get(CODE)
    if isinstance(code, dict) and code.get("pk") in codes:
        attributes[CODE] = {**code, "pk": codes[code["pk"]]}
    cached = attributes.get(CACHED_FROM)
    if isinstance(cached, dict) and cached.get("uuid") in nodes:
        attributes[CACHED_FROM] = {**cached, "pk": nodes[cached["uuid"]]}
    return attributes


def import_archive(path: Path | str) -> ImportSummary:
    """Import the archive ``path`` into the active profile; what it added."""
    content = read_archive(path)
    data = content.data
    summary = ImportSummary(content.path)
    storage = get_storage()

    with storage.session() as session:
        present = _existing(session, models.Node.uuid, [n["uuid"] for n in data["nodes"]])
    new_nodes = [node for node in data["nodes"] if node["uuid"] not in present]
    summary.nodes_present = len(data["nodes"]) - len(new_nodes)

    # Contents first, outside the transaction (a database repository writes in sessions of
    # its own): a content stored for nothing is harmless, a node without its content is not.
    needed = sorted({entry[1] for node in new_nodes for entry in node["files"]})
    with zipfile.ZipFile(content.path) as archive:
        for sha256 in needed:
            if storage.repository.has(sha256):
                continue
            with archive.open(BLOBS + sha256) as handle:
                stored, _ = storage.repository.put_stream(handle)
            if stored != sha256:  # the file changed since it was checked
                raise ArchiveError(
                    f"{content.path} changed while it was imported; import it again."
                )
            summary.files += 1

    try:
        with storage.session() as session:
            _write_rows(session, data, present, new_nodes, summary)
    except sa.exc.IntegrityError:
        raise ArchiveError(
            f"Some rows of {content.path} were added here by someone else while it was "
            "imported; nothing was imported. Import it again."
        ) from None
    return summary


def _write_rows(
    session: Any,
    data: dict[str, Any],
    present: dict[str, int],
    new_nodes: list[dict[str, Any]],
    summary: ImportSummary,
) -> None:
    """Users, computers, codes, nodes, their files, links, logs and groups, in ``session``."""
    users = _import_users(session, data["users"], summary)
    computers = _import_computers(session, data["computers"], summary)
    codes = _import_codes(session, data["codes"], computers, summary)
    ids = _import_nodes(session, new_nodes, present, users, computers, codes)
    summary.nodes_new = len(new_nodes)
    new = {node["uuid"] for node in new_nodes}
    for link in data["links"]:
        if link["input"] in new or link["output"] in new:  # the others are here already
            session.add(
                models.Link(
                    input_id=ids[link["input"]],
                    output_id=ids[link["output"]],
                    label=link["label"],
                    link_type=link["link_type"],
                )
            )
            summary.links += 1
    logs = [log for log in data["logs"] if log["node"] in new]
    known_logs = _existing(session, models.Log.uuid, [log["uuid"] for log in logs])
    for log in logs:
        if log["uuid"] not in known_logs:
            session.add(
                models.Log(
                    uuid=log["uuid"],
                    node_id=ids[log["node"]],
                    time=_time(log["time"], "log"),
                    levelname=log["levelname"],
                    loggername=log.get("loggername") or "",
                    message=log["message"],
                    details=log.get("details") or {},
                )
            )
            summary.logs += 1
    session.flush()
    _import_groups(session, data["groups"], ids, users, summary)


def _import_users(session: Any, users: list[dict], summary: ImportSummary) -> dict[str, int]:
    """``{email: user id here}``, creating the missing users."""
    found = _existing(session, models.User.email, [user["email"] for user in users])
    for user in users:
        if user["email"] in found:
            continue
        row = models.User(
            email=user["email"],
            first_name=user.get("first_name") or "",
            last_name=user.get("last_name") or "",
            institution=user.get("institution") or "",
        )
        session.add(row)
        session.flush()
        found[user["email"]] = row.id
        summary.users_created.append(user["email"])
    return found


def _import_computers(
    session: Any, computers: list[dict], summary: ImportSummary
) -> dict[str, int]:
    """``{archive UUID: computer id here}``: matched by label, created when missing (with
    the archive's UUID unless it is taken), without authinfo."""
    by_label = _existing(session, models.Computer.label, [c["label"] for c in computers])
    uuids_here = _existing(session, models.Computer.uuid, [c["uuid"] for c in computers])
    found: dict[str, int] = {}
    for computer in computers:
        if computer["label"] in by_label:
            found[computer["uuid"]] = by_label[computer["label"]]
            continue
        row = models.Computer(
            label=computer["label"],
            hostname=computer["hostname"],
            description=computer.get("description") or "",
            scheduler_type=computer["scheduler_type"],
            transport_type=computer["transport_type"],
            properties=computer.get("properties") or {},
        )
        if computer["uuid"] not in uuids_here:
            row.uuid = computer["uuid"]
        session.add(row)
        session.flush()
        found[computer["uuid"]] = by_label[computer["label"]] = row.id
        summary.computers_created.append(computer["label"])
    return found


def _import_codes(
    session: Any, codes: list[dict], computers: dict[str, int], summary: ImportSummary
) -> dict[int, int]:
    """``{pk in the archive's profile: code pk here}``: matched by label on their computer,
    created when missing."""
    found: dict[int, int] = {}
    labels = dict(session.execute(sa.select(models.Computer.id, models.Computer.label)).all())
    for code in codes:
        computer_id = computers[code["computer"]]
        pk = session.scalar(
            sa.select(models.Code.id).where(
                models.Code.label == code["label"], models.Code.computer_id == computer_id
            )
        )
        if pk is None:
            row = models.Code(
                label=code["label"],
                computer_id=computer_id,
                executable=code["executable"],
                default_calc_job_plugin=code.get("default_calc_job_plugin"),
                description=code.get("description") or "",
                prepend_text=code.get("prepend_text") or "",
                append_text=code.get("append_text") or "",
            )
            if not _existing(session, models.Code.uuid, [code["uuid"]]):
                row.uuid = code["uuid"]
            session.add(row)
            session.flush()
            pk = row.id
            summary.codes_created.append(f"{code['label']}@{labels[computer_id]}")
        found[code["pk"]] = pk
    return found


def _import_nodes(
    session: Any,
    new_nodes: list[dict],
    present: dict[str, int],
    users: dict[str, int],
    computers: dict[str, int],
    codes: dict[int, int],
) -> dict[str, int]:
    """Insert the new nodes and their file records; ``{UUID: node id here}`` of every node
    of the archive."""
    rows = []
    for node in new_nodes:
        row = models.Node(
            uuid=node["uuid"],
            node_type=node["node_type"],
            process_type=node.get("process_type"),
            label=node.get("label") or "",
            description=node.get("description") or "",
            ctime=_time(node["ctime"], "node"),
            mtime=_time(node["mtime"], "node"),
            user_id=users.get(node.get("user")),
            computer_id=computers.get(node.get("computer")),
            attributes=node["attributes"],
            extras=node["extras"],
            process_state=node.get("process_state"),
            exit_status=node.get("exit_status"),
            exit_message=node.get("exit_message"),
        )
        session.add(row)
        rows.append((node, row))
    session.flush()
    ids = dict(present) | {node["uuid"]: row.id for node, row in rows}
    for node, row in rows:
        attributes = _remap_attributes(dict(node["attributes"]), codes, ids)
        if attributes != node["attributes"]:
            # Set with the attributes, the time is kept rather than made "now".
            row.attributes, row.mtime = attributes, _time(node["mtime"], "node")
        for path, sha256, size in node["files"]:
            session.add(
                models.RepositoryFile(
                    node_id=row.id, path=checked_relative(path), sha256=sha256, size=size
                )
            )
    return ids


def _import_groups(
    session: Any,
    groups: list[dict],
    ids: dict[str, int],
    users: dict[str, int],
    summary: ImportSummary,
) -> None:
    """Each group by UUID, created when missing (``label_1`` when its label is taken), with
    the archive's nodes it lacks."""
    for group in groups:
        group_id = session.scalar(
            sa.select(models.Group.id).where(models.Group.uuid == group["uuid"])
        )
        if group_id is None:
            label = group["label"]
            if session.scalar(sa.select(models.Group.id).where(models.Group.label == label)):
                label = _free_label(session, label)
                summary.groups_renamed.append((group["label"], label))
            row = models.Group(
                uuid=group["uuid"],
                label=label,
                description=group.get("description") or "",
                type_string=group.get("type_string") or "core",
                user_id=users.get(group.get("user")),
            )
            if group.get("time"):
                row.time = _time(group["time"], "group")
            session.add(row)
            session.flush()
            group_id = row.id
            summary.groups_new.append(label)
        members = set(
            session.scalars(
                sa.select(models.GroupNode.node_id).where(models.GroupNode.group_id == group_id)
            )
        )
        for uuid in dict.fromkeys(group["nodes"]):
            if ids[uuid] not in members:
                session.add(models.GroupNode(group_id=group_id, node_id=ids[uuid]))
                summary.group_members += 1
