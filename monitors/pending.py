"""A monitor that watches queued jobs: one that can never start is stopped with the reason."""

from __future__ import annotations

import functools
import time
from typing import Any

from veglia.plugin_api import MonitorResult, get_profile, load_computer, similar_waits

__all__ = ["pending_too_long"]


@functools.lru_cache(maxsize=64)
def _scheduler_of(profile_id: str, computer_label: str) -> Any:
    """The computer's scheduler, read once: this runs at every poll of every queued job."""

    return load_computer(computer_label).get_scheduler()


def pending_too_long(
    node: Any, transport: Any, min_wait: float = 600.0, spread: float = 3.0, state: Any = None
) -> MonitorResult | None:
    """Ask the scheduler why a queued job waits; stop it when it can never start there.

    A job whose pending reason means its queue cannot run it as it asks (SLURM's
    ``PartitionTimeLimit``, ``PartitionDown``, ...) is stopped at once, so a restart policy
    can move it. A job queued longer than similar jobs were (mean + ``spread`` SD, at
    least ``min_wait`` seconds) gets one report line with the scheduler's reason.

    :param min_wait: seconds a job may be queued before it counts as waiting long.
    :param spread: standard deviations above similar jobs' mean wait that count as long.
    """

    info = node.last_job_info or {}
    if info.get("state") != "queued":
        return None
    reason = info.get("reason") or ""
    queue = info.get("queue") or "the default queue"
    scheduler = _scheduler_of(get_profile().id, node.computer_label)
    if reason and scheduler.unsatisfiable_reason(reason):
        return MonitorResult(
            message=f"it cannot start in queue {queue}: the scheduler says {reason}"
        )
    submitted = node.submitted_at
    if submitted is None or state is None or state.get("reported"):
        return None
    waited = time.time() - submitted
    if waited <= min_wait:  # the limit is never below min_wait: no history needed yet
        return None
    waits = similar_waits(node.similarity_key or "")
    limit = max(min_wait, waits.mean + spread * waits.stdev) if waits else min_wait
    if waited > limit:
        state["reported"] = True
        node.add_log(
            "REPORT",
            f"queued for {waited:.0f} s in {queue}, longer than similar jobs wait "
            f"({limit:.0f} s); the scheduler says: {reason or 'no reason given'}",
        )
    return None
