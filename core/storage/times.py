"""Times as the database stores them: aware UTC datetimes."""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["as_utc", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite gives back naive ones)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
