"""What a poll writes on a job's node: only what changed, and a running job's clock rarely.

A running job's elapsed time (``last_job_info.wallclock_seconds``) changes at every poll; with
a thousand jobs on a computer, writing it each time was a thousand database writes per poll
interval, more than the engine could make while keeping the interval. When it is the only
change, it is kept on the node in this process (monitors such as ``core.walltime_guard`` see
it at once) and written every ``CLOCK_WRITE_INTERVAL`` seconds.
"""

from __future__ import annotations

import time
from typing import Any

from veglia.orm import attributes as attr
from veglia.orm.process_nodes import CalcJobNode

__all__ = ["CLOCK_WRITE_INTERVAL", "write_poll"]

#: Seconds between two writes of a running job's elapsed time alone.
CLOCK_WRITE_INTERVAL = 30.0
_CLOCK = "wallclock_seconds"


def _without_clock(values: dict[str, Any]) -> dict[str, Any]:
    info = values.get(attr.LAST_JOB_INFO)
    if not isinstance(info, dict):
        return values
    return {**values, attr.LAST_JOB_INFO: {k: v for k, v in info.items() if k != _CLOCK}}


def write_poll(node: CalcJobNode, changes: dict[str, Any], written: dict[str, float]) -> bool:
    """Write ``changes`` when they differ from the node's; True when written. ``written``
    is the process's memo of when the clock was last written (``{"at": monotonic}``)."""
    current = {key: node.get_attribute(key) for key in changes}
    if current == changes:
        return False
    clock_only = _without_clock(current) == _without_clock(changes)
    if clock_only and time.monotonic() - written.get("at", float("-inf")) < CLOCK_WRITE_INTERVAL:
        node.note_attributes(changes)
        return False
    node.set_attributes(changes)
    written["at"] = time.monotonic()
    return True
