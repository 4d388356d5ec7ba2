"""Archives: nodes with their provenance, in one portable file another profile imports.

An archive is a zip file:

- ``metadata.json``: ``{"format": "veglia-archive", "version": 1, "veglia_version", "created",
  "data_sha256", "counts"}``; ``data_sha256`` is the SHA-256 of ``data.json``.
- ``data.json``: the rows, by UUID (pks mean nothing in another profile): ``users`` (by
  email), ``computers`` and ``codes`` (matched by label on import), ``nodes`` (with their
  attributes, extras, state and ``files``: ``[path, sha256, size]``), ``links`` (input and
  output UUIDs), ``logs`` and ``groups`` (with their nodes' UUIDs).
- ``repo/<sha256>``: each file content once, named by its SHA-256.

What goes in follows AiiDA's export rules (:data:`veglia.orm.provenance.EXPORT_RULES`): for
a process, its inputs, what it created or returned, the processes it called and its caller;
for data, the process that created it; and so on from those. Processes that have not ended
are refused: their record is not final.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import veglia
from veglia.exceptions import ArchiveError, NotExistent, ProcessActiveError
from veglia.manage import get_storage
from veglia.orm.attributes import CODE
from veglia.orm.groups import load_group
from veglia.orm.process_nodes import TERMINAL_STATES
from veglia.orm.provenance import EXPORT_RULES, traverse
from veglia.progress_report import ProgressReport, no_progress
from veglia.storage import models
from veglia.storage.times import as_utc

__all__ = ["ARCHIVE_FORMAT", "ARCHIVE_VERSION", "ArchiveSummary", "create_archive"]

ARCHIVE_FORMAT = "veglia-archive"
ARCHIVE_VERSION = 1
METADATA = "metadata.json"
DATA = "data.json"
BLOBS = "repo/"
_CHUNK = 500
_COPY = 1024 * 1024


def iso(value: datetime | None) -> str | None:
    return as_utc(value).isoformat() if value is not None else None


def is_process(node_type: str) -> bool:
    return node_type == "process" or node_type.startswith("process.")


@dataclass(frozen=True)
class ArchiveSummary:
    """What an archive holds."""

    path: Path
    nodes: int
    processes: int
    links: int
    logs: int
    groups: int
    files: int
    bytes: int

    @property
    def data(self) -> int:
        return self.nodes - self.processes


def _chunks(values: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _starting_nodes(pks: Iterable[int], groups: Iterable[str | int]) -> tuple[set[int], list[Any]]:
    chosen = set(pks)
    with get_storage().session() as session:
        known = set()
        for chunk in _chunks(sorted(chosen)):
            known |= set(
                session.scalars(
                    sa.select(models.Node.id).where(
                        models.Node.id.in_(chunk), models.Node.node_type != "selftest"
                    )
                )
            )
    missing = sorted(chosen - known)
    if missing:
        raise NotExistent(f"No node with pk {', '.join(map(str, missing))}; no archive written.")
    loaded = [load_group(group) for group in dict.fromkeys(groups)]
    for group in loaded:
        chosen |= {node.pk for node in group.nodes}
    if not chosen:
        empty = ", ".join(repr(group.label) for group in loaded)
        raise ArchiveError(
            f"Nothing to put in the archive: group {empty} is empty. Name nodes (PK...) or a "
            "group that holds some (-G GROUP)."
            if loaded
            else "Nothing to put in the archive: name nodes (PK...) or groups (-G GROUP)."
        )
    return chosen, loaded


#: The columns each kind of row keeps in an archive (pks and ids are replaced by UUIDs).
_USER = ("email", "first_name", "last_name", "institution")
_COMPUTER = ("uuid", "label", "hostname", "description", "scheduler_type", "transport_type")
_CODE = (
    "uuid", "label", "executable", "default_calc_job_plugin", "description", "prepend_text",
    "append_text",
)  # fmt: skip
_NODE = ("uuid", "node_type", "process_type", "label", "description", "attributes", "extras")
_PROCESS = ("process_state", "exit_status", "exit_message")
_LOG = ("uuid", "levelname", "loggername", "message", "details")
_GROUP = ("uuid", "label", "description", "type_string")


def _plain(row: Any, columns: tuple[str, ...], **more: Any) -> dict[str, Any]:
    return {column: getattr(row, column) for column in columns} | more


def _node_rows(session: Any, ids: list[int]) -> list[models.Node]:
    """The nodes' rows, oldest first; refused when a process among them has not ended."""
    node = models.Node
    rows = []
    for chunk in _chunks(ids):
        rows += session.scalars(sa.select(node).where(node.id.in_(chunk)).order_by(node.id))
    active = [r for r in rows if is_process(r.node_type) and r.process_state not in TERMINAL_STATES]
    if active:
        named = ", ".join(f"{row.id} ({row.process_state})" for row in active[:10])
        raise ProcessActiveError(
            f"Process {named} has not ended, and an archive holds only finished records. "
            f"Wait until it ends (`veglia process watch {active[0].id}`) or kill it, then "
            "write the archive again."
        )
    return rows


