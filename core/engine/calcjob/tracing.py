"""When a calc job's trace record is built, added to by plugins, stored and reported.

``collect_trace`` plugins add to the record from the job's work dir once the job has left
the scheduler; ``trace_updated`` reporters hear of submission and start; ``trace_ready``
reporters get the finished record when the process has terminated.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from veglia.engine.calcjob.trace import TraceRecord, build_record, finish_record
from veglia.engine.runner import get_runner
from veglia.exceptions import TransportError
from veglia.orm import attributes as attr
from veglia.plugin_manager import call_each, has_implementations

if TYPE_CHECKING:
    from veglia.engine.calcjob.process import CalcJob

__all__ = ["attributes_of", "collect", "gather", "measured_usage", "ready", "store", "updated"]


async def collect(process: CalcJob) -> None:
    """The job's trace record, with what plugins add from its work dir, stored."""
    store(process, await gather(process))


async def gather(process: CalcJob) -> TraceRecord:
    """The job's trace record, with what plugins add from its work dir."""
    node = process.node
    assert node is not None
    workdir = node.remote_workdir
    try:
        async with get_runner().lease_transport(process.computer) as lease:

            def in_workdir(transport: Any) -> TraceRecord:
                transport.cwd = workdir or "/"
                return _with_plugins(process, transport)

            return await lease.run(in_workdir, lease.transport)
    except (TransportError, OSError) as exc:  # the trace must never cost the job
        node.add_log("DEBUG", f"trace collected without the computer: {exc}")
        return _with_plugins(process, None)


def updated(process: CalcJob, status: str) -> None:
    """Tell reporters the job was submitted or started."""
    if not has_implementations("trace_updated"):
        return  # no reporter listens: build nothing on the hot path
    node = process.node
    assert node is not None
    record = build_record(node, process.computer, status)
    for plugin, exc in call_each("trace_updated", node=node, record=record):
        node.add_log("WARNING", f"plugin {plugin} failed to report the trace: {exc}")


def ready(process: CalcJob) -> None:
    """The process has terminated: finish the record and hand it to reporters."""
    node = process.node
    assert node is not None
    data = node.get_attribute(attr.TRACE_RECORD)
    record = TraceRecord.from_dict(data) if data else _with_plugins(process, None)
    if record.gpu_metrics is None and node.get_attribute(attr.GPU_METRICS) is not None:
        record.gpu_metrics = node.get_attribute(attr.GPU_METRICS)  # copied from the cache
    finish_record(record, node.refresh())
    store(process, record)
    for plugin, exc in call_each("trace_ready", node=node, record=record):
        node.add_log("WARNING", f"plugin {plugin} failed to report the trace: {exc}")


def _with_plugins(process: CalcJob, transport: Any) -> TraceRecord:
    node = process.node
    assert node is not None
    computer = process.computer
    record = build_record(node, computer)
    for plugin, exc in call_each(
        "collect_trace", node=node, transport=transport, record=record, computer=computer
    ):
        node.add_log("WARNING", f"plugin {plugin} failed to collect the trace: {exc}")
    return record


def store(process: CalcJob, record: TraceRecord) -> None:
    """The record on the job's node (with its GPU block, if a plugin found one)."""
    assert process.node is not None
    process.node.set_attributes(attributes_of(record))


def attributes_of(record: TraceRecord) -> dict[str, Any]:
    """The node attributes that carry the record (and its GPU block, if a plugin found one)."""
    values: dict[str, Any] = {attr.TRACE_RECORD: record.to_dict()}
    if record.gpu_metrics is not None:
        values[attr.GPU_METRICS] = record.gpu_metrics
    return values


def measured_usage(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """Peak memory, run time and CPU use measured for the job, as the trace record has them
    (bytes and ms there): the batch system's (``build_record``) or a plugin's
    (``collect_trace``; an exact one replaces the batch system's, an estimate such as
    /usr/bin/time's only stands in for it); None when nothing did, or its numbers are not ones a
    machine could make."""
    record = record or {}
    source, peak, realtime = (record.get(k) for k in ("measured_by", "peak_rss", "realtime"))

    def sane(value: Any, limit: float) -> bool:
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
    return usage
