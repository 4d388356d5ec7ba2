"""Importing an archive (see :mod:`veglia.orm.archive` for its format) into this profile.

Everything is checked before anything is written (:mod:`veglia.orm.archive_read`): the
archive's own checksum of its rows, the size and SHA-256 of every file content, the sizes
it unpacks to, the rows' shape and references. A damaged archive is refused whole. Then the
contents go into the repository, and the rows into the database in one transaction.

Nodes keep their UUIDs; a node whose UUID is here already is skipped (so importing the same
archive again adds nothing). An import never changes the provenance of a node here already
(:mod:`veglia.orm.archive_links`): its links must be those stored, or the archive is
refused. Computers and codes are matched by label and created when missing (not
configured: `veglia computer configure` before running jobs on them); users by email.
A group is matched by UUID and gets the archive's nodes it lacks; a new group whose label
is taken gets ``label_1`` (``_2``, ...).
"""

from __future__ import annotations

import zipfile
import zlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from veglia.exceptions import ArchiveError
from veglia.manage import get_storage
from veglia.orm.archive import BLOBS
from veglia.orm.archive_links import check_links
from veglia.orm.archive_read import (
    ArchiveContent,
    ArchiveLimits,
    BoundedReader,
    check_log,
    check_node,
    opened_archive,
    parse_time,
    read_archive,
)
from veglia.orm.attributes import CACHED_FROM, CODE
from veglia.progress_report import ProgressReport, no_progress
from veglia.relative_paths import checked_relative
from veglia.storage import models

__all__ = ["ArchiveLimits", "ImportSummary", "import_archive", "read_archive"]

_CHUNK = 500


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
            self.nodes_new
            or self.links
            or self.logs
            or self.groups_new
            or self.group_members
            or self.computers_created
            or self.codes_created
            or self.users_created
        )


def _existing(session: Any, column: Any, values: list[Any]) -> dict[Any, Any]:
    """``{value: row id}`` of the rows whose ``column`` is one of ``values``."""
    table = column.class_
    found = {}
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        query = sa.select(column, table.id).where(column.in_(chunk))
        found.update({row[0]: row[1] for row in session.execute(query)})
    return found


def _pk_of(found: dict[str, int], key: str | None) -> int | None:
    """The new pk of an archive's user or computer (None for a row without one)."""
    return None if key is None else found.get(key)


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


def import_archive(
    path: Path | str, limits: ArchiveLimits | None = None, progress: ProgressReport = no_progress
) -> ImportSummary:
    """Import the archive ``path`` into the active profile; what it added. Refused whole,
    before anything is written, when it is damaged, past ``limits``, or would change the
    provenance of a node here already.

    ``data.json`` is read twice, a row at a time: once to check it all, once to write it.
    """
    with opened_archive(path, limits) as (content, archive):
        checked = content.checked
        summary = ImportSummary(content.path)
        storage = get_storage()
        with storage.session() as session:
            present = _existing(session, models.Node.uuid, list(checked.nodes))
            check_links(session, content.path, checked.nodes, checked.links, present)
        summary.nodes_present = len(present)
        new_contents = {
            sha256
            for uuid, contents in checked.files.items()
            if uuid not in present
            for sha256 in contents
        }
        _copy_contents(archive, content, sorted(new_contents), summary, progress)
        try:
            with storage.session() as session:
                _write_rows(session, content, archive, present, summary, progress)
        except sa.exc.IntegrityError:
            raise ArchiveError(
                f"Some rows of {content.path} were added here by someone else while it was "
                "imported; nothing was imported. Import it again."
            ) from None
        except ValueError as exc:  # a row checked again that no longer passes
            raise ArchiveError(
                f"{content.path} changed while it was imported ({exc}); nothing was imported. "
                "Import it again."
            ) from None
    return summary


