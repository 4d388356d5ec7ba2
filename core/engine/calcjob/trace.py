"""Trace records: what a calc job did, in the shape Nextflow's trace and Seqera Platform use.

When a job ends the engine builds a :class:`TraceRecord`, lets plugins add to it through
the ``collect_trace`` hook (a GPU block, say), stores it on the node (:func:`attributes_of`),
and hands it to reporters through ``trace_ready`` (which send it on, to Seqera Platform say):
``CalcJob.gather_trace``, ``CalcJob.trace_updated`` and ``CalcJob.trace_ready``.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field, fields
from typing import Any, TypeGuard

from veglia.orm.attributes import CACHE_HASH, GPU_METRICS, TRACE_RECORD
from veglia.schedulers import JobResources

__all__ = [
    "TRANSIENT_FIELDS",
    "TraceRecord",
    "attributes_of",
    "build_record",
    "finish_record",
    "measured_usage",
]


@dataclass
class TraceRecord:
    """One task (calc job) run. Times are epoch milliseconds, memory bytes, durations ms."""

    task_id: int
    name: str
    process: str
    status: str = "RUNNING"
    hash: str = ""
    exit: int | None = None
    submit: int | None = None
    start: int | None = None
    complete: int | None = None
    duration: int | None = None
    realtime: int | None = None
    workdir: str = ""
    executor: str = ""
    native_id: str | None = None
    queue: str | None = None
    cpus: int | None = None
    memory: int | None = None
    time: int | None = None
    attempt: int = 1
    # What the job used, when something measured it (/usr/bin/time, a plugin's trace):
    # %cpu of one core, bytes, counts, as in Nextflow's trace.
    pcpu: float | None = None
    pmem: float | None = None
    rss: int | None = None
    vmem: int | None = None
    peak_rss: int | None = None
    peak_vmem: int | None = None
    rchar: int | None = None
    wchar: int | None = None
    syscr: int | None = None
    syscw: int | None = None
    read_bytes: int | None = None
    write_bytes: int | None = None
    vol_ctxt: int | None = None
    inv_ctxt: int | None = None
    #: Who measured the fields above (a plugin's name; None: the engine's own estimate).
    measured_by: str | None = None
    # Transient fields, filled by plugins and sent with the record, following the
    # ``resourceAllocation`` pattern of Nextflow's TraceRecord.
    gpu_metrics: dict[str, Any] | None = field(default=None, metadata={"transient": True})
    #: What each plugin adds that the record has no field for, under the plugin's name: it
    #: travels with the record (stored, handed to reporters) without the core naming it.
    extras: dict[str, Any] = field(default_factory=dict, metadata={"transient": True})

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies each of ~40 scalars, twice a job.
        return {
            name: copy.deepcopy(value) if isinstance(value, (dict, list)) else value
            for name in _FIELD_NAMES
            for value in (getattr(self, name),)
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_FIELD_NAMES = tuple(f.name for f in fields(TraceRecord))
TRANSIENT_FIELDS = tuple(f.name for f in fields(TraceRecord) if f.metadata.get("transient"))


def _ms(value: float | None) -> int | None:
    return None if value is None else int(value * 1000)


def build_record(node: Any, computer: Any, status: str = "RUNNING") -> TraceRecord:
    """The record of a calc job node as far as it has run."""

    options = node.options or {}
    resources = JobResources(**options.get("resources", {"num_machines": 1}))
    info = node.last_job_info or {}
    memory_kb = options.get("max_memory_kb")
    wallclock = options.get("max_wallclock_seconds")
    submitted = node.submitted_at
    started = node.started_at
    usage = info.get("usage") or {}
    realtime = usage.get("runtime_seconds")
    if realtime is None:
        realtime = info.get("wallclock_seconds")
    peak_kb = usage.get("peak_memory_kb")
    return TraceRecord(
        task_id=node.pk,
        status=status,
        name=node.label or f"{node.process_type} ({node.pk})",
        process=node.process_type,
        hash=node.get_attribute(CACHE_HASH) or "",
        submit=_ms(submitted) if submitted else _ms(node.ctime.timestamp()) if node.ctime else None,
        start=_ms(started),
        realtime=None if realtime is None else int(realtime * 1000),
        pcpu=usage.get("cpu_percent"),
        peak_rss=None if peak_kb is None else int(peak_kb) * 1024,
        workdir=node.remote_workdir or "",
        executor=computer.scheduler_type,
        native_id=node.job_id,
        queue=options.get("queue_name") or info.get("queue"),
        cpus=resources.cpus,
        memory=None if memory_kb is None else int(memory_kb) * 1024,
        time=None if wallclock is None else int(wallclock) * 1000,
        attempt=node.attempt,
        # The batch system's measure (sacct) is one: a plugin's estimate does not replace it.
        measured_by=usage.get("source") if peak_kb is not None else None,
    )


def finish_record(record: TraceRecord, node: Any) -> TraceRecord:
    """Status, exit and times once the process has terminated."""
    outcome = node.job_outcome
    record.exit = outcome.get("exit_status")
    # A restart policy numbers its attempt after submitting it: read it again at the end.
    record.attempt = node.attempt
    if node.process_state == "finished" and node.cached_from:
        record.status = "CACHED"
    elif node.process_state == "finished":
        record.status = "COMPLETED" if node.exit_status == 0 else "FAILED"
    else:  # killed, excepted
        record.status = "ABORTED"
    record.complete = int(time.time() * 1000)
    if record.start is None and record.realtime is not None and record.submit is not None:
        # A job that ran between two polls was never seen running: it started at the
        # latest when its measured run time says, and not before it was submitted.
        record.start = max(record.submit, record.complete - record.realtime)
    if record.submit is not None:
        record.duration = record.complete - record.submit
    return record


def attributes_of(record: TraceRecord) -> dict[str, Any]:
    """The node attributes that carry the record (and its GPU block, if a plugin found one)."""
    values: dict[str, Any] = {TRACE_RECORD: record.to_dict()}
    if record.gpu_metrics is not None:
        values[GPU_METRICS] = record.gpu_metrics
    return values


def measured_usage(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """Peak memory, run time and CPU use measured for the job, as the trace record has them
    (bytes and ms there): the batch system's (``build_record``) or a plugin's
    (``collect_trace``; an exact one replaces the batch system's, an estimate such as
    /usr/bin/time's only stands in for it); None when nothing did, or its numbers are not ones a
    machine could make."""
    record = record or {}
    source, peak, realtime = (record.get(k) for k in ("measured_by", "peak_rss", "realtime"))

    def sane(value: Any, limit: float) -> TypeGuard[int | float]:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return 0 <= value < limit  # a 400-digit int compares; it cannot become a float

    if not source or not sane(peak, 2**63):
        return None
    usage = {
        "peak_memory_kb": int(peak) // 1024,
        "runtime_seconds": realtime / 1000 if sane(realtime, 2**53) else None,
        "source": source,
    }
    if sane(record.get("pcpu"), 2**53):
        usage["cpu_percent"] = record["pcpu"]
    # /usr/bin/time counts the job's commands that did not exit 0, whoever measured the job.
    timed = (record.get("extras") or {}).get("time")
    failed = timed.get("failed_commands") if isinstance(timed, dict) else None
    if sane(failed, 2**31) and failed:
        usage["failed_commands"] = int(failed)
    return usage
