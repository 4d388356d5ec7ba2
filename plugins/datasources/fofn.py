"""``core.fofn``: a file of file names on a computer, or a CSV or TSV with one file a row.

A plain fofn lists one path a line (blank lines and ``#`` comments skipped); each file is an
element. A CSV or TSV names its files in ``path_column``; its other columns become the
element's metadata, and ``group_column`` makes the rows sharing a value one element.
Relative paths are relative to the fofn's folder. An element with a file that is missing is
left out, and the listing's ``problems`` say which.
"""

from __future__ import annotations

import csv
import io
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import DataSource, Listing, Setting, read_known
from veglia.plugins.datasources.files import assemble, checksums, computer_path, unchanged
from veglia.plugins.datasources.remote import ask

if TYPE_CHECKING:
    from veglia.plugin_api import Transport

__all__ = ["FofnSource"]

FORMATS = ("lines", "csv", "tsv")


def fofn_format(value: Any) -> str:
    if value not in FORMATS:
        raise ValueError(f"give one of {', '.join(FORMATS)}")
    known: str = value  # one of FORMATS
    return known


def column(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("give the name of a column, as its header row spells it")
    return value


#: A row of the fofn: the identity it belongs to, its path as written, its metadata.
Row = tuple[str, str, dict[str, str]]


class FofnSource(DataSource):
    """The files a file of file names lists (``path``), one element each, or the rows of a
    CSV or TSV (``format``): files in ``path_column``, other columns as metadata, rows
    grouped by ``group_column``."""

    name = "core.fofn"
    accepted_settings = (
        Setting(
            "path",
            "the file of file names on the computer, e.g. path = '/data/samples.csv'",
            computer_path,
        ),
        Setting(
            "format",
            "lines (one path a line, # comments), csv or tsv (with a header row)",
            fofn_format,
            default="lines",
        ),
        Setting("path_column", "the CSV column holding the paths (default: path)", column, None),
        Setting(
            "group_column",
            "a CSV column whose rows with the same value form one element",
            column,
            default=None,
        ),
    )

    def check(self) -> None:
        if self.settings["format"] == "lines":
            given = [n for n in ("path_column", "group_column") if self.settings[n] is not None]
            if given:
                raise self.error(f"{given[0]} needs format = 'csv' or 'tsv' (with a header row).")
        elif self.settings["path_column"] is None:
            self.settings["path_column"] = "path"

    def elements(
        self, transport: Transport | None, known: Mapping[str, Any] | None = None
    ) -> Listing:
        transport = self.require_transport(transport)
        cache = read_known(known)
        fofn = ask(transport, {"op": "read", "path": self.settings["path"]})
        if "error" in fofn:
            raise self.error(f"{fofn['error']} on {transport.hostname}: check path.")
        rows, problems = self._rows(fofn["text"])
        folder = posixpath.dirname(fofn["path"])
        written = list(dict.fromkeys(path for _, path, _ in rows))
        asked = [
            p if p.startswith(("/", "~")) else posixpath.normpath(posixpath.join(folder, p))
            for p in written
        ]
        stats = ask(transport, {"op": "stat", "paths": asked})["files"]
        where = {path: stat for path, stat in zip(written, stats, strict=True)}

        members: dict[str, list[list[Any]]] = {}
        metadata: dict[str, dict[str, str]] = {}
        for identity, path, row_metadata in rows:
            stat = where[path]
            if identity not in members:
                members[identity], metadata[identity] = [], row_metadata
            elif stat in members[identity]:
                continue
            members[identity].append(stat)
            shared = metadata[identity]
            metadata[identity] = {k: v for k, v in shared.items() if row_metadata.get(k) == v}

        complete: dict[str, list[str]] = {}
        ready: list[tuple[str, int, float]] = []
        for identity, files in members.items():
            missing = [path for path, size, _ in files if size is None]
            if missing:
                problems += [f"{identity}: {path} is missing; left out" for path in missing]
            else:
                complete[identity] = [path for path, _, _ in files]
                ready += [(path, size, mtime) for path, size, mtime in files]
        sums = checksums(transport, ready, cache)
        elements, waiting, unreadable = assemble(complete, metadata, sums)
        return Listing(
            elements=tuple(elements),
            known={**unchanged(cache, stats), **sums.known},
            problems=tuple(problems + unreadable),
            waiting=tuple(sorted(waiting)),
            hashed=tuple(sums.hashed),
        )

    def _rows(self, text: str) -> tuple[list[Row], list[str]]:
        """The fofn's rows, and the rows left out (no path, no group)."""
        if self.settings["format"] == "lines":
            paths = [line.strip() for line in text.splitlines()]
            return [(p, p, {}) for p in paths if p and not p.startswith("#")], []
        delimiter = "\t" if self.settings["format"] == "tsv" else ","
        lines = (line for line in io.StringIO(text) if line.strip() and not line.startswith("#"))
        reader = csv.DictReader(lines, delimiter=delimiter)
        path_column, group_column = self.settings["path_column"], self.settings["group_column"]
        header = reader.fieldnames or []
        for name, setting in ((path_column, "path_column"), (group_column, "group_column")):
            if name is not None and name not in header:
                raise self.error(
                    f"{self.settings['path']} has no column {name!r} (its header: "
                    f"{', '.join(header) or 'none'}); set {setting} to one of them."
                )
        rows: list[Row] = []
        problems: list[str] = []
        for record in reader:
            values = {k: (v or "").strip() for k, v in record.items() if k is not None}
            path = values.pop(path_column)
            identity = values[group_column] if group_column else path
            if not path or not identity:
                empty = path_column if not path else group_column
                shown = ", ".join(f"{k}={v}" for k, v in record.items() if k and v)
                problems.append(f"a row with no {empty} ({shown}) is left out")
                continue
            rows.append((identity, path, values))
        return rows, problems
