"""A monitor that reads Fusion's GPU metrics while the job runs."""

from __future__ import annotations

import time
from typing import Any

from veglia.engine.calcjob.monitors import MonitorResult
from veglia.plugins.fusion.trace_file import TraceUnusable, read_trace

__all__ = ["gpu_idle"]


def gpu_idle(
    node: Any,
    transport: Any,
    threshold: float = 5.0,
    seconds: float = 600.0,
    state: dict[str, Any] | None = None,
) -> MonitorResult | None:
    """Kill a job whose GPU utilisation stays under ``threshold`` percent for ``seconds``.

    Reads the ``gpu.pct`` that Fusion keeps in ``.fusion/trace.json`` in the work
    directory. No trace yet, or no GPU block, is not a reason to act.

    :param threshold: utilisation (percent) under which the GPU counts as idle.
    :param seconds: how long it may stay idle.
    """

    state = {} if state is None else state
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
