"""ORM classes of Tower's tables (:mod:`veglia.plugins.tower.tables`)."""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from veglia.plugins.tower import tables

__all__ = ["Base", "ReportOutbox", "ReportRun"]


class Base(DeclarativeBase):
    metadata = tables.metadata


class ReportOutbox(Base):
    """Records Tower must deliver: kept until they are sent."""

    __table__ = tables.report_outbox


class ReportRun(Base):
    """A run as the Platform knows it (its workflow id)."""

    __table__ = tables.report_runs
