"""What a plugin adds to the overview page: a titled table of (name, value) rows."""

from __future__ import annotations

from typing import Any

from veglia.plugin_manager import gather
from veglia.plugin_types import Panel

__all__ = ["Panel", "plugin_panels"]


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
