"""HTTP to Seqera Platform's trace endpoints, with httpx.

Each answer is sorted into what the sender must do about it (see ``exceptions``): carry on,
retry later, pause until a setting changes, or give up on the one run.
"""

from __future__ import annotations

import ipaddress
import json
import math
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx

from veglia.plugins.tower.exceptions import RetryLater, SettingsRejected, TowerRefused

__all__ = ["MAX_ANSWER_BYTES", "TowerClient", "check_endpoint"]

#: Trace answers are a few hundred bytes; anything this large is not the Platform talking.
MAX_ANSWER_BYTES = 1 << 20


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(endpoint: str, allow_http: bool = False) -> None:
    """Refuse an endpoint that would carry the token in clear, unless it stays on this host."""
    parts = urlsplit(endpoint)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and (allow_http or _is_loopback(parts.hostname or "")):
        return
    raise SettingsRejected(
        f"tower.endpoint {endpoint!r} is not https://: the access token would cross the "
        "network in clear. Use the https:// URL, or set tower.allow_http to yes if this "
        "network is trusted."
    )


def _encode(body: dict[str, Any]) -> bytes:
    # allow_nan=False: NaN and Infinity are not JSON and the Platform's parser rejects them.
    return json.dumps(body, allow_nan=False, separators=(",", ":")).encode()


class TowerClient:
    """One Platform endpoint, one token, one workspace."""

    def __init__(
        self,
        endpoint: str,
        token: str,
        workspace_id: str = "",
        *,
        allow_http: bool = False,
        timeout: float = 20,
        password: str = "",
    ) -> None:
        check_endpoint(endpoint, allow_http)
        self.endpoint = endpoint.rstrip("/")
        self._token = token
        self._params = {"workspaceId": workspace_id} if workspace_id else {}
        # The user an endpoint names (https://user@host) and tower.password sign each request
        # with HTTP basic auth, as an endpoint with the password in it always did; the
        # password is kept apart so that no message quoting the endpoint shows it.
        user = urlsplit(self.endpoint).username
        self._http = httpx.Client(
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                "Content-Type": "application/json",
            },
            auth=httpx.BasicAuth(unquote(user), password) if user else None,
            timeout=timeout,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def _hide_token(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def call(self, request: str, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """Send one request; its answer's JSON, or the exception saying what to do next."""
        try:
            content = _encode(body)
        except (ValueError, TypeError) as exc:
            raise TowerRefused(request, None, f"not sent, the body is not JSON: {exc}") from None
        try:
            with self._http.stream(
                method, self.endpoint + path, params=self._params, content=content
            ) as response:
                data = self._read_capped(response)
        except httpx.HTTPError as exc:
            raise RetryLater(f"{request}: {type(exc).__name__}: {exc}") from None
        return self._outcome(request, response, data)

    def _read_capped(self, response: httpx.Response) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                return b"\0too-large"
            chunks.append(chunk)
        return b"".join(chunks)

    def _outcome(self, request: str, response: httpx.Response, data: bytes) -> dict[str, Any]:
        code = response.status_code
        if code in (401, 403):
            raise SettingsRejected(
                f"Seqera Platform refused the access token ({code} on {request}"
                f"{': ' + self._message(data) if data else ''}); set a valid one with "
                "`veglia config set tower.access_token TOKEN`, and check tower.workspace_id."
            )
        if 300 <= code < 400:
            # Never followed: a redirect would resend the token wherever it points.
            where = self._hide_token(response.headers.get("Location", "?"))
            raise SettingsRejected(
                f"{self.endpoint} answered {request} with a redirect ({code} to {where}): "
                "tower.endpoint must be the Platform's API URL (https://api.cloud.seqera.io "
                "or your Platform's /api)."
            )
        if code == 429 or code >= 500:
            raise RetryLater(f"{request}: HTTP {code}", after=_retry_after(response))
        if code >= 400:
            raise TowerRefused(request, code, self._message(data))
        if data == b"\0too-large":
            raise TowerRefused(request, code, f"the answer was over {MAX_ANSWER_BYTES} bytes")
        if not data:
            return {}
        try:
            answer = json.loads(data)
        except ValueError:
            raise TowerRefused(request, code, "the answer is not JSON") from None
        return answer if isinstance(answer, dict) else {}

    def _message(self, data: bytes) -> str:
        if data == b"\0too-large":
            return "(an answer too large to read)"
        text = data.decode("utf-8", "replace")
        try:
            message = json.loads(text).get("message")
        except (ValueError, AttributeError):
            message = None
        return self._hide_token(str(message if message else text)[:500])

    # -- the five trace calls --------------------------------------------------------------
    def create(self, body: dict[str, Any]) -> str:
        answer = self.call("create", "POST", "/trace/create", body)
        workflow_id = answer.get("workflowId")
        if not isinstance(workflow_id, str) or not workflow_id:
            raise TowerRefused("create", 200, "the answer has no workflowId")
        return workflow_id

    def _path(self, workflow_id: str, call: str) -> str:
        return f"/trace/{quote(workflow_id, safe='')}/{call}"

    def begin(self, workflow_id: str, body: dict[str, Any]) -> str:
        answer = self.call("begin", "PUT", self._path(workflow_id, "begin"), body)
        watch = answer.get("watchUrl")
        return watch if isinstance(watch, str) else ""

    def progress(self, workflow_id: str, body: dict[str, Any]) -> None:
        self.call("progress", "PUT", self._path(workflow_id, "progress"), body)

    def heartbeat(self, workflow_id: str, body: dict[str, Any]) -> None:
        self.call("heartbeat", "PUT", self._path(workflow_id, "heartbeat"), body)

    def complete(self, workflow_id: str, body: dict[str, Any]) -> None:
        self.call("complete", "PUT", self._path(workflow_id, "complete"), body)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        delay = float(value) if value is not None else None
    except ValueError:
        return None
    return delay if delay is not None and math.isfinite(delay) and delay >= 0 else None
