"""``core.folder``: the files matching a glob in a folder on a computer.

Each file is an element, or, with ``group_by``, the files whose paths give the same
``name`` form one (a sample's pair of reads). A file is taken once it has been left alone
for ``settled`` seconds by the computer's clock; an element with a file still being written
waits for the next listing.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import DataSource, Listing, Setting, read_known
from veglia.plugins.datasources.files import assemble, checksums, computer_path, unchanged
from veglia.plugins.datasources.remote import ask

if TYPE_CHECKING:
    from veglia.plugin_api import Transport

__all__ = ["FolderSource", "name_pattern", "relative_glob", "seconds"]


def relative_glob(value: Any) -> str:
    """A glob below the folder: no absolute path, no ``..``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("give a pattern such as *.fastq.gz, or **/*.bam to look in sub-folders")
    if value.startswith(("/", "~")) or ".." in value.split("/"):
        raise ValueError("give a pattern relative to the folder (set the folder with path)")
    return value


def name_pattern(value: Any) -> str:
    """A regular expression with a named group ``name``."""
    if not isinstance(value, str):
        raise TypeError("give a regular expression such as (?P<name>.+)_R[12]\\.fastq\\.gz")
    try:
        compiled = re.compile(value)
    except re.error as exc:
        raise ValueError(f"it is no regular expression ({exc})") from None
    if "name" not in compiled.groupindex:
        raise ValueError(
            "it needs a group (?P<name>...) for what the files of one element share, "
            "e.g. (?P<name>.+)_R[12]\\.fastq\\.gz"
        )
    return value


def seconds(value: Any) -> float:
    """A number of seconds, 0 or more."""
    if isinstance(value, bool):
        raise TypeError("give a number of seconds, such as 60")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError("give a number of seconds, such as 60") from None
    if not number >= 0 or number == float("inf"):
        raise ValueError("give a number of seconds, 0 or more, such as 60")
    return number


class FolderSource(DataSource):
    """The files matching ``glob`` in the folder ``path`` on a computer, one element each
    (identity: the path relative to the folder), or grouped by ``group_by`` (identity: the
    ``name`` its group captures); a file is taken once unchanged for ``settled`` seconds."""

    name = "core.folder"
    accepted_settings = (
        Setting("path", "the folder on the computer, e.g. path = '/data/runs'", computer_path),
        Setting(
            "glob",
            "which files: a pattern relative to the folder (** crosses sub-folders)",
            relative_glob,
            default="*",
        ),
        Setting(
            "group_by",
            "a regular expression with a group (?P<name>...), matched against each file's "
            "path relative to the folder: files with the same name form one element",
            name_pattern,
            default=None,
        ),
        Setting(
            "settled",
            "seconds a file must be left unchanged (by its mtime) before it is taken",
            seconds,
            default=60.0,
        ),
    )

    def check(self) -> None:
        group_by = self.settings["group_by"]
        self._pattern = re.compile(group_by) if group_by is not None else None

    def elements(
        self, transport: Transport | None, known: Mapping[str, Any] | None = None
    ) -> Listing:
        transport = self.require_transport(transport)
        cache = read_known(known)
        listed = ask(
            transport, {"op": "list", "root": self.settings["path"], "glob": self.settings["glob"]}
        )
        if "error" in listed:
            raise self.error(
                f"{listed['error']} on {transport.hostname}: create it, or set path to the "
                "folder the data arrives in."
            )
        root, now = listed["root"], listed["now"]
        members, metadata, problems = self._group(listed["files"])

        waiting: set[str] = set()
        ready: list[tuple[str, int, float]] = []
        for identity, files in members.items():
            if any(now - mtime < self.settings["settled"] for _, _, mtime in files):
                waiting.add(identity)
            else:
                ready += [(posixpath.join(root, rel), size, mtime) for rel, size, mtime in files]
        sums = checksums(transport, ready, cache)

        settled = {
            identity: [posixpath.join(root, rel) for rel, _, _ in files]
            for identity, files in members.items()
            if identity not in waiting
        }
        elements, changed, unreadable = assemble(settled, metadata, sums)

        now_listed = [
            (posixpath.join(root, rel), size, mtime) for rel, size, mtime in listed["files"]
        ]
        return Listing(
            elements=tuple(elements),
            known={**unchanged(cache, now_listed), **sums.known},
            problems=tuple(problems + unreadable),
            waiting=tuple(sorted(waiting | changed)),
            hashed=tuple(sums.hashed),
        )

    def _group(
        self, files: list[list[Any]]
    ) -> tuple[dict[str, list[list[Any]]], dict[str, dict[str, str]], list[str]]:
        """The listed files by identity, each element's metadata, and the files left out."""
        members: dict[str, list[list[Any]]] = {}
        metadata: dict[str, dict[str, str]] = {}
        problems: list[str] = []
        for entry in files:
            relative = entry[0]
            if self._pattern is None:
                members[relative], metadata[relative] = [entry], {}
                continue
            match = self._pattern.fullmatch(relative)
            if match is None or not match["name"]:
                problems.append(f"{relative}: group_by does not match its path; left out")
                continue
            groups = {k: v for k, v in match.groupdict().items() if v is not None}
            identity = groups["name"]
            if identity not in members:
                members[identity], metadata[identity] = [entry], groups
                continue
            members[identity].append(entry)
            # What differs between an element's files (R1, R2) says nothing of the element.
            shared = metadata[identity]
            metadata[identity] = {k: v for k, v in shared.items() if groups.get(k) == v}
        return members, metadata, problems
