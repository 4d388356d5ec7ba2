"""Times as the database stores them: aware UTC datetimes."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

__all__ = ["as_utc", "database_epoch", "utcnow"]


def utcnow() -> datetime:
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
