"""Monitors that watch the job's time."""

from __future__ import annotations

from typing import Any

from veglia.engine.calcjob.monitors import MonitorResult

__all__ = ["walltime_guard"]


def walltime_guard(node: Any, transport: Any, fraction: float = 0.9) -> MonitorResult | None:
    """Stop the job at ``fraction`` of its requested wall time, leaving time to retrieve
    its files, instead of letting the scheduler kill it at the limit.

    :param fraction: share of ``max_wallclock_seconds`` after which the job is stopped.
    """
    limit = (node.options or {}).get("max_wallclock_seconds")
    if not limit:
        return None
    # The scheduler's own count of the time the job has run (not queued).
    elapsed = (node.last_job_info or {}).get("wallclock_seconds")
    if elapsed is not None and elapsed >= fraction * limit:
        return MonitorResult(
            message=f"ran {elapsed:.0f} s of its {limit} s ({fraction:.0%} reached)",
            retrieve=True,
            parse=True,
        )
    return None
