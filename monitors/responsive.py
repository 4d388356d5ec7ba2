"""A monitor that stops a job the scheduler says is running but that does nothing: no CPU
and no output for a while (a process stopped with SIGSTOP, a deadlock, a wait on a
mount that hung)."""

from __future__ import annotations

from typing import Any

from veglia.plugin_api import LiveTrace, MonitorResult, positive_kwarg, watch_trace

__all__ = ["unresponsive"]


@watch_trace
def unresponsive(
    node: Any,
    transport: Any,
    seconds: float = 1800.0,
    cpu_percent: float = 1.0,
    state: dict[str, Any] | None = None,
    trace: LiveTrace | None = None,
) -> MonitorResult | None:
    """Stop a running job that has used under ``cpu_percent`` of one core and written
    nothing for ``seconds``: it no longer responds.

    From the job's live trace (the trace sampler): every sample of the last ``seconds``
    under ``cpu_percent``, the trace reaching that far back, and the bytes the job's
    processes wrote (``proc.wchar``) unchanged for as long. A job the scheduler still
    queues is never judged. The restart policy (``core.restart``) cancels and resubmits a
    job it stopped once, unchanged; stopped a second time, the job has failed.

    :param seconds: how long a job may do nothing.
    :param cpu_percent: CPU use, in percent of one core, under which a sample counts as idle.
    """
    seconds = positive_kwarg({"seconds": seconds}, "seconds", 1800.0)
    cpu_percent = positive_kwarg({"cpu_percent": cpu_percent}, "cpu_percent", 1.0)
    if trace is None or trace.last is None:
        return None
    if getattr(node, "get_attribute", lambda *_: None)("scheduler_state") not in (
        None,
        "running",
    ):
        return None
    state = {} if state is None else state
    now = trace.last.t
    written = trace.proc.get("wchar")
    # The output's last change, on the computer's clock (the samples' ms).
    if state.get("wchar") != written or "since" not in state:
        state["wchar"], state["since"] = written, now
    if written is None or now - state["since"] < seconds * 1000:
        return None
    if not trace.covers(seconds):
        return None
    window = trace.recent(seconds)
    # A sample's cpu is percent of one core x10 (Fusion's units).
    readings = [s.cpu for s in window]
    if not readings or any(r is None or r >= cpu_percent * 10 for r in readings):
        return None
    return MonitorResult(
        message=f"not responding: under {cpu_percent:g}% of a core in all {len(readings)} "
        f"samples of the last {seconds:g} s, and nothing written meanwhile ({written} bytes "
        "in all)",
        retrieve=True,
    )
