"""Fusion's view of a job's GPU while it runs: the fallback of ``core.gpu_idle`` for a job
without a live trace."""

from __future__ import annotations

import time
from typing import Any

from veglia.engine.calcjob.monitors import MonitorResult
from veglia.plugins.fusion.trace_file import TraceUnusable, read_trace

__all__ = ["idle_by_average"]


def idle_by_average(
    transport: Any, threshold: float, seconds: float, state: dict[str, Any]
) -> MonitorResult | None:
    """Stop the job once the ``gpu.pct`` that Fusion keeps in ``.fusion/trace.json`` (the
    average since the task started) has stayed under ``threshold`` for ``seconds``. No
    trace, or no GPU block, is not a reason to act."""
    try:
        gpu = read_trace(transport).get("gpu") or {}
    except TraceUnusable:
        return None
    pct = gpu.get("pct")
    if not isinstance(pct, int | float) or isinstance(pct, bool):
        return None
    now = time.time()
    if pct >= threshold:
        state.pop("idle_since", None)
        return None
    since = state.setdefault("idle_since", now)
    if now - since >= seconds:
        return MonitorResult(
            message=f"GPU {gpu.get('name', '')} idle ({pct}% < {threshold}%) for "
            f"{now - since:.0f} s".replace("GPU  ", "GPU "),
            retrieve=True,
        )
    return None
