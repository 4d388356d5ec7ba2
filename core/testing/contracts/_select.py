"""The entry points a contract class names, found among the installed ones."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from importlib.metadata import EntryPoint, entry_points

import pytest


def select(group: str, patterns: str | Sequence[str], owner: str) -> list[EntryPoint]:
    """The ``group`` entry points matching ``patterns`` (one or several), by name; a pattern
    that matches none fails the collection, as a contract run over nothing would pass."""
    if isinstance(patterns, str):
        patterns = [patterns]
    installed = sorted(entry_points(group=group), key=lambda ep: ep.name)
    chosen: dict[str, EntryPoint] = {}
    for pattern in patterns:
        matched = [ep for ep in installed if fnmatchcase(ep.name, pattern)]
        if not matched:
            names = ", ".join(ep.name for ep in installed) or "none"
            pytest.fail(
                f"{owner}: no {group} entry point matches {pattern!r} (installed: {names}); "
                "install your package (pip install -e .) or fix entry_points",
                pytrace=False,
            )
        chosen.update((ep.name, ep) for ep in matched)
    return list(chosen.values())
