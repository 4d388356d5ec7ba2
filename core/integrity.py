"""Are the stored files still what they were when they were stored? ``veglia verify`` and the
web view's verify action both ask here, so they name the same files.

A file is damaged when its blob in the repository no longer hashes to the SHA-256 recorded
when it was stored, or is gone. The calc jobs that created the damaged nodes can run again
(veglia.engine.rerun) to make the files anew.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veglia.exceptions import NotExistent
from veglia.manage import get_storage
from veglia.orm import queries
from veglia.orm.attributes import NOT_REPRODUCIBLE
from veglia.orm.loading import load_node
from veglia.progress_report import ProgressReport, no_progress
from veglia.row_ids import pk_of

__all__ = ["DamagedFile", "FileCheck", "check_files", "nodes_to_check"]


@dataclass(frozen=True)
class DamagedFile:
    """A stored file whose content changed (``found`` its SHA-256 now) or is gone (None)."""

    node_pk: int
    path: str
    expected: str
    found: str | None


@dataclass(frozen=True)
class FileCheck:
    """What one check found among the files of ``nodes`` nodes."""

    files: int
    nodes: int
    damaged: list[DamagedFile] = field(default_factory=list)

    @property
    def damaged_nodes(self) -> set[int]:
        return {file.node_pk for file in self.damaged}

    @property
    def damaged_blobs(self) -> set[str]:
        """The SHA-256 of each damaged blob (a blob may back files of several nodes)."""
        return {file.expected for file in self.damaged}

    def producers(self) -> dict[int, list[int]]:
        """``{calc job pk: [damaged node pks it created]}``: the steps to run again."""
        return queries.creating_calcjobs(self.damaged_nodes) if self.damaged else {}

    def not_reproducible(self) -> tuple[dict[int, dict[str, Any]], FileCheck]:
        """The calc jobs whose damaged files a rerun already failed to make again
        (``{pk: their NOT_REPRODUCIBLE record}``), and this check without those files (not
        counted among its ``files`` either)."""
        known: dict[int, dict[str, Any]] = {}
        left = list(self.damaged)
        for pk, made in self.producers().items():
            record = load_node(pk).get_attribute(NOT_REPRODUCIBLE)
            if not record:
                continue
            theirs = [f for f in left if f.node_pk in made]
            # Damage the rerun did not see (another file) is new: that job is run again.
            if all(f.expected in record["sha256"] for f in theirs):
                known[pk] = record
                left = [f for f in left if f not in theirs]
        gone = len(self.damaged) - len(left)
        return known, FileCheck(self.files - gone, self.nodes, left)


def nodes_to_check(pks: tuple[int, ...] | list[int]) -> list[int]:
    """The nodes ``pks``, and for processes (and the processes they called) the nodes they
    created or returned; every node when ``pks`` is empty. :class:`NotExistent` names the
    pks that are no node."""
    if not pks:
        return queries.node_pks()
    known = set(queries.node_pks([pk for pk in pks if pk_of(pk) is not None]))
    missing = sorted(set(pks) - known)
    if missing:
        raise NotExistent(f"No node with pk {', '.join(map(str, missing))}.")
    processes = queries.process_tree(known)
    return sorted(processes | queries.created_or_returned(processes))


def check_files(node_pks: list[int], progress: ProgressReport = no_progress) -> FileCheck:
    """Recompute the SHA-256 of every stored file of these nodes (each blob once)."""
    repository = get_storage().repository
    records = queries.repository_files(node_pks)
    hashes: dict[str, str | None] = {}
    damaged = []
    for done, (node_pk, path, sha256) in enumerate(records):
        progress("checking files", done, len(records))
        if sha256 not in hashes:
            try:
                hashes[sha256] = repository.hash_of_stored(sha256)
            except NotExistent:
                hashes[sha256] = None
        if hashes[sha256] != sha256:
            damaged.append(DamagedFile(node_pk, path, sha256, hashes[sha256]))
    progress("checking files", len(records), len(records))
    return FileCheck(len(records), len(node_pks), damaged)
