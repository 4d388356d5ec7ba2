"""Charts as inline SVG (a stand-in until the charts module lands: the same signatures)."""

from __future__ import annotations

from html import escape
from typing import Any

__all__ = ["timeline_svg", "usage_svg"]


def timeline_svg(timeline: list[dict[str, Any]], now: str) -> str:
    """The jobs' queued and running spans; here only one labelled bar per job."""
    rows = "".join(
        f'<text x="0" y="{16 * (i + 1)}">{escape(str(span.get("label") or span["pk"]))}</text>'
        for i, span in enumerate(timeline)
    )
    return f'<svg class="timeline" width="400" height="{16 * (len(timeline) + 1)}">{rows}</svg>'


def usage_svg(points: list[dict[str, Any]], key: str, title: str, unit: str) -> str:
    """One resource over a run; here only its title and how many points it has."""
    count = sum(1 for point in points if point.get(key) is not None)
    return (
        f'<svg class="usage" width="400" height="20"><text x="0" y="15">'
        f"{escape(title)} ({escape(unit)}): {count} points</text></svg>"
    )
