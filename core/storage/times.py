"""Times as the database stores them (aware UTC datetimes), and durations as people read
them."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

__all__ = ["as_utc", "database_epoch", "format_seconds", "utcnow"]


def utcnow() -> datetime:
    """Now, as an aware UTC datetime: what every stored time is."""
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite gives back naive ones)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def database_epoch(dialect: str) -> Any:
    """The database's clock in epoch seconds, as an SQL expression: what workers on hosts
    whose clocks disagree compare heartbeats and claims by."""
    if dialect == "postgresql":
        return sa.func.extract("epoch", sa.func.clock_timestamp())
    return (sa.func.julianday("now") - 2440587.5) * 86400.0


def format_seconds(seconds: float | int) -> str:
    """``"45s"``, ``"12m 5s"``, ``"3h 20m"``, ``"2d 4h"``; ``"under 1s"`` for a positive
    time that would round to ``"0s"`` (a run that took 0.3 s did not take no time)."""
    if 0 < seconds < 0.5:
        return "under 1s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60}s"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"
