"""The bodies of the trace calls, as Nextflow's nf-tower builds them, made with ``schema``.

Tasks are turned into the API's ``Task`` when they are queued, so the outbox holds exactly
what is sent; the run's ``Workflow``, ``progress`` and ``metrics`` are made when sent, from
the latest state of each of its tasks.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

from veglia.plugin_api import launch_context
from veglia.plugins.tower import schema

__all__ = ["metrics", "progress", "task", "workflow"]

#: A trace record's status, ranked: a later event of a task never loses to an earlier one.
STATUS_RANK = {"NEW": 0, "SUBMITTED": 1, "RUNNING": 2}
_FINAL = ("COMPLETED", "FAILED", "ABORTED", "CACHED")

#: Trace record key (``TraceRecord``) -> Task key, where they differ only by case.
_TASK_KEYS = {
    "task_id": "taskId",
    "native_id": "nativeId",
    "peak_rss": "peakRss",
    "peak_vmem": "peakVmem",
    "read_bytes": "readBytes",
    "write_bytes": "writeBytes",
    "vol_ctxt": "volCtxt",
    "inv_ctxt": "invCtxt",
    "gpu_metrics": "gpuMetrics",
}


def task(record: dict[str, Any]) -> dict[str, Any]:
    """One ``Task`` from a trace record (``TraceRecord.to_dict()``)."""
    data = {_TASK_KEYS.get(key, key): value for key, value in record.items()}
    if not data.get("hash"):
        data["hash"] = f"veglia-{record.get('task_id')}"
    return schema.conform(schema.TASK, data, "task.")


def rank(task_map: dict[str, Any]) -> int:
    return STATUS_RANK.get(task_map.get("status", ""), 3)


def _ms(text: str | None) -> float | None:
    from datetime import datetime

    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def workflow(
    meta: dict[str, Any],
    tasks: list[dict[str, Any]],
    *,
    workflow_id: str,
    run_name: str,
    session_id: str,
    completed: bool,
) -> dict[str, Any]:
    """The ``Workflow`` of a run: its launch (``meta``, from the first job) and its tasks."""
    moments = [_ms(t.get("start") or t.get("submit")) for t in tasks]
    starts = [s for s in moments if s is not None]
    submit = meta.get("submit") or (min(starts) if starts else time.time() * 1000)
    start = min([submit, *starts])
    data: dict[str, Any] = {
        "id": workflow_id,
        "runName": run_name,
        "sessionId": session_id,
        "submit": submit,
        "start": start,
        "resume": False,
        "params": {},
        **_default_meta(),
        **{key: meta[key] for key in _META_KEYS if meta.get(key)},
    }
    if completed:
        data.update(_completion(tasks, start))
    return schema.conform(schema.WORKFLOW, data, "workflow.")


#: What the first job of a run says about its launch (``hooks.run_meta``).
_META_KEYS = (
    "projectName",
    "userName",
    "commandLine",
    "workDir",
    "scriptName",
    "scriptFile",
    "projectDir",
    "homeDir",
    "launchDir",
    "profile",
    "manifest",
)


def _default_meta() -> dict[str, str]:
    """For a run queued without its launch facts (by an older release)."""
    from pathlib import Path

    home, launch = str(Path.home()), launch_context()
    return {
        "projectName": "veglia",
        "userName": launch["user"],
        "commandLine": "veglia",
        "workDir": home,
        "scriptName": "veglia",
        "scriptFile": "veglia",
        "projectDir": home,
        "homeDir": home,
        "launchDir": home,
    }


def _completion(tasks: list[dict[str, Any]], start: float) -> dict[str, Any]:
    complete = time.time() * 1000
    ends = [_ms(t.get("complete")) for t in tasks]
    complete = max([e for e in ends if e is not None] or [complete])
    failed = [t for t in tasks if t.get("status") in ("FAILED", "ABORTED")]
    result: dict[str, Any] = {
        "complete": complete,
        "duration": int(max(0, complete - start)),
        "success": not failed,
        "exitStatus": 0 if not failed else next((t["exit"] for t in failed if t.get("exit")), 1),
        "stats": _stats(tasks),
    }
    if failed:
        names = ", ".join(str(t.get("name")) for t in failed[:5])
        result["errorMessage"] = f"{len(failed)} of {len(tasks)} tasks failed: {names}"
    return result


def _stats(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(t.get("status") for t in tasks)
    total = len(tasks) or 1
    kinds = {"succeed": "COMPLETED", "failed": "FAILED", "cached": "CACHED"}
    stats: dict[str, Any] = {"ignoredCount": 0, "ignoredCountFmt": "0", "ignoredPct": 0.0}
    for kind, status in kinds.items():
        stats[f"{kind}Count"] = counts[status]
        stats[f"{kind}CountFmt"] = f"{counts[status]:,}"
        stats[f"{kind}Pct"] = round(100 * counts[status] / total, 2)
        stats[f"{kind}Duration"] = sum(
            int(t.get("realtime") or 0) * int(t.get("cpus") or 1)
            for t in tasks
            if t.get("status") == status
        )
    cpu_ms = sum(int(t.get("realtime") or 0) * int(t.get("cpus") or 1) for t in tasks)
    hours = cpu_ms / 3_600_000
    stats["computeTimeFmt"] = "(a few seconds)" if cpu_ms < 180_000 else f"{hours:.1f}"
    return stats


# -- progress ---------------------------------------------------------------------------------
def progress(
    tasks: list[dict[str, Any]],
    pending: int = 0,
    peaks: dict[str, Any] | None = None,
    terminated: bool = False,
) -> dict[str, Any]:
    """``TraceProgressData``: the run's tasks by state, overall and per process.

    ``pending`` counts jobs not yet submitted (the outbox knows only submitted ones);
    ``peaks`` carries the highest loads seen so far and is updated in place;
    ``terminated`` says the run has ended (its processes will run no more tasks).
    """
    peaks = peaks if peaks is not None else {}
    overall = _counts(tasks, pending, peaks)
    processes = []
    for index, name in enumerate(dict.fromkeys(t.get("process") or "" for t in tasks)):
        mine = [t for t in tasks if (t.get("process") or "") == name]
        entry = _counts(mine, 0, peaks.setdefault(f"process:{name}", {}))
        entry.update(index=index, name=name, terminated=terminated)
        processes.append(entry)
    overall["processes"] = processes
    return schema.conform(schema.PROGRESS, overall, "progress.")


def _counts(tasks: list[dict[str, Any]], pending: int, peaks: dict[str, Any]) -> dict[str, Any]:
    statuses = Counter(t.get("status") for t in tasks)
    running = [t for t in tasks if t.get("status") == "RUNNING"]
    load_cpus = sum(int(t.get("cpus") or 1) for t in running)
    load_memory = sum(int(t.get("memory") or 0) for t in running)
    for key, value in (
        ("peakRunning", len(running)),
        ("peakCpus", load_cpus),
        ("peakMemory", load_memory),
    ):
        peaks[key] = max(int(peaks.get(key, 0)), value)
    return {
        "pending": pending,
        "submitted": statuses["SUBMITTED"],
        "running": len(running),
        "succeeded": statuses["COMPLETED"],
        "failed": statuses["FAILED"],
        "cached": statuses["CACHED"],
        "aborted": statuses["ABORTED"],
        "ignored": 0,
        "retries": sum(1 for t in tasks if int(t.get("attempt") or 1) > 1),
        "stored": 0,
        "loadCpus": load_cpus,
        "loadMemory": load_memory,
        "peakRunning": peaks["peakRunning"],
        "peakCpus": peaks["peakCpus"],
        "peakMemory": peaks["peakMemory"],
    }


# -- metrics ----------------------------------------------------------------------------------
def _gpu(key: str) -> Any:
    return lambda t: (t.get("gpuMetrics") or {}).get(key)


def _ratio(part: str, whole: str, scale: float = 100) -> Any:
    def value(t: dict[str, Any]) -> float | None:
        if not t.get(part) or not t.get(whole):
            return None
        ratio: float = t[part] / t[whole] * scale
        return ratio

    return value


#: Each series of ``WorkflowMetrics`` and the measured value of a task it summarises; a
#: request (cpus, memory, time) is never taken for a measurement.
_SERIES = {
    "cpu": lambda t: t.get("pcpu"),
    "mem": lambda t: t.get("peakRss"),
    "vmem": lambda t: t.get("peakVmem"),
    "time": lambda t: t.get("realtime"),
    "reads": lambda t: t.get("rchar"),
    "writes": lambda t: t.get("wchar"),
    "cpuUsage": lambda t: t["pcpu"] / (t.get("cpus") or 1) if t.get("pcpu") else None,
    "memUsage": _ratio("peakRss", "memory"),
    "timeUsage": _ratio("realtime", "time"),
    "gpuUsage": _gpu("pct"),
    "gpuMemPeak": _gpu("peak_mem_used"),
    "gpuMemAvg": _gpu("avg_mem"),
}


def metrics(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-process summaries sent at completion, of the tasks that completed or were
    cached (as Nextflow's ResourcesAggregator); a series without measurements is left out."""
    by_process: dict[str, list[dict[str, Any]]] = {}
    for t in tasks:
        if t.get("status") in ("COMPLETED", "CACHED"):
            by_process.setdefault(t.get("process") or "", []).append(t)
    result = []
    for process, items in by_process.items():
        entry: dict[str, Any] = {"process": process or "-"}
        for series, measure in _SERIES.items():
            entry[series] = summary(
                [(t.get("name") or "", measure(t)) for t in items if _number(measure(t))]
            )
        result.append(schema.conform(schema.METRICS, entry, "metrics."))
    return result


def _number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def summary(labelled: list[tuple[str, float]]) -> dict[str, Any] | None:
    """``ResourceData``: mean, min, quartiles and max (R's type 7, as Nextflow's
    ReportSummary), rounded to two decimals, with the task names at min, max and quartiles;
    None without values or when every value is zero."""
    if not labelled:
        return None
    items = sorted(labelled, key=lambda item: float(item[1]))
    values = [float(value) for _, value in items]
    if values[0] == 0 and values[-1] == 0:
        return None
    result: dict[str, Any] = {"mean": _round(sum(values) / len(values))}
    for key, q in (("min", 0), ("q1", 25), ("q2", 50), ("q3", 75), ("max", 100)):
        position = (len(values) - 1) * q / 100
        low, high = math.floor(position), math.ceil(position)
        result[key] = _round(values[low] + (position - low) * (values[high] - values[low]))
        result[f"{key}Label"] = items[low if q < 100 else -1][0]
    return result


def _round(value: float) -> float:
    return round(value * 100) / 100