def _copy_contents(
    archive: zipfile.ZipFile,
    content: ArchiveContent,
    contents: list[str],
    summary: ImportSummary,
    progress: ProgressReport,
) -> None:
    """The new nodes' file contents into the repository, each checked again as it is copied
    (size and SHA-256, in chunks): one that no longer matches is not stored.

    Outside the rows' transaction (a database repository writes in sessions of its own): a
    content stored for nothing is harmless, a node without its content is not.
    """
    repository = get_storage().repository
    for done, sha256 in enumerate(contents):
        progress("copying files", done, len(contents))
        if repository.keep(sha256):  # touched: `storage maintain` leaves it for now
            continue
        what = f"the file content {sha256}"
        try:
            with archive.open(BLOBS + sha256) as handle:
                repository.put_stream(BoundedReader(handle, content.blobs[sha256], what, sha256))
        except (ValueError, OSError, zipfile.BadZipFile, zlib.error) as exc:
            raise ArchiveError(
                f"{content.path} changed while it was imported ({exc}); import it again."
            ) from None
        summary.files += 1
    progress("copying files", len(contents), len(contents))


def _batches(
    rows: Iterator[tuple[str, dict[str, Any]]],
) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """The rows by section, in batches of at most _CHUNK rows."""
    batch: dict[str, list[dict[str, Any]]] = defaultdict(list)
    count = 0
    for section, row in rows:
        batch[section].append(row)
        count += 1
        if count == _CHUNK:
            yield batch
            batch, count = defaultdict(list), 0
    if count:
        yield batch


