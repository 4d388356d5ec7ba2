"""A monitor that stops a job whose GPU has gone idle."""

from __future__ import annotations

from typing import Any

from veglia.engine.calcjob.live_trace import LiveTrace, watch_trace
from veglia.engine.calcjob.monitors import MonitorResult
from veglia.plugins.fusion.gpu_idle import idle_by_average

__all__ = ["gpu_idle"]


@watch_trace
def gpu_idle(
    node: Any,
    transport: Any,
    threshold: float = 5.0,
    seconds: float = 600.0,
    state: dict[str, Any] | None = None,
    trace: LiveTrace | None = None,
) -> MonitorResult | None:
    """Kill a job whose GPU utilisation stays under ``threshold`` percent for ``seconds``.

    Judges the recent use, from the job's live trace: every sample of the last ``seconds``
    under ``threshold``, and the trace reaching that far back. A job busy for hours that
    then hangs is stopped ``seconds`` after it went idle, whatever its average. A sample
    without a GPU reading is not idle. A job without a live trace is judged on Fusion's
    ``.fusion/trace.json`` instead, whose ``gpu.pct`` is the average since it started.

    :param threshold: utilisation (percent) under which the GPU counts as idle.
    :param seconds: how long it may stay idle.
    """
    if trace is None:
        if LiveTrace.expected(node):
            return None  # its sampler has not written yet
        return idle_by_average(transport, threshold, seconds, {} if state is None else state)
    if not trace.covers(seconds):
        return None
    window = trace.recent(seconds)
    readings = [s.gpu for s in window]
    if not readings or any(r is None or r >= threshold for r in readings):
        return None
    name = trace.gpu.get("name")
    gpu = f"GPU {name}" if name else "GPU"
    return MonitorResult(
        message=f"{gpu} idle: under {threshold:g}% in all {len(readings)} samples of the last "
        f"{seconds:g} s (at most {max(readings):g}%)",
        retrieve=True,
    )
