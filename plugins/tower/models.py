"""ORM classes of Tower's tables (:mod:`veglia.plugins.tower.tables`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import DeclarativeBase, Mapped

from veglia.plugins.tower import tables

__all__ = ["Base", "ReportOutbox", "ReportRun"]


class Base(DeclarativeBase):
    metadata = tables.metadata


class ReportOutbox(Base):
    """Records Tower must deliver: kept until they are sent."""

    __table__ = tables.report_outbox

    id: Mapped[int]
    reporter: Mapped[str]
    run_key: Mapped[str]
    kind: Mapped[str]
    task_id: Mapped[int]
    attempt: Mapped[int]
    payload: Mapped[dict[str, Any]]
    status: Mapped[str]
    tries: Mapped[int]
    last_error: Mapped[str | None]
    created: Mapped[datetime]
    sent_at: Mapped[datetime | None]


class ReportRun(Base):
    """A run as the Platform knows it (its workflow id)."""

    __table__ = tables.report_runs

    id: Mapped[int]
    reporter: Mapped[str]
    run_key: Mapped[str]
    remote_id: Mapped[str | None]
    state: Mapped[str]
    data: Mapped[dict[str, Any]]
    last_sent: Mapped[datetime | None]
