"""The durable queue of Tower records, in the profile's database."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.storage.models import ReportOutbox, ReportRun

__all__ = ["REPORTER", "enqueue", "mark", "pending_runs", "status_counts"]

REPORTER = "tower"


def enqueue(run_key: str, kind: str, task_id: int, attempt: int, payload: dict[str, Any]) -> None:
    """Queue a record once: queueing the same (run, kind, task, attempt) again does nothing."""
    table = ReportOutbox.__table__
    values = {
        "reporter": REPORTER,
        "run_key": run_key,
        "kind": kind,
        "task_id": task_id,
        "attempt": attempt,
        "payload": payload,
        "status": "pending",
        "tries": 0,
        "created": datetime.now(timezone.utc),
    }
    storage = get_storage()
    if storage.engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    with storage.session() as session:
        session.execute(insert(table).values(values).on_conflict_do_nothing())


def pending_runs() -> list[str]:
    with get_storage().session() as session:
        return list(
            session.scalars(
                sa.select(ReportOutbox.run_key)
                .where(ReportOutbox.reporter == REPORTER, ReportOutbox.status == "pending")
                .distinct()
                .order_by(ReportOutbox.run_key)
            )
        )


def rows(run_key: str, kind: str, status: str = "pending", limit: int = 100) -> list[ReportOutbox]:
    with get_storage().session() as session:
        return list(
            session.scalars(
                sa.select(ReportOutbox)
                .where(
                    ReportOutbox.reporter == REPORTER,
                    ReportOutbox.run_key == run_key,
                    ReportOutbox.kind == kind,
                    ReportOutbox.status == status,
                )
                .order_by(ReportOutbox.id)
                .limit(limit)
            )
        )


def all_task_payloads(run_key: str) -> list[dict[str, Any]]:
    with get_storage().session() as session:
        return list(
            session.scalars(
                sa.select(ReportOutbox.payload)
                .where(
                    ReportOutbox.reporter == REPORTER,
                    ReportOutbox.run_key == run_key,
                    ReportOutbox.kind == "task",
                )
                .order_by(ReportOutbox.id)
            )
        )


def mark(ids: list[int], status: str, error: str | None = None) -> None:
    """Record the outcome of a send attempt for these rows."""
    values: dict[str, Any] = {"tries": ReportOutbox.tries + 1, "last_error": error}
    if status != "pending":
        values["status"] = status
    if status == "sent":
        values["sent_at"] = datetime.now(timezone.utc)
    with get_storage().session() as session:
        session.execute(sa.update(ReportOutbox).where(ReportOutbox.id.in_(ids)).values(values))


def get_run(run_key: str) -> ReportRun:
    with get_storage().session() as session:
        run = session.scalar(
            sa.select(ReportRun).where(ReportRun.reporter == REPORTER, ReportRun.run_key == run_key)
        )
        if run is None:
            run = ReportRun(reporter=REPORTER, run_key=run_key, state="new", data={})
            session.add(run)
            session.flush()
        session.expunge(run)
        return run


def save_run(run: ReportRun) -> None:
    with get_storage().session() as session:
        session.execute(
            sa.update(ReportRun)
            .where(ReportRun.id == run.id)
            .values(
                remote_id=run.remote_id, state=run.state, data=run.data, last_sent=run.last_sent
            )
        )


def status_counts() -> dict[str, Any]:
    with get_storage().session() as session:
        counts = dict(
            session.execute(
                sa.select(ReportOutbox.status, sa.func.count())
                .where(ReportOutbox.reporter == REPORTER)
                .group_by(ReportOutbox.status)
            ).all()
        )
        last_error = session.scalar(
            sa.select(ReportOutbox.last_error)
            .where(ReportOutbox.reporter == REPORTER, ReportOutbox.last_error.isnot(None))
            .order_by(ReportOutbox.id.desc())
            .limit(1)
        )
    return {
        "pending": counts.get("pending", 0),
        "sent": counts.get("sent", 0),
        "failed": counts.get("failed", 0),
        "last_error": last_error,
    }
