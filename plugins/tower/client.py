"""HTTP to Seqera Platform's trace endpoints, with httpx."""

from __future__ import annotations

import time
from typing import Any

import httpx

__all__ = ["AuthFailed", "RetryLater", "TowerClient", "TowerRefused"]


class RetryLater(Exception):
    """The Platform is busy or unreachable (429, 5xx, timeout, network); try again later."""

    def __init__(self, message: str, after: float | None = None) -> None:
        super().__init__(message)
        self.after = after


class AuthFailed(Exception):
    """401/403: the access token is wrong or lacks the rights; retrying cannot help."""


class TowerRefused(Exception):
    """Another 4xx: this request will never be taken as it is."""


class TowerClient:
    """One Platform endpoint, one token, one workspace."""

    def __init__(self, endpoint: str, token: str, workspace_id: str = "", timeout: float = 20):
        self.endpoint = endpoint.rstrip("/")
        self.workspace_id = workspace_id
        self._http = httpx.Client(
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
        )

    def close(self) -> None:
        self._http.close()

    def _url(self, path: str) -> str:
        url = f"{self.endpoint}{path}"
        return f"{url}?workspaceId={self.workspace_id}" if self.workspace_id else url

    def call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        body = {**body, "instant": int(time.time() * 1000)}
        try:
            response = self._http.request(method, self._url(path), json=body)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise RetryLater(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        code = response.status_code
        if code in (401, 403):
            raise AuthFailed(
                f"Seqera Platform refused the access token ({code} on {path}); set a valid "
                "one with `veglia config set tower.access_token TOKEN`."
            )
        if code == 429 or code >= 500:
            after = response.headers.get("Retry-After")
            try:
                delay = float(after) if after is not None else None
            except ValueError:
                delay = None
            raise RetryLater(f"{method} {path}: HTTP {code}", after=delay)
        if code >= 400:
            raise TowerRefused(f"{method} {path}: HTTP {code}: {response.text[:300]}")
        try:
            return response.json() if response.content else {}
        except ValueError:
            return {}

    def create(self, run_key: str, session_id: str) -> str:
        reply = self.call(
            "POST",
            "/trace/create",
            {
                "sessionId": session_id,
                "runName": run_key,
                "projectName": "veglia",
                "repository": None,
                "workflowId": None,
            },
        )
        workflow_id = reply.get("workflowId")
        if not workflow_id:
            raise TowerRefused("POST /trace/create answered without a workflowId")
        return str(workflow_id)

    def begin(self, workflow_id: str, workflow: dict[str, Any], process_names: list[str]) -> str:
        reply = self.call(
            "PUT",
            f"/trace/{workflow_id}/begin",
            {
                "workflow": workflow,
                "processNames": process_names,
                "towerLaunch": False,
            },
        )
        return str(reply.get("watchUrl") or "")

    def progress(self, workflow_id: str, tasks: list[dict[str, Any]], progress: dict) -> None:
        self.call("PUT", f"/trace/{workflow_id}/progress", {"tasks": tasks, "progress": progress})

    def heartbeat(self, workflow_id: str, progress: dict) -> None:
        self.call("PUT", f"/trace/{workflow_id}/heartbeat", {"progress": progress})

    def complete(self, workflow_id: str, workflow: dict, metrics: list, progress: dict) -> None:
        self.call(
            "PUT",
            f"/trace/{workflow_id}/complete",
            {
                "workflow": workflow,
                "metrics": metrics,
                "progress": progress,
            },
        )
