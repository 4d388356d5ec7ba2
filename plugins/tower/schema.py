"""Every field veglia sends to Seqera Platform's trace API: its type, its limit, if required.

Written from the Platform's OpenAPI spec (version 1.181.0: the schemas ``Workflow``,
``Task``, ``GpuMetrics``, ``TraceProgressData``, ``TraceProgressDetail``, ``WorkflowMetrics``
and ``ResourceData``) and from the limits Nextflow's own client enforces
(``tower-schema.properties``), which are the Platform's database columns: where the two
differ the smaller limit is kept, since a longer value is refused or the task not saved.

:func:`conform` is the one way a request body is made: it keeps only fields the API knows,
cuts strings to their limit, drops numbers that are not finite or out of their type's
range, writes dates as ISO-8601 with an offset, and raises :class:`RecordError` when a
required field is missing. What it returns can always be encoded and is always accepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from veglia.plugins.tower.exceptions import RecordError

__all__ = [
    "METRICS",
    "PROGRESS",
    "TASK",
    "TASK_STATUSES",
    "WORKFLOW",
    "Field",
    "conform",
    "iso_time",
]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
FLOAT32_MAX = 3.4028234663852886e38
#: How deep an open object (the GPU block) may nest before the rest is dropped.
MAX_DEPTH = 16

TASK_STATUSES = ("NEW", "SUBMITTED", "RUNNING", "CACHED", "COMPLETED", "FAILED", "ABORTED")


@dataclass(frozen=True)
class Field:
    """One field: ``type`` is string, int32, int64, float, double, boolean, date-time,
    strings (a list of strings), object (``fields`` says its shape; ``open`` keeps keys
    it does not know, sanitised) or objects (a list of ``fields``-shaped objects)."""

    type: str
    max_length: int | None = None
    required: bool = False
    fields: dict[str, Field] | None = None
    open: bool = False
    choices: tuple[str, ...] | None = None


def _s(limit: int | None = None, required: bool = False) -> Field:
    return Field("string", limit, required)


INT32_FIELD, INT64_FIELD = Field("int32"), Field("int64")
DOUBLE, FLOAT, BOOLEAN, DATE = Field("double"), Field("float"), Field("boolean"), Field("date-time")

#: ``GpuMetrics``: Fusion's block as it is, these keys typed, any other kept.
GPU_METRICS = {
    "name": _s(),
    "driver": _s(),
    "mem": INT64_FIELD,
    "avg_mem": INT64_FIELD,
    "peak_mem_used": INT64_FIELD,
    "active_time": INT64_FIELD,
    "pct": DOUBLE,
    "peak": DOUBLE,
    "pct_mem": DOUBLE,
    "peak_mem": DOUBLE,
    "avg_mem_bw_util": DOUBLE,
    "peak_mem_bw_util": DOUBLE,
}

#: ``Task``, as far as veglia has something to say (no container, script or cloud fields).
TASK: dict[str, Field] = {
    "taskId": Field("int64", required=True),
    "status": Field("string", 10, required=True, choices=TASK_STATUSES),
    # The backend's TaskData needs hash and name (tasks without them are not saved).
    "hash": _s(34, required=True),
    "name": _s(255, required=True),
    "process": _s(255),
    "submit": DATE,
    "start": DATE,
    "complete": DATE,
    "attempt": INT32_FIELD,
    "workdir": _s(512),
    "queue": _s(100),
    "cpus": INT32_FIELD,
    "memory": INT64_FIELD,
    "time": INT64_FIELD,
    "executor": _s(25),
    "exit": INT32_FIELD,
    "duration": INT64_FIELD,
    "realtime": INT64_FIELD,
    "nativeId": _s(100),
    "pcpu": DOUBLE,
    "pmem": DOUBLE,
    "rss": INT64_FIELD,
    "vmem": INT64_FIELD,
    "peakRss": INT64_FIELD,
    "peakVmem": INT64_FIELD,
    "rchar": INT64_FIELD,
    "wchar": INT64_FIELD,
    "syscr": INT64_FIELD,
    "syscw": INT64_FIELD,
    "readBytes": INT64_FIELD,
    "writeBytes": INT64_FIELD,
    "volCtxt": INT64_FIELD,
    "invCtxt": INT64_FIELD,
    "gpuMetrics": Field("object", fields=GPU_METRICS, open=True),
}

MANIFEST = {
    "name": _s(150),
    "author": _s(150),
    "description": _s(1024),
    "homePage": _s(200),
    "mainScript": _s(100),
    "version": _s(20),
    "nextflowVersion": _s(20),
    "defaultBranch": _s(20),
}
NEXTFLOW = {"version": _s(20), "build": _s(10), "timestamp": DATE}
STATS = {
    "computeTimeFmt": _s(50),
    **{f"{kind}Count": INT32_FIELD for kind in ("succeed", "failed", "ignored", "cached")},
    **{f"{kind}CountFmt": _s() for kind in ("succeed", "failed", "ignored", "cached")},
    **{f"{kind}Pct": FLOAT for kind in ("succeed", "failed", "ignored", "cached")},
    **{f"{kind}Duration": INT64_FIELD for kind in ("succeed", "failed", "cached")},
}

#: ``Workflow``: the spec's required fields, and those the backend's begin checks too
#: (start, scriptName, projectDir, homeDir, scriptFile, launchDir).
WORKFLOW: dict[str, Field] = {
    "id": _s(16),
    "runName": _s(80, required=True),
    "sessionId": _s(36, required=True),
    "projectName": _s(100, required=True),
    "userName": _s(40, required=True),
    "commandLine": _s(8096, required=True),
    "workDir": _s(255, required=True),
    "submit": Field("date-time", required=True),
    "start": Field("date-time", required=True),
    "scriptName": _s(100, required=True),
    "scriptFile": _s(255, required=True),
    "projectDir": _s(255, required=True),
    "homeDir": _s(255, required=True),
    "launchDir": _s(255, required=True),
    "complete": DATE,
    "duration": INT64_FIELD,
    "success": BOOLEAN,
    "exitStatus": INT32_FIELD,
    "errorMessage": _s(255),
    "errorReport": _s(),
    "repository": _s(255),
    "revision": _s(100),
    "commitId": _s(40),
    "scriptId": _s(40),
    "profile": _s(100),
    "resume": BOOLEAN,
    "container": _s(255),
    "containerEngine": _s(255),
    "configFiles": Field("strings"),
    "configText": _s(),
    "params": Field("object", fields={}, open=True),
    "manifest": Field("object", fields=MANIFEST),
    "nextflow": Field("object", fields=NEXTFLOW),
    "stats": Field("object", fields=STATS),
}

_COUNTS: tuple[str, ...] = (
    "pending",
    "submitted",
    "running",
    "succeeded",
    "failed",
    "cached",
    "ignored",
)
_COUNTS += ("aborted", "retries", "stored", "peakRunning")
_LOADS = ("loadCpus", "loadMemory", "peakCpus", "peakMemory")
PROCESS_PROGRESS: dict[str, Field] = {
    "index": INT32_FIELD,
    "name": _s(255),
    "terminated": BOOLEAN,
    **{name: INT32_FIELD for name in _COUNTS},
    **{name: INT64_FIELD for name in _LOADS},
}
PROGRESS: dict[str, Field] = {
    **{name: INT32_FIELD for name in _COUNTS},
    **{name: INT64_FIELD for name in _LOADS},
    "numSpotInterruptions": INT32_FIELD,
    "processes": Field("objects", fields=PROCESS_PROGRESS),
}

RESOURCE_DATA: dict[str, Field] = {
    **{name: FLOAT for name in ("mean", "min", "q1", "q2", "q3", "max")},
    **{f"{name}Label": _s(255) for name in ("min", "max", "q1", "q2", "q3")},
}
#: The per-process series of ``WorkflowMetrics``; the GPU ones are those of Nextflow's #7229.
SERIES: tuple[str, ...] = (
    "cpu",
    "mem",
    "vmem",
    "time",
    "reads",
    "writes",
    "cpuUsage",
    "memUsage",
    "timeUsage",
)
SERIES += ("gpuUsage", "gpuMemPeak", "gpuMemAvg")
METRICS: dict[str, Field] = {
    "process": _s(255, required=True),
    **{name: Field("object", fields=RESOURCE_DATA) for name in SERIES},
}


def iso_time(milliseconds: int | float) -> str:
    """Epoch milliseconds as the API's date-time: ISO-8601 with an offset."""
    moment = datetime.fromtimestamp(milliseconds / 1000, timezone.utc)
    return moment.isoformat(timespec="milliseconds")


