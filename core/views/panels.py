"""What a plugin adds to the overview page: a titled table of (name, value) rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veglia.plugin_manager import gather

__all__ = ["Panel", "plugin_panels"]


@dataclass(frozen=True)
class Panel:
    """A plugin's panel on the overview: its ``title`` and ``rows`` of (name, value), each
    value a plain text or number (shown escaped)."""

    title: str
    rows: list[tuple[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "rows": [[str(k), v] for k, v in self.rows]}


def plugin_panels() -> list[dict[str, Any]]:
    """Every plugin's panels (``overview_panels``); a broken plugin gets a panel saying so,
    and the others still show."""
    results, errors = gather("overview_panels")
    panels = []
    for plugin, panel in results:
        if not isinstance(panel, Panel):
            errors.append((plugin, TypeError(f"returned {type(panel).__name__}, not Panel")))
            continue
        panels.append(panel.as_dict())
    for plugin, exc in errors:
        panels.append(
            Panel(f"plugin {plugin}", [("error", f"its overview panel failed: {exc}")]).as_dict()
        )
    return panels
