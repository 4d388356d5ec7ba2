"""Trace records in the shape of Seqera Platform's trace API (Nextflow's camelCase keys)."""

from __future__ import annotations

import statistics
from datetime import datetime, timezone
from typing import Any

__all__ = ["metrics", "progress", "task_map"]

#: Longest values the API takes for string fields; longer ones are cut, not refused.
MAX_LENGTHS = {
    "name": 255,
    "process": 255,
    "tag": 255,
    "hash": 255,
    "workdir": 1024,
    "queue": 255,
    "nativeId": 255,
    "executor": 255,
    "status": 32,
    "script": 8192,
    "env": 4096,
}
_DATES = ("submit", "start", "complete")
_KEYS = {
    "task_id": "taskId",
    "native_id": "nativeId",
    "status": "status",
    "hash": "hash",
    "name": "name",
    "process": "process",
    "exit": "exit",
    "submit": "submit",
    "start": "start",
    "complete": "complete",
    "duration": "duration",
    "realtime": "realtime",
    "workdir": "workdir",
    "queue": "queue",
    "cpus": "cpus",
    "memory": "memory",
    "time": "time",
    "attempt": "attempt",
    "executor": "executor",
}


def _iso(milliseconds: int | None) -> str | None:
    if milliseconds is None:
        return None
    return datetime.fromtimestamp(milliseconds / 1000, timezone.utc).isoformat()


def task_map(record: dict[str, Any]) -> dict[str, Any]:
    """One ``tasks`` entry of a progress request."""
    task: dict[str, Any] = {}
    for ours, theirs in _KEYS.items():
        value = record.get(ours)
        if ours in _DATES:
            value = _iso(value)
        if isinstance(value, str) and theirs in MAX_LENGTHS:
            value = value[: MAX_LENGTHS[theirs]]
        task[theirs] = value
    # Exactly as Nextflow 26.04 sends it: the Fusion block, its snake_case keys untouched.
    if record.get("gpu_metrics") is not None:
        task["gpuMetrics"] = record["gpu_metrics"]
    return task


def progress(records: list[dict[str, Any]]) -> dict[str, int]:
    """Counts of the run's tasks by state, as WorkflowProgress."""
    statuses = [r.get("status") for r in records]
    return {
        "pending": 0,
        "submitted": 0,
        "running": 0,
        "succeeded": statuses.count("COMPLETED"),
        "failed": statuses.count("FAILED"),
        "cached": sum(1 for r in records if r.get("cached")),
        "aborted": statuses.count("ABORTED"),
    }


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "mean": statistics.fmean(ordered),
        "min": ordered[0],
        "q1": quartiles[0],
        "q2": quartiles[1],
        "q3": quartiles[2],
        "max": ordered[-1],
    }


def _numbers(items: list[dict[str, Any]], key: str) -> list[float]:
    return [
        float(item[key])
        for item in items
        if isinstance(item.get(key), int | float) and not isinstance(item.get(key), bool)
    ]


def metrics(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-process summaries sent at completion: cpu, memory, time, and the GPU's use."""
    by_process: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_process.setdefault(record.get("process") or "", []).append(record)
    result = []
    for process, items in sorted(by_process.items()):
        entry: dict[str, Any] = {
            "process": process,
            "cpu": _summary(_numbers(items, "cpus")),
            "mem": _summary(_numbers(items, "memory")),
            "time": _summary(_numbers(items, "duration")),
            "realtime": _summary(_numbers(items, "realtime")),
        }
        gpus = [r["gpu_metrics"] for r in items if isinstance(r.get("gpu_metrics"), dict)]
        if gpus:
            entry["gpu"] = {
                "pct": _summary(_numbers(gpus, "pct")),
                "peakMemUsed": _summary(_numbers(gpus, "peak_mem_used")),
                "avgMem": _summary(_numbers(gpus, "avg_mem")),
            }
        result.append(entry)
    return result
