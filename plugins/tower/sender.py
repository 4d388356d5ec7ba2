"""Sending the outbox: runs created and begun, tasks in batches of 100, runs completed.

A failed send leaves the records pending: 429, 5xx, timeouts and network errors are tried
again after a growing delay (or the server's ``Retry-After``); a 401/403 is reported once
and sending pauses until the access token changes. A record is marked sent only once the
Platform took it, so a crash or a restart resends at most what was in flight.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veglia.plugins.tower import outbox, payload
from veglia.plugins.tower.client import AuthFailed, RetryLater, TowerClient, TowerRefused
from veglia.plugins.tower.settings import TowerSettings, settings_of

__all__ = ["SendReport", "TowerSender"]

LOGGER = logging.getLogger("veglia.tower")
HEARTBEAT_SECONDS = 60.0
BATCH = 100


@dataclass
class SendReport:
    sent: int = 0
    errors: list[str] = field(default_factory=list)
    paused: str = ""


def _token_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


class TowerSender:
    """Delivers one profile's Tower outbox."""

    def __init__(self, profile: Any, settings: TowerSettings | None = None) -> None:
        self.profile = profile
        self.settings = settings or settings_of(profile)
        self.state_file = Path(profile.folder) / "tower-state.json"
        self.retry_at = 0.0
        self.delay = 1.0

    # -- the auth pause survives restarts, and ends when the token changes --------------------
    def _state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def paused_reason(self) -> str:
        state = self._state()
        if state.get("token") == _token_id(self.settings.token):
            return state.get("message", "")
        return ""

    def _pause(self, message: str) -> None:
        self.state_file.write_text(
            json.dumps({"token": _token_id(self.settings.token), "message": message})
        )
        LOGGER.error("%s Reporting to Seqera Platform is paused.", message)

    # -- one pass ------------------------------------------------------------------------
    def send_pending(self) -> SendReport:
        report = SendReport()
        if not self.settings.token:
            report.paused = "no access token (tower.access_token or $TOWER_ACCESS_TOKEN)"
            return report
        reason = self.paused_reason()
        if reason:
            report.paused = reason
            return report
        if time.monotonic() < self.retry_at:
            return report
        client = TowerClient(
            self.settings.endpoint, self.settings.token, self.settings.workspace_id
        )
        try:
            for run_key in outbox.pending_runs():
                report.sent += self._send_run(client, run_key)
            self._heartbeats(client)
            self.delay = 1.0
        except RetryLater as exc:
            wait = exc.after if exc.after is not None else self.delay
            self.retry_at = time.monotonic() + wait
            self.delay = min(self.delay * 2, 300.0)
            report.errors.append(f"{exc}; retrying in {wait:.0f} s")
        except AuthFailed as exc:
            self._pause(str(exc))
            report.paused = str(exc)
        finally:
            client.close()
        return report

    def _workflow(self, run_key: str, workflow_id: str, tasks: list[dict[str, Any]]) -> dict:
        return {
            "id": workflow_id,
            "runName": run_key,
            "projectName": "veglia",
            "processNames": sorted({t.get("process") or "" for t in tasks}),
            "manifest": {"name": "veglia"},
        }

    def _ensure_begun(self, client: TowerClient, run: Any, tasks: list[dict]) -> None:
        if run.remote_id is None:
            session_id = run.data.get("session_id") or str(uuid.uuid4())
            run.data = {**run.data, "session_id": session_id}
            run.remote_id = client.create(run.run_key, session_id)
            outbox.save_run(run)
        if run.state == "new":
            watch = client.begin(
                run.remote_id,
                self._workflow(run.run_key, run.remote_id, tasks),
                sorted({t.get("process") or "" for t in tasks}),
            )
            run.state, run.data = "begun", {**run.data, "watch_url": watch}
            run.last_sent = None
            outbox.save_run(run)

    def _send_run(self, client: TowerClient, run_key: str) -> int:
        run = outbox.get_run(run_key)
        records = outbox.all_task_payloads(run_key)
        self._ensure_begun(client, run, records)
        sent = 0
        while True:
            rows = outbox.rows(run_key, "task", limit=BATCH)
            if not rows:
                break
            tasks = [payload.task_map(row.payload) for row in rows]
            try:
                client.progress(run.remote_id, tasks, payload.progress(records))
            except TowerRefused as exc:
                outbox.mark([row.id for row in rows], "failed", str(exc))
                continue
            except RetryLater as exc:
                outbox.mark([row.id for row in rows], "pending", str(exc))
                raise
            outbox.mark([row.id for row in rows], "sent")
            sent += len(rows)
            self._touch(run)
        for row in outbox.rows(run_key, "complete"):
            try:
                client.complete(
                    run.remote_id,
                    self._workflow(run_key, run.remote_id, records),
                    payload.metrics(records),
                    payload.progress(records),
                )
            except RetryLater as exc:
                outbox.mark([row.id], "pending", str(exc))
                raise
            outbox.mark([row.id], "sent")
            run.state = "completed"
            outbox.save_run(run)
        return sent

    def _touch(self, run: Any) -> None:
        from datetime import datetime, timezone

        run.last_sent = datetime.now(timezone.utc)
        outbox.save_run(run)

    def _heartbeats(self, client: TowerClient) -> None:
        """An idle run that has not ended says it is alive about every minute."""
        import sqlalchemy as sa

        from veglia.manage import get_storage
        from veglia.storage.models import ReportRun

        with get_storage().session() as session:
            runs = list(
                session.scalars(
                    sa.select(ReportRun).where(
                        ReportRun.reporter == outbox.REPORTER, ReportRun.state == "begun"
                    )
                )
            )
            for run in runs:
                session.expunge(run)
        now = time.time()
        for run in runs:
            last = run.last_sent.timestamp() if run.last_sent else 0
            if now - last >= HEARTBEAT_SECONDS:
                client.heartbeat(
                    run.remote_id, payload.progress(outbox.all_task_payloads(run.run_key))
                )
                self._touch(run)

    def run_forever(self, stop: Any, interval: float = 1.0) -> None:
        """Send until ``stop`` (a threading.Event) is set (the daemon's sender thread)."""
        while not stop.is_set():
            try:
                self.send_pending()
            except Exception:  # a bug here must not take the daemon down
                LOGGER.exception("the Tower sender failed; trying again")
            stop.wait(interval)
