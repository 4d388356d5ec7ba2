"""A monitor that stops a job before the scheduler kills it for memory."""

from __future__ import annotations

from typing import Any

from veglia.engine.calcjob.live_trace import LiveTrace, watch_trace
from veglia.engine.calcjob.monitors import MonitorResult

__all__ = ["memory_ceiling"]

#: A cgroup's "no limit" (v1 writes the largest page-aligned 63-bit number).
_UNLIMITED = 1 << 60


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def _figures(node: Any, trace: LiveTrace) -> tuple[float | None, float | None, str, str]:
    """(memory in bytes, limit in bytes, what the memory is, what the limit is)."""
    last = trace.last
    if trace.cgroup.get("scope") == "job":
        memory = last.mem if last is not None and last.mem is not None else None
        memory = _number(memory if memory is not None else trace.cgroup.get("memory_rss"))
        limit = _number(trace.cgroup.get("memory_limit"))
        return memory, limit, "the job's cgroup rss", "its cgroup's memory limit"
    rss_kb = last.rss if last is not None and last.rss is not None else trace.proc.get("rss")
    memory = _number(rss_kb)
    limit_kb = _number((node.options or {}).get("max_memory_kb"))
    return (
        None if memory is None else memory * 1024,
        None if limit_kb is None else limit_kb * 1024,
        "the job's processes' rss",
        "max_memory_kb",
    )


def _mib(value: float) -> str:
    return f"{value / 1024 / 1024:.0f} MiB"


@watch_trace
def memory_ceiling(
    node: Any, transport: Any, fraction: float = 0.95, trace: LiveTrace | None = None
) -> MonitorResult | None:
    """Stop the job, retrieving its files, when its memory passes ``fraction`` of its
    limit, so it ends with the reason instead of the scheduler's kill for memory.

    From the job's live trace: when the trace found the job's own cgroup, its anonymous
    memory (rss) against the cgroup's limit; otherwise the rss of the job's processes
    against ``metadata.options.max_memory_kb``. No limit known: it never stops the job.
    The restart policy (``core.restart``) resubmits a job it stopped with more memory, as
    after a kill for memory.

    :param fraction: share of the limit at which the job is stopped.
    """
    if trace is None:
        return None
    memory, limit, what, of = _figures(node, trace)
    if memory is None or not limit or limit >= _UNLIMITED:
        return None
    if memory < fraction * limit:
        return None
    return MonitorResult(
        message=f"{what} reached {_mib(memory)}, {memory / limit:.0%} of {of} ({_mib(limit)}; "
        f"stopped at {fraction:.0%})",
        retrieve=True,
    )