def _node_records(
    session: Any, ids: list[int], uuid_of: dict[int, str]
) -> tuple[dict[int, list[list[Any]]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes' files (by node id), the links between them, and their logs."""
    link, log, record = models.Link, models.Log, models.RepositoryFile
    files: dict[int, list[list[Any]]] = {}
    links, logs = [], []
    for chunk in _chunks(ids):
        query: sa.Select[Any] = (
            sa.select(record).where(record.node_id.in_(chunk)).order_by(record.path)
        )
        for item in session.scalars(query):
            files.setdefault(item.node_id, []).append([item.path, item.sha256, item.size])
        query = sa.select(link).where(link.output_id.in_(chunk)).order_by(link.id)
        links += [
            {
                "input": uuid_of[item.input_id],
                "output": uuid_of[item.output_id],
                "label": item.label,
                "link_type": item.link_type,
            }
            for item in session.scalars(query)
            if item.input_id in uuid_of
        ]
        query = sa.select(log).where(log.node_id.in_(chunk)).order_by(log.id)
        logs += [
            _plain(item, _LOG, node=uuid_of[item.node_id], time=iso(item.time))
            for item in session.scalars(query)
        ]
    return files, links, logs


def collect(pks: Iterable[int], groups: Iterable[str | int] = ()) -> dict[str, Any]:
    """The rows an archive of these nodes and groups holds, as plain data (``data.json``)."""
    chosen, loaded_groups = _starting_nodes(pks, groups)
    ids = sorted(traverse(chosen, EXPORT_RULES))
    with get_storage().session() as session:
        rows = _node_rows(session, ids)
        uuid_of = {row.id: row.uuid for row in rows}
        files, links, logs = _node_records(session, ids, uuid_of)
        code_pks = {
            row.attributes[CODE].get("pk")
            for row in rows
            if isinstance((row.attributes or {}).get(CODE), dict)
        }
        codes = list(session.scalars(sa.select(models.Code).where(models.Code.id.in_(code_pks))))
        computer_ids = {row.computer_id for row in rows} | {code.computer_id for code in codes}
        computers = list(
            session.scalars(sa.select(models.Computer).where(models.Computer.id.in_(computer_ids)))
        )
        group_rows: list[models.Group] = []
        for group in loaded_groups:
            group_row = session.get(models.Group, group.pk)
            assert group_row is not None  # loaded above, in this session's transaction
            group_rows.append(group_row)
        user_ids = {row.user_id for row in rows} | {group.user_id for group in group_rows}
        users = list(session.scalars(sa.select(models.User).where(models.User.id.in_(user_ids))))
    # Keyed by optional ids: a node without a user or computer looks up None, finds None.
    email: dict[int | None, str] = {user.id: user.email for user in users}
    computer_uuid: dict[int | None, str] = {computer.id: computer.uuid for computer in computers}
    members = {
        group.pk: [uuid_of[node.pk] for node in group.nodes if node.pk in uuid_of]
        for group in loaded_groups
    }
    return {
        "users": [_plain(user, _USER) for user in users],
        "computers": [
            _plain(computer, _COMPUTER, properties=computer.properties or {})
            for computer in computers
        ],
        "codes": [
            _plain(
                code,
                _CODE,
                pk=code.id,  # what the jobs' ``code`` attribute names
                computer=computer_uuid[code.computer_id],
                ctime=iso(code.ctime),
            )
            for code in codes
        ],
        "nodes": [
            _plain(
                row,
                _NODE + _PROCESS,
                ctime=iso(row.ctime),
                mtime=iso(row.mtime),
                user=email.get(row.user_id),
                computer=computer_uuid.get(row.computer_id),
                files=files.get(row.id, []),
            )
            for row in rows
        ],
        "links": links,
        "logs": logs,
        "groups": [
            _plain(
                group,
                _GROUP,
                time=iso(group.time),
                user=email.get(group.user_id),
                nodes=members[group.id],
            )
            for group in group_rows
        ],
    }


def create_archive(
    path: Path | str,
    pks: Iterable[int] = (),
    groups: Iterable[str | int] = (),
    *,
    overwrite: bool = False,
    progress: ProgressReport = no_progress,
) -> ArchiveSummary:
    """Write the nodes ``pks`` and the groups ``groups`` (with their nodes), with their
    provenance, to the archive ``path``; the file appears whole or not at all."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise ArchiveError(
            f"{path} exists already; choose another name, or overwrite it with --force."
        )
    if not path.parent.is_dir():
        raise ArchiveError(f"Cannot write {path}: the folder {path.parent} does not exist.")
    data = collect(pks, groups)
    blobs = sorted({sha for node in data["nodes"] for _, sha, _ in node["files"]})
    text = json.dumps(data, sort_keys=True, allow_nan=False, ensure_ascii=False).encode()
    processes = sum(is_process(node["node_type"]) for node in data["nodes"])
    counts = {
        "nodes": len(data["nodes"]),
        "processes": processes,
        "links": len(data["links"]),
        "logs": len(data["logs"]),
        "groups": len(data["groups"]),
        "files": len(blobs),
    }
    metadata = {
        "format": ARCHIVE_FORMAT,
        "version": ARCHIVE_VERSION,
        "veglia_version": veglia.__version__,
        "created": datetime.now(timezone.utc).isoformat(),
        "data_sha256": hashlib.sha256(text).hexdigest(),
        "counts": counts,
    }
    repository = get_storage().repository
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    size = 0
    try:
        with zipfile.ZipFile(tmp_name, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(METADATA, json.dumps(metadata, indent=2, sort_keys=True))
            archive.writestr(DATA, text)
            for done, sha256 in enumerate(blobs):
                progress("writing files", done, len(blobs))
                with (
                    repository.open(sha256) as source,
                    archive.open(BLOBS + sha256, "w", force_zip64=True) as target,
                ):
                    shutil.copyfileobj(source, target, _COPY)
                size += archive.getinfo(BLOBS + sha256).file_size
        progress("writing files", len(blobs), len(blobs))
        os.replace(tmp_name, path)
    except OSError as exc:
        raise ArchiveError(f"Cannot write {path}: {exc.strerror or exc}.") from None
    finally:
        Path(tmp_name).unlink(missing_ok=True)
    return ArchiveSummary(
        path, counts["nodes"], processes, counts["links"], counts["logs"], counts["groups"],
        counts["files"], size,
    )  # fmt: skip
