"""Sending the outbox: each run created, begun, its tasks in batches of 100, completed.

Each run is sent on its own. What concerns every run stops the pass: 429, 5xx, timeouts
and network errors are tried again after a growing delay (or the server's
``Retry-After``); a 401/403, a redirect or an insecure endpoint pauses reporting until the
settings change. What concerns one run marks that run refused, with the request and the
server's message, and the other runs go on: a 4xx, an answer that is not the API's, or a
record that cannot be sent. A record is marked sent only once the Platform took it, so a
crash or a restart resends at most what was in flight.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from veglia.plugin_api import get_storage
from veglia.plugins.tower import outbox, payload
from veglia.plugins.tower.client import TowerClient
from veglia.plugins.tower.exceptions import RetryLater, SettingsRejected, TowerRefused
from veglia.plugins.tower.models import ReportRun
from veglia.plugins.tower.runs import unsubmitted_jobs
from veglia.plugins.tower.settings import TowerSettings, check_settings, settings_of

__all__ = ["SendReport", "TowerSender"]

LOGGER = logging.getLogger("veglia.tower")
HEARTBEAT_SECONDS = 60.0
#: The most tasks one progress request may carry (the Platform refuses more).
BATCH = 100


@dataclass
class SendReport:
    #: Task updates sent (one per task and request, its latest event).
    sent: int = 0
    #: Outbox records the Platform took (what ``tower status`` counts as sent): every
    #: event of each task sent, and each run's completion.
    records: int = 0
    #: Runs something was sent for, and how many of them were completed.
    runs: list[str] = field(default_factory=list)
    completed: int = 0
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    paused: str = ""


def _settings_id(settings: TowerSettings) -> str:
    parts = [settings.endpoint, settings.token, settings.workspace_id]
    if settings.password:  # only then: the ids of settings without one stay as they were
        parts.append(settings.password)
    text = "\0".join(parts)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TowerSender:
    """Delivers one profile's Tower outbox."""

    def __init__(self, profile: Any, settings: TowerSettings | None = None) -> None:
        self.profile = profile
        self.settings = settings or settings_of(profile)
        self.state_file = Path(profile.folder) / "tower-state.json"
        self.retry_at = 0.0
        self.delay = 1.0
        #: The call being made for the current run, named when something unexpected fails.
        self._request = "create"

    # -- the pause survives restarts, and ends when the settings change ------------------------
    def _state(self) -> dict[str, Any]:
        try:
            result: dict[str, Any] = json.loads(self.state_file.read_text())
            return result
        except (OSError, ValueError):
            return {}

    def paused_reason(self) -> str:
        state = self._state()
        if state.get("settings") == _settings_id(self.settings):
            result: str = state.get("message", "")
            return result
        return ""

    def _pause(self, message: str) -> None:
        self._write_state(settings=_settings_id(self.settings), message=message)
        self._note_error(message)
        LOGGER.error("%s Reporting to Seqera Platform is paused.", message)

    def _write_state(self, **values: Any) -> None:
        self.state_file.write_text(json.dumps({**self._state(), **values}))

    def _note_error(self, message: str) -> None:
        """Keep what went wrong last, for `veglia tower status` (a pass in the daemon leaves
        no other trace the CLI can read)."""
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._write_state(last_error={"message": message, "time": now})

    def last_error(self) -> str:
        """The last error a pass met (a 401, a 503, a refused run), with its time; "" if none."""
        error = self._state().get("last_error") or {}
        return f"{error['time']}: {error['message']}" if error.get("message") else ""

    # -- one pass ------------------------------------------------------------------------
    def send_pending(self) -> SendReport:
        report = SendReport()
        if not self.settings.token:
            report.paused = "no access token (tower.access_token or $TOWER_ACCESS_TOKEN)"
            return report
        report.paused = self.paused_reason()
        if report.paused or time.monotonic() < self.retry_at:
            return report
        try:
            check_settings(self.settings)
            client = TowerClient(
                self.settings.endpoint,
                self.settings.token,
                self.settings.workspace_id,
                allow_http=self.settings.allow_http,
                password=self.settings.password,
            )
        except SettingsRejected as exc:
            self._pause(str(exc))
            report.paused = str(exc)
            return report
        try:
            for run_key in outbox.pending_runs():
                self._send_run_alone(client, run_key, report)
            self._heartbeats(client)
            self.delay = 1.0
        except RetryLater as exc:
            wait = exc.after if exc.after is not None else self.delay
            self.retry_at = time.monotonic() + wait
            self.delay = min(self.delay * 2, 300.0)
            report.errors.append(f"{exc}; retrying in {wait:.0f} s")
            self._note_error(str(exc))
        except SettingsRejected as exc:
            self._pause(str(exc))
            report.paused = str(exc)
        finally:
            client.close()
        return report

    def _send_run_alone(self, client: TowerClient, run_key: str, report: SendReport) -> None:
        """One run; whatever goes wrong with it alone marks it, and the pass goes on."""
        run = outbox.get_run(run_key)
        records = report.records
        try:
            self._send_run(client, run, report)
        except (RetryLater, SettingsRejected):
            raise
        except TowerRefused as exc:
            outbox.refuse_run(run, exc.request, exc.status, exc.message)
            report.refused.append(f"{run_key}: {exc}")
            self._note_error(f"run {run_key} refused: {exc}")
            LOGGER.error("Seqera Platform refused run %s: %s", run_key, exc)
        except Exception as exc:  # a bug or a corrupt record must not stop the other runs
            LOGGER.exception("run %s cannot be reported", run_key)
            message = f"{type(exc).__name__}: {exc}"
            outbox.refuse_run(run, self._request, None, message[:500])
            report.refused.append(f"{run_key}: {message}")
            self._note_error(f"run {run_key} cannot be sent: {message[:500]}")
        finally:
            if report.records > records:
                report.runs.append(run_key)

    # -- one run -------------------------------------------------------------------------
    def _tasks(self, run_key: str) -> list[dict[str, Any]]:
        """The latest state of each task of the run, in the order they first appeared."""
        latest: dict[int, dict[str, Any]] = {}
        for task_id, data in outbox.latest_tasks(run_key):
            task = _task(data)
            if task_id not in latest or payload.rank(task) >= payload.rank(latest[task_id]):
                latest[task_id] = task
        return list(latest.values())

    def _workflow(self, run: Any, tasks: list[dict[str, Any]], completed: bool) -> dict[str, Any]:
        return payload.workflow(
            run.data.get("meta") or {},
            tasks,
            workflow_id=run.remote_id,
            run_name=run.run_key,
            session_id=run.data["session_id"],
            completed=completed,
        )

    def _progress(
        self, run: Any, tasks: list[dict[str, Any]], ended: bool = False
    ) -> dict[str, Any]:
        peaks = dict(run.data.get("peaks") or {})
        result = payload.progress(tasks, unsubmitted_jobs(run.run_key), peaks, ended)
        run.data = {**run.data, "peaks": peaks}
        return result

    def _send_run(self, client: TowerClient, run: Any, report: SendReport) -> None:
        self._request = "create"
        tasks = self._tasks(run.run_key)
        if run.remote_id is None:
            session_id = run.data.get("session_id") or str(uuid.uuid4())
            run.data = {**run.data, "session_id": session_id}
            body = {"sessionId": session_id, "runName": run.run_key[:80]}
            body["projectName"] = (run.data.get("meta") or {}).get("projectName") or "veglia"
            run.remote_id = client.create(body)
            outbox.save_run(run)
        if run.state == "new":
            self._request = "begin"
            names = list(dict.fromkeys(t.get("process") or "" for t in tasks))
            workflow = self._workflow(run, tasks, completed=False)
            watch = client.begin(
                run.remote_id,
                {"workflow": workflow, "processNames": names, "towerLaunch": False},
            )
            run.state, run.data = "begun", {**run.data, "watch_url": watch}
            self._touch(run)
        self._send_tasks(client, run, tasks, report)
        for row in outbox.pending_rows(run.run_key, ("complete",)):
            self._request = "complete"
            client.complete(
                run.remote_id,
                {
                    "workflow": self._workflow(run, tasks, completed=True),
                    "metrics": payload.metrics(tasks),
                    "progress": self._progress(run, tasks, ended=True),
                },
            )
            outbox.mark([row.id], "sent")
            report.records += 1
            report.completed += 1
            run.state = "completed"
            self._touch(run)

    def _send_tasks(
        self, client: TowerClient, run: Any, tasks: list[dict[str, Any]], report: SendReport
    ) -> None:
        """Pending task events, the latest per task, at most ``BATCH`` tasks a request."""
        self._request = "progress"
        rows = outbox.pending_rows(run.run_key, outbox.TASK_KINDS)
        by_task: dict[int, list[Any]] = {}
        for row in rows:
            by_task.setdefault(row.task_id, []).append(row)
        task_ids = list(by_task)
        for start in range(0, len(task_ids), BATCH):
            batch = task_ids[start : start + BATCH]
            maps = []
            for task_id in batch:
                events = [_task(row.payload) for row in by_task[task_id]]
                maps.append(max(reversed(events), key=payload.rank))
            client.progress(run.remote_id, {"tasks": maps, "progress": self._progress(run, tasks)})
            ids = [row.id for task_id in batch for row in by_task[task_id]]
            outbox.mark(ids, "sent")
            report.sent += len(batch)
            report.records += len(ids)
            self._touch(run)

    def _touch(self, run: Any) -> None:
        run.last_sent = datetime.now(timezone.utc)
        outbox.save_run(run)

    def _heartbeats(self, client: TowerClient) -> None:
        """A begun run that sends nothing says it is alive about every minute."""
        import sqlalchemy as sa

        with get_storage().session() as session:
            runs = list(
                session.scalars(
                    sa.select(ReportRun).where(
                        ReportRun.reporter == outbox.REPORTER, ReportRun.state == "begun"
                    )
                )
            )
            session.expunge_all()
        now = time.time()
        for run in runs:
            last = run.last_sent.timestamp() if run.last_sent else 0
            if now - last < HEARTBEAT_SECONDS or run.remote_id is None:
                continue  # recently heard from; or never created on the Platform (begun runs are)
            try:
                progress = self._progress(run, self._tasks(run.run_key))
                client.heartbeat(run.remote_id, {"progress": progress})
            except TowerRefused as exc:  # as Nextflow: a refused heartbeat is only a warning
                LOGGER.warning("Seqera Platform refused the heartbeat of %s: %s", run.run_key, exc)
                run.data = {**run.data, "last_error": str(exc)}
                self._note_error(f"heartbeat of {run.run_key} refused: {exc}")
            self._touch(run)

    def run_forever(self, stop: Any, interval: float = 1.0) -> None:
        """Send until ``stop`` (a threading.Event) is set (the daemon's sender thread).

        The settings are read at each pass: `veglia config set tower.enabled yes` (or a new
        token, endpoint) takes effect in a running daemon, and sending stops while
        ``tower.enabled`` is off.
        """
        while not stop.is_set():
            self.settings = settings_of(self.profile)
            try:
                if self.settings.enabled:
                    self.send_pending()
            except Exception:  # a bug here must not take the daemon down
                LOGGER.exception("the Tower sender failed; trying again")
            stop.wait(interval)


def _task(data: dict[str, Any]) -> dict[str, Any]:
    """A queued task as the API's Task (records queued by 0.x are trace records)."""
    return payload.task(data) if "task_id" in data else data
