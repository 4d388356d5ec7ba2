"""Monitors that watch the job's time."""

from __future__ import annotations

import math
from typing import Any

from veglia.plugin_api import Guard, MonitorResult, guarded, positive_kwarg

__all__ = ["walltime_guard"]


#: From the job's start as the watcher saw it: exact, and cheap enough to run always.
_SHELL = r"""
# $1: seconds after which to stop (empty: no wall time asked), $2: the limit, $3: the share
[[ -n $1 ]] || return 0
local elapsed=$((VEGLIA_GUARD_NOW - VEGLIA_GUARD_STARTED))
((elapsed >= $1)) || return 0
echo "ran $elapsed s of its $2 s ($3 reached)"
return 1
"""


def _arguments(kwargs: dict[str, Any], node: Any) -> list[str]:
    fraction = positive_kwarg(kwargs, "fraction", 0.9)
    limit = (getattr(node, "options", None) or {}).get("max_wallclock_seconds")
    if not limit:
        return ["", "", ""]
    return [str(math.ceil(fraction * limit)), str(limit), f"{fraction:.0%}"]


@guarded(Guard(shell=_SHELL, arguments=_arguments, always=True))
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
