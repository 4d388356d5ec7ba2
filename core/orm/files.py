"""The files of a node as a folder tree, and a calc job's input files: those in its own
repository (what ``prepare_for_submission`` wrote, the submit script) and those it copied in
from other nodes (``local_copy_list``: the files ``veglia shell -f`` passes)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from veglia.exceptions import NotExistent
from veglia.manage import get_storage
from veglia.orm.attributes import LOCAL_COPY_LIST
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node

__all__ = ["NodeFile", "calcjob_input_files", "folder_entries", "node_files", "read_file"]


@dataclass(frozen=True)
class NodeFile:
    """A file at ``path``; its content is file ``source_path`` of node ``source_pk``."""

    path: str
    size: int
    sha256: str
    source_pk: int
    source_path: str


def node_files(node: Node) -> list[NodeFile]:
    """The files in the node's own repository, sorted by path."""
    return [
        NodeFile(record.path, record.size, record.sha256, node.pk, record.path)
        for record in node.list_objects()
    ]


def calcjob_input_files(node: Node) -> list[NodeFile]:
    """A calc job's input files: its own, and those copied in from other nodes when it was
    uploaded (a copy wins over a file of the same name, as it did in the work dir)."""
    files = {entry.path: entry for entry in node_files(node)}
    for uuid, source, target in node.get_attribute(LOCAL_COPY_LIST) or []:
        try:
            origin = load_node(uuid)
        except NotExistent:
            continue  # deleted since; its content is gone with it
        for record in origin.list_objects():
            if record.path == source:
                path = posixpath.normpath(target)
                files[path] = NodeFile(path, record.size, record.sha256, origin.pk, source)
    return [files[path] for path in sorted(files)]


def folder_entries(files: list[NodeFile], path: str, what: str) -> dict[str, NodeFile | int]:
    """The entries right under folder ``path``: a file by name, or a folder (its name ends
    with '/') with the total size under it. ``path`` naming a file gives just that file."""
    folder = path.strip("/")
    prefix = f"{folder}/" if folder else ""
    entries: dict[str, NodeFile | int] = {}
    for entry in files:
        if entry.path == folder:
            return {posixpath.basename(folder): entry}
        if entry.path.startswith(prefix):
            head, sep, _ = entry.path[len(prefix) :].partition("/")
            if sep:
                total = entries.get(head + sep, 0)
                entries[head + sep] = (total if isinstance(total, int) else 0) + entry.size
            else:
                entries[head] = entry
    if folder and not entries:
        names = ", ".join(entry.path for entry in files) or "none"
        raise NotExistent(f"{what} has no file or folder {path!r} (files: {names}).")
    return dict(sorted(entries.items()))


def read_file(files: list[NodeFile], path: str, what: str) -> bytes:
    """The content of file ``path``."""
    wanted = posixpath.normpath(path.strip("/")) if path.strip("/") else ""
    for entry in files:
        if entry.path == wanted:
            return get_storage().repository.get_bytes(entry.sha256)
    if any(entry.path.startswith(f"{wanted}/") for entry in files):
        raise NotExistent(f"{path!r} is a folder in {what}, not a file; list what is in it.")
    names = ", ".join(entry.path for entry in files) or "none"
    raise NotExistent(f"{what} has no file {path!r} (files: {names}).")
