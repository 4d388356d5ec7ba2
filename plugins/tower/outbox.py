"""The durable queue of Tower records, in the profile's database.

Rows (``report_outbox``) are task events (``submitted``, ``running``, ``task`` for the end)
and a run's ``complete``; each is ``pending`` until the Platform took it, then ``sent``.
Runs (``report_runs``) are ``new``, ``begun``, ``completed`` or ``refused``: a refused run
keeps its pending rows, sends nothing more, and shows the refused request and the server's
message until ``veglia tower retry`` puts it back where it was.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

from veglia.plugin_api import get_storage
from veglia.plugins.tower.models import ReportOutbox, ReportRun

__all__ = [
    "REPORTER",
    "TASK_KINDS",
    "enqueue",
    "get_run",
    "latest_tasks",
    "mark",
    "pending_runs",
    "refuse_run",
    "refused_runs",
    "retry_runs",
    "save_run",
    "status_counts",
]

REPORTER = "tower"
#: Outbox kinds that carry a task, by the event that queued it.
TASK_KINDS = ("submitted", "running", "task")


def enqueue(
    run_key: str,
    kind: str,
    task_id: int,
    attempt: int,
    payload: dict[str, Any],
    run_meta: dict[str, Any] | None = None,
) -> None:
    """Queue a record once: queueing the same (run, kind, task, attempt) again does nothing.

    ``run_meta`` describes the run's launch; the first record of a run creates it with that.
    """
    storage = get_storage()
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
    with storage.session() as session:
        if run_meta is not None:
            session.execute(
                storage.insert(ReportRun.__table__)
                .values(reporter=REPORTER, run_key=run_key, state="new", data={"meta": run_meta})
                .on_conflict_do_nothing()
            )
        session.execute(
            storage.insert(ReportOutbox.__table__).values(values).on_conflict_do_nothing()
        )


def pending_runs() -> list[str]:
    """Runs with something to send, leaving out refused ones."""
    refused = sa.select(ReportRun.run_key).where(
        ReportRun.reporter == REPORTER, ReportRun.state == "refused"
    )
    with get_storage().session() as session:
        return list(
            session.scalars(
                sa.select(ReportOutbox.run_key)
                .where(
                    ReportOutbox.reporter == REPORTER,
                    ReportOutbox.status == "pending",
                    ReportOutbox.run_key.not_in(refused),
                )
                .distinct()
                .order_by(ReportOutbox.run_key)
            )
        )


def pending_rows(run_key: str, kinds: tuple[str, ...]) -> list[ReportOutbox]:
    with get_storage().session() as session:
        return list(
            session.scalars(
                sa.select(ReportOutbox)
                .where(
                    ReportOutbox.reporter == REPORTER,
                    ReportOutbox.run_key == run_key,
                    ReportOutbox.kind.in_(kinds),
                    ReportOutbox.status == "pending",
                )
                .order_by(ReportOutbox.id)
            )
        )


def latest_tasks(run_key: str) -> list[tuple[int, dict[str, Any]]]:
    """(task id, payload) of every task event of a run, sent or not, oldest first."""
    with get_storage().session() as session:
        return [
            (task_id, payload)
            for task_id, payload in session.execute(
                sa.select(ReportOutbox.task_id, ReportOutbox.payload)
                .where(
                    ReportOutbox.reporter == REPORTER,
                    ReportOutbox.run_key == run_key,
                    ReportOutbox.kind.in_(TASK_KINDS),
                )
                .order_by(ReportOutbox.id)
            )
        ]


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
        if run is None:  # queued by a release that kept no launch facts
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


def refuse_run(run: ReportRun, request: str, status: int | None, message: str) -> None:
    """The Platform will not take this run's ``request``: stop sending it, say why."""
    refused = {
        "request": request,
        "status": status,
        "message": message,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "state": run.state,
    }
    run.data = {**run.data, "refused": refused}
    run.state = "refused"
    save_run(run)


def refused_runs() -> list[ReportRun]:
    with get_storage().session() as session:
        runs = list(
            session.scalars(
                sa.select(ReportRun)
                .where(ReportRun.reporter == REPORTER, ReportRun.state == "refused")
                .order_by(ReportRun.run_key)
            )
        )
        session.expunge_all()
        return runs


def retry_runs(run_key: str | None = None) -> list[str]:
    """Put refused runs (all, or one) back where they were; their records go out again."""
    retried = []
    for run in refused_runs():
        if run_key is not None and run.run_key != run_key:
            continue
        data = dict(run.data)
        refused = data.pop("refused", {})
        run.state, run.data = refused.get("state") or "new", data
        save_run(run)
        retried.append(run.run_key)
    # Rows a release before this one marked failed go out again too.
    failed = sa.and_(ReportOutbox.reporter == REPORTER, ReportOutbox.status == "failed")
    if run_key is not None:
        failed = sa.and_(failed, ReportOutbox.run_key == run_key)
    with get_storage().session() as session:
        keys = session.scalars(sa.select(ReportOutbox.run_key).where(failed).distinct()).all()
        session.execute(sa.update(ReportOutbox).where(failed).values(status="pending"))
    retried += [key for key in keys if key not in retried]
    return retried


def status_counts() -> dict[str, Any]:
    """Rows by status (``held`` are pending rows of refused runs) and runs by state."""
    refused = sa.select(ReportRun.run_key).where(
        ReportRun.reporter == REPORTER, ReportRun.state == "refused"
    )
    with get_storage().session() as session:
        shown = sa.case((ReportOutbox.run_key.in_(refused), "held"), else_=ReportOutbox.status)
        rows: dict[str, int] = dict(
            session.execute(
                sa.select(shown, sa.func.count())
                .where(ReportOutbox.reporter == REPORTER, ReportOutbox.status != "sent")
                .group_by(shown)
            ).all()
        )
        rows["sent"] = (
            session.scalar(
                sa.select(sa.func.count()).where(
                    ReportOutbox.reporter == REPORTER, ReportOutbox.status == "sent"
                )
            )
            or 0
        )
        runs = dict(
            session.execute(
                sa.select(ReportRun.state, sa.func.count())
                .where(ReportRun.reporter == REPORTER)
                .group_by(ReportRun.state)
            ).all()
        )
        last_error = session.scalar(
            sa.select(ReportOutbox.last_error)
            .where(ReportOutbox.reporter == REPORTER, ReportOutbox.last_error.isnot(None))
            .order_by(ReportOutbox.id.desc())
            .limit(1)
        )
    return {
        "pending": rows.get("pending", 0),
        "sent": rows.get("sent", 0) or 0,
        "held": rows.get("held", 0) + rows.get("failed", 0),
        "runs": runs,
        "last_error": last_error,
    }