def conform(fields: dict[str, Field], data: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``data`` as the API takes it (see the module's docstring)."""
    result: dict[str, Any] = {}
    for name, spec in fields.items():
        value = _value(spec, data.get(name), f"{where}{name}")
        if value is not None:
            result[name] = value
    missing = [name for name, spec in fields.items() if spec.required and name not in result]
    if missing:
        what = where.rstrip(".") or "record"
        raise RecordError(f"{what} lacks the required {', '.join(missing)}")
    return result


def _value(spec: Field, value: Any, where: str) -> Any:
    if value is None:
        return None
    kind = spec.type
    if kind == "string":
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return None
        text = value if isinstance(value, str) else str(value)
        if spec.choices is not None and text not in spec.choices:
            return None
        return text[: spec.max_length] if spec.max_length else text
    if kind in ("int32", "int64"):
        return _integer(value, INT32 if kind == "int32" else INT64)
    if kind in ("float", "double"):
        return _real(value, FLOAT32_MAX if kind == "float" else None)
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "date-time":
        return _date(value)
    if kind == "strings":
        if not isinstance(value, list | tuple):
            return None
        items = [str(v)[: spec.max_length] if spec.max_length else str(v) for v in value]
        return [item for item in items if item]
    if kind == "object":
        if not isinstance(value, dict):
            return None
        known = conform(spec.fields or {}, value, f"{where}.")
        if spec.open:
            for key, item in value.items():
                if isinstance(key, str) and key not in (spec.fields or {}):
                    cleaned = _plain(item, 1)
                    if cleaned is not None:
                        known[key] = cleaned
        return known
    if kind == "objects":
        if not isinstance(value, list | tuple):
            return None
        return [conform(spec.fields or {}, v, f"{where}.") for v in value if isinstance(v, dict)]
    raise AssertionError(f"unknown field type {kind}")


def _integer(value: Any, bounds: tuple[int, int]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = round(value)
    return value if bounds[0] <= value <= bounds[1] else None


def _real(value: Any, limit: float | None) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    if not math.isfinite(number) or (limit is not None and abs(number) > limit):
        return None
    return value if isinstance(value, int) else number


def _date(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value) or not 0 < value < 253402300799000:  # up to year 9999
            return None
        return iso_time(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return value if parsed.tzinfo is not None else None
    return None


def _plain(value: Any, depth: int) -> Any:
    """Any JSON value, with what JSON or the API cannot hold left out."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if INT64[0] <= value <= INT64[1] else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        return [_plain(item, depth + 1) for item in value]
    if isinstance(value, dict):
        cleaned = {}
        for key, item in value.items():
            item = _plain(item, depth + 1)
            if isinstance(key, str) and item is not None:
                cleaned[key] = item
        return cleaned
    return None
