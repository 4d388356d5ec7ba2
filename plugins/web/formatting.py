"""Times, durations and sizes as the web pages and the report write them.

The view dicts carry ISO-8601 times in UTC, durations in seconds and sizes in bytes; these
turn them into short text a reader takes in at a glance ("3m 12s", "1.5 GiB").
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

__all__ = ["duration_text", "number", "parse_time", "size_text", "time_text"]

#: Epoch values above this are milliseconds (1e11 s is the year 5138; 1e11 ms is 1973).
_EPOCH_MS_ABOVE = 1e11


def number(value: Any) -> float | None:
    """A measured figure, or None for one not measured (None, not a number, NaN, inf)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def parse_time(value: Any) -> datetime | None:
    """An aware UTC datetime from an ISO-8601 string (``Z`` allowed) or an epoch number
    (seconds, or milliseconds as the trace series keeps them); None for anything else."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    elif (epoch := number(value)) is not None:
        seconds = epoch / 1000 if abs(epoch) > _EPOCH_MS_ABOVE else epoch
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    else:
        return None
    if moment.tzinfo is None:
        # The contract's times are UTC; a naive one is read as UTC, not as local time.
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def duration_text(seconds: float | None) -> str:
    """``"450ms"``, ``"12s"``, ``"3m 12s"``, ``"2h 5m"``, ``"3d 4h"``; ``"-"`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 10:
        return f"{seconds:.1f}s".replace(".0s", "s")
    whole = round(seconds)
    for big, big_unit, small, small_unit in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "m"),
        (60, "m", 1, "s"),
    ):
        if whole >= big:
            rest = whole % big // small
            return f"{whole // big}{big_unit}" + (f" {rest}{small_unit}" if rest else "")
    return f"{whole}s"


def size_text(size: float | None) -> str:
    """Bytes as ``"512 B"``, ``"3.2 KiB"``, ``"140 MiB"``, ``"1.5 GiB"``; ``"-"`` unknown."""
    if size is None or not math.isfinite(size):
        return "-"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{size:.0f} B"


def time_text(value: Any) -> str:
    """A view's time as ``"2026-12-06 04:08:08 UTC"``; ``"-"`` when unknown."""
    moment = parse_time(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"
