"""A loopback Seqera Platform that validates the trace API as the real one does.

Written for the tests from the published contract, independently of veglia's own
``plugins/tower/schema.py``:

- the request schemas of Seqera Platform's OpenAPI spec 1.181.0 (``TraceCreateRequest``,
  ``TraceBeginRequest``, ``TraceProgressRequest``, ``TraceHeartbeatRequest``,
  ``TraceCompleteRequest``, ``Workflow``, ``Task``, ``GpuMetrics``, ``TraceProgressData``,
  ``TraceProgressDetail``, ``WorkflowMetrics``, ``ResourceData``), as JSON Schema, checked
  with ``jsonschema``: types, int32/int64/float/double ranges, date-time with an offset,
  enums, required lists, maxLength; a violation is a 400 with ``{"message": ...}``;
- the backend's rules (the open-source nf-tower ``TraceController``/``TraceServiceImpl``/
  ``WorkflowServiceImpl`` and its domain constraints): begin needs a running workflow and
  its launch fields ("Missing field 'start' for workflow id=..."), the database's column
  sizes ("Invalid workflow object"), at most 100 tasks a progress request, unknown
  workflow ids refused, heartbeat refused once complete, complete needs the completed
  state ("Workflow status should be complete"), and tasks that break the task table's
  constraints are not saved (logged by the real server; listed in ``dropped`` here);
- Jackson's leniency: unknown keys are ignored (listed in ``ignored``, so a test can
  assert veglia sends none);
- Bearer auth (401) and the workspace (``workspaceId`` an int64, 403 for another one).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jsonschema
import pytest

__all__ = ["TOKEN", "SeqeraPlatform", "platform"]

#: The access token the loopback Platform takes (shaped like a JWT, as real ones are).
TOKEN = "eyJ0b2tlbi10ZXN0.c2VjcmV0LXBheWxvYWQ.dG93ZXItc2lnbmF0dXJl"

INT32, INT64 = 2**31, 2**63


def _string(max_length: int | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "string", **({"maxLength": max_length} if max_length else {}), **extra}


def _int(fmt: str) -> dict[str, Any]:
    return {"type": "integer", "format": fmt}


def _num(fmt: str | None = None) -> dict[str, Any]:
    return {"type": "number", **({"format": fmt} if fmt else {})}


DATE = {"type": "string", "format": "date-time"}
BOOL = {"type": "boolean"}
STRINGS = {"type": "array", "items": {"type": "string"}}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


# -- the spec's schemas (OpenAPI 1.181.0, components/schemas) ----------------------------------
GPU_METRICS = _object(
    {
        "active_time": _int("int64"),
        "avg_mem": _int("int64"),
        "avg_mem_bw_util": _num("double"),
        "driver": _string(),
        "mem": _int("int64"),
        "name": _string(),
        "pct": _num("double"),
        "pct_mem": _num("double"),
        "peak": _num("double"),
        "peak_mem": _num("double"),
        "peak_mem_bw_util": _num("double"),
        "peak_mem_used": _int("int64"),
    }
)
TASK_STATUS = {"enum": ["NEW", "SUBMITTED", "RUNNING", "CACHED", "COMPLETED", "FAILED", "ABORTED"]}
TASK = _object(
    {
        **{k: _int("int32") for k in ("attempt", "cpus", "exit", "exitStatus")},
        "numSpotInterruptions": _int("int32"),
        **{
            k: _int("int64")
            for k in [
                "taskId",
                "disk",
                "duration",
                "id",
                "invCtxt",
                "memory",
                "peakRss",
                "peakVmem",
                "rchar",
                "readBytes",
                "realtime",
                "rss",
                "syscr",
                "syscw",
                "time",
                "vmem",
                "volCtxt",
                "wchar",
                "writeBytes",
            ]
        },
        **{
            k: _string()
            for k in [
                "cloudZone",
                "container",
                "env",
                "errorAction",
                "errorMessage",
                "executor",
                "hash",
                "logStreamId",
                "machineType",
                "name",
                "nativeId",
                "process",
                "queue",
                "scratch",
                "script",
                "tag",
                "workdir",
            ]
        },
        **{k: DATE for k in ("complete", "dateCreated", "lastUpdated", "start", "submit")},
        "cost": _num(),
        "pcpu": _num("double"),
        "pmem": _num("double"),
        "module": STRINGS,
        "status": TASK_STATUS,
        "priceModel": {"enum": ["standard", "spot"]},
        "gpuMetrics": {"anyOf": [{"type": "null"}, GPU_METRICS]},
        "resourceAllocation": _object(
            {
                "acceleratorCount": _int("int32"),
                "acceleratorName": _string(),
                "acceleratorType": _string(),
                "cpuShares": _int("int32"),
                "memoryMiB": _int("int32"),
                "time": _string(),
            }
        ),
    },
    required=("status", "taskId"),
)
MANIFEST = _object(
    {
        "author": _string(150),
        "defaultBranch": _string(20),
        "description": _string(1024),
        "gitmodules": _string(150),
        "homePage": _string(200),
        "icon": _string(255),
        "mainScript": _string(100),
        "name": _string(150),
        "nextflowVersion": _string(20),
        "version": _string(20),
    }
)
STATS = _object(
    {
        **{f"{k}Count": _int("int32") for k in ("cached", "failed", "ignored", "succeed")},
        **{f"{k}CountFmt": _string() for k in ("cached", "failed", "ignored", "succeed")},
        **{f"{k}Pct": _num("float") for k in ("cached", "failed", "ignored", "succeed")},
        **{f"{k}Duration": _int("int64") for k in ("cached", "failed", "succeed")},
        "computeTimeFmt": _string(50),
    }
)
WORKFLOW = _object(
    {
        "commandLine": _string(8096),
        "commitId": _string(40),
        "complete": DATE,
        "configFiles": STRINGS,
        "configText": _string(),
        "container": _string(),
        "containerEngine": _string(),
        "duration": _int("int64"),
        "errorMessage": _string(),
        "errorReport": _string(),
        "exitStatus": _int("int32"),
        "fusion": _object({"enabled": BOOL, "version": _string(20)}),
        "homeDir": _string(),
        "id": _string(16),
        "launchDir": _string(),
        "launchId": _string(22),
        "logFile": _string(255),
        "manifest": MANIFEST,
        "nextflow": _object({"build": _string(10), "timestamp": DATE, "version": _string(20)}),
        "operationId": _string(110),
        "outFile": _string(255),
        # The spec says additionalProperties {type: object}: Jackson takes any JSON value.
        "params": {"type": "object"},
        "profile": _string(100),
        "projectDir": _string(),
        "projectName": _string(200),
        "repository": _string(),
        "requiresAttention": BOOL,
        "resume": BOOL,
        "revision": _string(100),
        "runName": _string(80),
        "sched": _object({"enabled": BOOL}),
        "scriptFile": _string(),
        "scriptId": _string(40),
        "scriptName": _string(100),
        "sessionId": _string(36),
        "start": DATE,
        "stats": STATS,
        "status": {"enum": ["SUBMITTED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]},
        "submit": DATE,
        "success": BOOL,
        "userName": _string(40),
        "wave": _object({"enabled": BOOL}),
        "workDir": _string(),
    },
    required=(
        "commandLine",
        "projectName",
        "runName",
        "sessionId",
        "submit",
        "userName",
        "workDir",
    ),
)
_COUNTS = "aborted cached failed ignored pending retries running stored submitted succeeded"
_PROGRESS_COMMON = {
    **{k: _int("int32") for k in [*_COUNTS.split(), "peakRunning"]},
    **{k: _int("int64") for k in ("loadCpus", "loadMemory", "peakCpus", "peakMemory")},
}
PROGRESS_DETAIL = _object(
    {**_PROGRESS_COMMON, "index": _int("int32"), "name": _string(), "terminated": BOOL}
)
PROGRESS = _object(
    {
        **_PROGRESS_COMMON,
        "numSpotInterruptions": _int("int32"),
        "processes": {"type": "array", "items": PROGRESS_DETAIL},
    }
)
RESOURCE_DATA = _object(
    {
        **{k: _num("float") for k in ("max", "mean", "min", "q1", "q2", "q3")},
        **{f"{k}Label": _string() for k in ("max", "min", "q1", "q2", "q3")},
        "warnings": STRINGS,
    }
)
SERIES = "cpu cpuUsage gpuMemAvg gpuMemPeak gpuUsage mem memUsage reads time timeUsage vmem writes"
METRICS = _object(
    {
        "id": _int("int64"),
        "process": _string(255),
        **{k: {"anyOf": [{"type": "null"}, RESOURCE_DATA]} for k in SERIES.split()},
    },
    required=("process",),
)
CONTAINER = _object(
    {
        **{k: _string() for k in ["buildId", "mirrorId", "requestId", "scanId", "sourceImage"]},
        "cached": BOOL,
        "freeze": BOOL,
        "requestTime": DATE,
        "targetImage": _string(),
    },
    required=("targetImage",),
)
REQUESTS = {
    "create": _object(
        {
            k: _string()
            for k in ["launchId", "projectName", "repository", "runName", "sessionId", "workflowId"]
        }
    ),
    "begin": _object(
        {
            "launchId": _string(),
            "processNames": STRINGS,
            "towerLaunch": BOOL,
            "workflow": WORKFLOW,
        }
    ),
    "progress": _object(
        {
            "containers": {"type": "array", "items": CONTAINER},
            "progress": PROGRESS,
            "tasks": {"type": "array", "items": TASK},
        }
    ),
    "heartbeat": _object({"progress": PROGRESS}),
    "complete": _object(
        {
            "metrics": {"type": "array", "items": METRICS},
            "progress": PROGRESS,
            "workflow": WORKFLOW,
        }
    ),
}

# -- the backend's own rules (nf-tower) --------------------------------------------------------
#: WorkflowServiceImpl.checkRequiredFields, in its order.
BEGIN_REQUIRED = [
    "start",
    "workDir",
    "userName",
    "sessionId",
    "commandLine",
    "scriptName",
    "projectDir",
    "homeDir",
    "scriptFile",
    "launchDir",
    "runName",
]
#: The Workflow table's column sizes (tower-schema.properties, the domain constraints).
WORKFLOW_COLUMNS = {
    "id": 16,
    "projectDir": 255,
    "profile": 100,
    "homeDir": 255,
    "workDir": 255,
    "container": 255,
    "commitId": 40,
    "repository": 255,
    "containerEngine": 255,
    "scriptFile": 255,
    "userName": 40,
    "launchDir": 255,
    "runName": 80,
    "sessionId": 36,
    "scriptId": 40,
    "revision": 100,
    "projectName": 100,
    "scriptName": 100,
    "commandLine": 8096,
}
#: The task table: (required, maxSize); a task breaking one is not saved.
TASK_COLUMNS = {
    "hash": (True, 34),
    "name": (True, 255),
    "status": (True, 10),
    "process": (False, 255),
    "tag": (False, 255),
    "workdir": (False, 512),
    "queue": (False, 100),
    "nativeId": (False, 100),
    "executor": (False, 25),
    "errorAction": (False, 10),
    "env": (False, 2048),
    "container": (False, 255),
    "machineType": (False, 25),
    "cloudZone": (False, 15),
}


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()

    @checker.checks("date-time", raises=ValueError)
    def date_time(value: object) -> bool:
        if not isinstance(value, str):
            return True
        # Jackson's OffsetDateTime: a full ISO date-time with an offset.
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)", value):
            raise ValueError(f"{value!r} is not an ISO-8601 date-time with an offset")
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return True

    @checker.checks("int32")
    def int32(value: object) -> bool:
        return not isinstance(value, int) or -INT32 <= value < INT32

    @checker.checks("int64")
    def int64(value: object) -> bool:
        return not isinstance(value, int) or -INT64 <= value < INT64

    @checker.checks("float")
    def float32(value: object) -> bool:
        return not isinstance(value, int | float) or abs(value) <= 3.4028234663852886e38

    @checker.checks("double")
    def double(value: object) -> bool:
        return not isinstance(value, float) or math.isfinite(value)

    return checker


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


class Refused(Exception):
    def __init__(self, code: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message"))
        self.code, self.body = code, body


def _unknown_keys(schema: dict[str, Any], value: Any, where: str) -> list[str]:
    """Keys the schema does not know: Jackson drops them without a word."""
    if "anyOf" in schema:
        schema = next((s for s in schema["anyOf"] if s.get("type") == "object"), {})
    if schema.get("type") == "array" and isinstance(value, list):
        return [k for item in value for k in _unknown_keys(schema["items"], item, where + "[]")]
    if schema.get("type") != "object" or not isinstance(value, dict) or where.endswith("params"):
        return []
    known = schema.get("properties", {})
    found = []
    for key, item in value.items():
        if key not in known:
            if not where.endswith("gpuMetrics"):  # the GPU block is forwarded whole
                found.append(f"{where}.{key}")
        else:
            found += _unknown_keys(known[key], item, f"{where}.{key}")
    return found


class SeqeraPlatform:
    """The trace API on 127.0.0.1, validating every request; see the module docstring."""

    def __init__(self, token: str, workspace_id: str | None = None) -> None:
        self.token = token
        self.workspace_id = workspace_id
        self.requests: list[dict[str, Any]] = []
        #: The Authorization header of every request, accepted or not.
        self.authorizations: list[str | None] = []
        self.refusals: list[dict[str, Any]] = []
        self.ignored: list[str] = []
        self.dropped: list[str] = []
        self.workflows: dict[str, dict[str, Any]] = {}
        #: Until this time.monotonic(), every request gets a 503 with Retry-After: 1.
        self.fail_until = 0.0
        #: Run names whose begin is refused with this 400 message.
        self.refuse_begin: dict[str, str] = {}
        #: Answer every request with a redirect to this URL.
        self.redirect_to: str | None = None
        #: Pad each successful answer with this many bytes (a misbehaving proxy, say).
        self.padding = 0
        self._count = 0
        self._lock = threading.Lock()
        self._checker = _format_checker()
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                code, body, headers = platform.handle(self.command, self.path, self.headers, raw)
                data = json.dumps(body).encode()
                self.send_response(code)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PUT = do_GET = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what the tests read --------------------------------------------------------------
    def calls(self, kind: str) -> list[dict[str, Any]]:
        """Accepted requests of one kind: create, begin, progress, heartbeat, complete."""
        return [r for r in self.requests if r["kind"] == kind]

    def tasks(self) -> dict[int, dict[str, Any]]:
        """Every saved task, by taskId, across workflows, in its latest state."""
        return {k: t for w in self.workflows.values() for k, t in w["tasks"].items()}

    def workflow_named(self, run_name: str) -> dict[str, Any]:
        return next(w for w in self.workflows.values() if w.get("runName") == run_name)

    # -- one request ----------------------------------------------------------------------
    def handle(
        self, method: str, path: str, headers: Any, raw: bytes
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        url = urlsplit(path)
        kind = "create" if url.path == "/trace/create" else url.path.rsplit("/", 1)[-1]
        try:
            with self._lock:
                self.authorizations.append(headers.get("Authorization"))
                if self.redirect_to:
                    raise Refused(301, {"message": "moved"})
                if headers.get("Authorization") != f"Bearer {self.token}":
                    raise Refused(401, {"message": "Unauthorized"})
                if time.monotonic() < self.fail_until:
                    raise Refused(503, {"message": "Service Unavailable"})
                self._check_workspace(parse_qs(url.query))
                body = self._parse(method, kind, url.path, raw)
                answer = getattr(self, f"_{kind}")(url.path, body)
                self.requests.append({"kind": kind, "path": url.path, "body": body})
                if self.padding:
                    answer = {**answer, "padding": "x" * self.padding}
                return 200, answer, {}
        except Refused as exc:
            self.refusals.append(
                {"kind": kind, "code": exc.code, "message": exc.body.get("message")}
            )
            extra = {"Retry-After": "1"} if exc.code == 503 else {}
            if exc.code == 301:
                extra = {"Location": self.redirect_to or ""}
            return exc.code, exc.body, extra

    def _check_workspace(self, query: dict[str, list[str]]) -> None:
        values = query.get("workspaceId")
        if values is None:
            return
        value = values[0]
        if not re.fullmatch(r"-?\d+", value) or not -INT64 <= int(value) < INT64:
            raise Refused(400, {"message": f"Invalid workspaceId: {value}"})
        if self.workspace_id is not None and value != self.workspace_id:
            raise Refused(403, {})

    def _parse(self, method: str, kind: str, path: str, raw: bytes) -> dict[str, Any]:
        expected = "POST" if kind == "create" else "PUT"
        if kind not in REQUESTS or method != expected:
            raise Refused(404, {"message": f"Page Not Found: {method} {path}"})
        try:
            body = json.loads(raw, parse_constant=_not_json)
        except ValueError as exc:
            raise Refused(400, {"message": f"Invalid JSON: {exc}"}) from None
        errors = sorted(
            jsonschema.Draft202012Validator(
                REQUESTS[kind], format_checker=self._checker
            ).iter_errors(body),
            key=lambda e: list(e.absolute_path),
        )
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path)
            raise Refused(
                400, {"message": f"Failed to convert argument [{where}]: {errors[0].message}"}
            )
        self.ignored += _unknown_keys(REQUESTS[kind], body, kind)
        return body

    # -- the endpoints, as the backend handles them -------------------------------------------
    def _workflow_of(self, path: str) -> tuple[str, dict[str, Any]]:
        workflow_id = unquote(path.split("/")[2])
        if workflow_id not in self.workflows:
            raise Refused(400, {"status": "KO", "message": f"Unknown workflow Id={workflow_id}"})
        return workflow_id, self.workflows[workflow_id]

    def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._count += 1
        workflow_id = f"vN8K{self._count:04d}"
        self.workflows[workflow_id] = {"state": "created", "tasks": {}, "create": body}
        return {"message": None, "workflowId": workflow_id, "watchUrl": None}

    def _begin(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        workflow_id, state = self._workflow_of(path)
        workflow = body.get("workflow") or {}

        def ko(message: str) -> Refused:
            return Refused(400, {"status": "KO", "message": message, "workflowId": None})

        status = workflow.get("status") or (
            "RUNNING"
            if workflow.get("complete") is None
            else "SUCCEEDED"
            if workflow.get("success")
            else "FAILED"
        )
        if status != "RUNNING":
            raise ko(f"Workflow status should be running -- current={status}")
        for name in BEGIN_REQUIRED:
            if not workflow.get(name):
                raise ko(f"Missing field '{name}' for workflow id={workflow.get('id')}")
        too_long = [
            k for k, limit in WORKFLOW_COLUMNS.items() if len(str(workflow.get(k) or "")) > limit
        ]
        if not workflow.get("projectName") or too_long:
            raise ko(f"Invalid workflow object: {too_long or ['projectName']}")
        if workflow.get("runName") in self.refuse_begin:
            raise ko(self.refuse_begin[workflow["runName"]])
        if workflow.get("id") != workflow_id:
            raise ko(f"Unable to find workflow id={workflow.get('id')}")
        state.update(workflow, state="running", processNames=body.get("processNames"))
        return {
            "status": "OK",
            "workflowId": workflow_id,
            "watchUrl": f"{self.url}/watch/{workflow_id}",
        }

    def _progress(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if len(body.get("tasks") or []) > 100:
            raise Refused(400, {"status": "KO", "message": "Workflow trace request too big"})
        workflow_id, state = self._workflow_of(path)
        if body.get("progress") is None or body.get("tasks") is None:
            raise Refused(
                500, {"message": "Internal Server Error: progress and tasks are required"}
            )
        for task in body["tasks"]:
            broken = [
                f"{k} {'missing' if not task.get(k) else 'too long'}"
                for k, (required, limit) in TASK_COLUMNS.items()
                if (required and not task.get(k)) or len(str(task.get(k) or "")) > limit
            ]
            if broken:  # the real server logs it and does not save the task
                self.dropped.append(f"task {task.get('taskId')}: {', '.join(broken)}")
                continue
            state["tasks"][task["taskId"]] = {**state["tasks"].get(task["taskId"], {}), **task}
        state["progress"] = body["progress"]
        return {"status": "OK", "workflowId": workflow_id}

    def _heartbeat(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        workflow_id, state = self._workflow_of(path)
        if state["state"] == "completed":
            message = f"Unexpected execution status workflow with Id: {workflow_id}"
            raise Refused(400, {"message": f"Oops.. something went wrong -- {message}"})
        state["progress"] = body.get("progress")
        return {"message": "OK"}

    def _complete(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        workflow = body.get("workflow")

        def ko(message: str) -> Refused:
            return Refused(400, {"status": "KO", "message": message, "workflowId": None})

        if not workflow:
            raise ko("Missing completion request workflow")
        if not workflow.get("id"):
            raise ko("Missing completion request workflow id")
        if workflow.get("complete") is None and workflow.get("status") not in (
            "SUCCEEDED",
            "FAILED",
        ):
            current = workflow.get("status") or "RUNNING"
            raise ko(f"Workflow status should be complete -- current={current}")
        if workflow["id"] not in self.workflows:
            raise ko(f"Can't find workflow with id={workflow['id']}")
        state = self.workflows[workflow["id"]]
        for key in ("success", "complete", "duration", "exitStatus", "errorMessage", "stats"):
            state[key] = workflow.get(key)
        state.update(state="completed", metrics=body.get("metrics"), progress=body.get("progress"))
        return {"status": "OK", "workflowId": workflow["id"]}


@pytest.fixture
def platform():
    """A validating loopback Platform for workspace 42, taking :data:`TOKEN`."""
    server = SeqeraPlatform(TOKEN, workspace_id="42")
    yield server
    server.close()