def _write_rows(
    session: Any,
    content: ArchiveContent,
    archive: zipfile.ZipFile,
    present: dict[str, int],
    summary: ImportSummary,
    progress: ProgressReport,
) -> None:
    """Users, computers, codes, nodes, their files, links, logs and groups, in ``session``,
    read a batch of rows at a time from ``data.json``: the rows a row refers to are written
    before it, whatever their order in the file."""
    users: dict[str, int] = {}
    computers: dict[str, int] = {}
    codes: dict[int, int] = {}
    new = len(present) < len(content.checked.nodes)

    def rows(*sections: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The rows of those of ``sections`` that have any: data.json is not read again for
        nothing."""
        wanted = [section for section in sections if content.checked.counts[section]]
        return content.rows(archive, *wanted) if wanted else iter(())

    for batch in _batches(rows("users", "computers")):
        _import_users(session, batch["users"], users, summary)
        _import_computers(session, batch["computers"], computers, summary)
    labels = dict(session.execute(sa.select(models.Computer.id, models.Computer.label)).all())
    for batch in _batches(rows("codes")):
        _import_codes(session, batch["codes"], computers, labels, codes, summary)
    ids = dict(present)
    # The nodes whose ``cached_from`` names a node written after them: set at the end.
    cached_later: list[tuple[int, str]] = []
    total, read = len(content.checked.nodes), 0
    for batch in _batches(rows("nodes") if new else iter(())):
        progress("writing nodes", read, total)
        read += len(batch["nodes"])
        new_nodes = [node for node in batch["nodes"] if node["uuid"] not in present]
        _import_nodes(
            session, new_nodes, users, computers, codes, ids, content.checked.nodes, cached_later
        )
        summary.nodes_new += len(new_nodes)
    node = models.Node
    for node_id, cached in cached_later:
        attributes = session.scalar(sa.select(node.attributes).where(node.id == node_id))
        attributes[CACHED_FROM] = {**attributes[CACHED_FROM], "pk": ids[cached]}
        # Set with the attributes, the time is kept rather than made "now".
        session.execute(
            sa.update(node)
            .where(node.id == node_id)
            .values(attributes=attributes, mtime=node.mtime)
        )
    # With no new node, no link or log message is new: only groups may gain members.
    for batch in _batches(rows("links", "logs", "groups") if new else rows("groups")):
        for link in batch["links"]:
            # check_links allowed only the links here already among those between old nodes.
            if link["input"] not in present or link["output"] not in present:
                session.add(
                    models.Link(
                        input_id=ids[link["input"]],
                        output_id=ids[link["output"]],
                        label=link["label"],
                        link_type=link["link_type"],
                    )
                )
                summary.links += 1
        _import_logs(session, batch["logs"], present, ids, summary)
        session.flush()
        _import_groups(session, batch["groups"], ids, users, summary)


def _import_logs(
    session: Any,
    logs: list[dict[str, Any]],
    present: dict[str, int],
    ids: dict[str, int],
    summary: ImportSummary,
) -> None:
    """The log messages of the new nodes, but those here already."""
    logs = [log for log in logs if log["node"] not in present]
    known_logs = _existing(session, models.Log.uuid, [log["uuid"] for log in logs])
    for log in logs:
        check_log(log)
        if log["uuid"] not in known_logs:
            session.add(
                models.Log(
                    uuid=log["uuid"],
                    node_id=ids[log["node"]],
                    time=parse_time(log["time"], "log"),
                    levelname=log["levelname"],
                    loggername=log.get("loggername") or "",
                    message=log["message"],
                    details=log.get("details") or {},
                )
            )
            summary.logs += 1


def _import_users(
    session: Any, users: list[dict[str, Any]], found: dict[str, int], summary: ImportSummary
) -> None:
    """Adds ``{email: user id here}`` to ``found``, creating the missing users."""
    found.update(_existing(session, models.User.email, [user["email"] for user in users]))
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


def _import_computers(
    session: Any, computers: list[dict[str, Any]], found: dict[str, int], summary: ImportSummary
) -> None:
    """Adds ``{archive UUID: computer id here}`` to ``found``: matched by label, created
    when missing (with the archive's UUID unless it is taken), without authinfo."""
    by_label = _existing(session, models.Computer.label, [c["label"] for c in computers])
    uuids_here = _existing(session, models.Computer.uuid, [c["uuid"] for c in computers])
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


def _import_codes(
    session: Any,
    codes: list[dict[str, Any]],
    computers: dict[str, int],
    labels: dict[int, str],
    found: dict[int, int],
    summary: ImportSummary,
) -> None:
    """Adds ``{pk in the archive's profile: code pk here}`` to ``found``: matched by label
    on their computer (``labels``: computer labels by id), created when missing."""
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


def _import_nodes(
    session: Any,
    new_nodes: list[dict[str, Any]],
    users: dict[str, int],
    computers: dict[str, int],
    codes: dict[int, int],
    ids: dict[str, int],
    archive_nodes: dict[str, str],
    cached_later: list[tuple[int, str]],
) -> None:
    """Insert the new nodes and their file records; adds their ``{UUID: node id here}`` to
    ``ids``, and to ``cached_later`` those whose ``cached_from`` names a node not yet
    written."""
    rows = []
    for node in new_nodes:
        check_node(node)  # as it was checked: the file is read again
        attributes = _remap_attributes(dict(node["attributes"]), codes, ids)
        row = models.Node(
            uuid=node["uuid"],
            node_type=node["node_type"],
            process_type=node.get("process_type"),
            label=node.get("label") or "",
            description=node.get("description") or "",
            ctime=parse_time(node["ctime"], "node"),
            mtime=parse_time(node["mtime"], "node"),
            user_id=_pk_of(users, node.get("user")),
            computer_id=_pk_of(computers, node.get("computer")),
            attributes=attributes,
            extras=node["extras"],
            process_state=node.get("process_state"),
            exit_status=node.get("exit_status"),
            exit_message=node.get("exit_message"),
        )
        session.add(row)
        rows.append((node, row))
    session.flush()
    for node, row in rows:
        ids[node["uuid"]] = row.id
        cached = row.attributes.get(CACHED_FROM)
        if (
            isinstance(cached, dict)
            and cached.get("uuid") in archive_nodes
            and cached.get("pk") != ids.get(cached["uuid"])
        ):  # names a node of the archive not written yet
            cached_later.append((row.id, cached["uuid"]))
        for path, sha256, size in node["files"]:
            session.add(
                models.RepositoryFile(
                    node_id=row.id, path=checked_relative(path), sha256=sha256, size=size
                )
            )


def _import_groups(
    session: Any,
    groups: list[dict[str, Any]],
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
                user_id=_pk_of(users, group.get("user")),
            )
            if group.get("time"):
                row.time = parse_time(group["time"], "group")
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
