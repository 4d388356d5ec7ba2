"""A monitor that stops a job whose GPU has gone idle."""

from __future__ import annotations

import time
from typing import Any

from veglia.plugin_api import (
    Guard,
    LiveTrace,
    MonitorResult,
    TraceFileUnusable,
    guarded,
    positive_kwarg,
    read_trace_file,
    watch_trace,
)

__all__ = ["gpu_idle"]

#: Where Fusion keeps its trace (the ``core.fusion`` plugin's ``TRACE_PATH``): the fallback
#: of a job without a live trace reads it by its documented path, not through the plugin.
FUSION_TRACE = ".fusion/trace.json"


#: The trace sampler's series read from a remembered offset: the first sample, the last, and
#: the last that was not idle tell whether every sample of the last ``seconds`` was idle and
#: the series reaches that far back, as the monitor judges it.
_SHELL = r"""
# $1: threshold (thousandths of a percent), $2: seconds (ms), $3, $4: both as shown
local LC_ALL=C f=_veglia_trace.series size off=0 first=- busy=- last=- line t g
[[ -r $f ]] || return 0
size=$(stat -L -c %s -- "$f" 2>/dev/null) || return 0
[[ -r $VEGLIA_GUARD_STATE/series ]] && read -r off first busy last <"$VEGLIA_GUARD_STATE/series"
((size < off)) && off=0 first=- busy=- last=-
if ((size > off)); then
    while IFS= read -r line; do
        off=$((off + ${#line} + 1))
        read -r t _ _ _ g _ <<<"$line"
        [[ $t =~ ^[0-9]+$ ]] || continue
        [[ $first == - ]] && first=$t
        last=$t
        if [[ ! $g =~ ^[0-9]+$ ]] || ((g * 1000 >= $1)); then busy=$t; fi
    done < <(tail -c +$((off + 1)) -- "$f" | head -c $((size - off)))
    echo "$off $first $busy $last" >"$VEGLIA_GUARD_STATE/series"
fi
[[ $first != - ]] || return 0
local since=$((last - $2))
((first <= since)) || return 0
[[ $busy == - ]] || ((busy < since)) || return 0
local n=0 most=0 json= name=GPU
while read -r t _ _ _ g _; do
    [[ $t =~ ^[0-9]+$ ]] && ((t >= since)) || continue
    n=$((n + 1))
    ((g > most)) && most=$g
done < <(tail -n 100000 -- "$f")
[[ -r _veglia_trace.json ]] && IFS= read -r -d '' json <_veglia_trace.json
[[ $json =~ \"gpu\":\{[^}]*\"name\":\"([^\"]*)\" ]] && name="GPU ${BASH_REMATCH[1]}"
echo "$name idle: under $3% in all $n samples of the last $4 s (at most $most%)"
return 1
"""


def _arguments(kwargs: dict[str, Any], node: Any) -> list[str]:
    threshold = positive_kwarg(kwargs, "threshold", 5.0)
    seconds = positive_kwarg(kwargs, "seconds", 600.0)
    return [
        str(round(threshold * 1000)),
        str(round(seconds * 1000)),
        f"{threshold:g}",
        f"{seconds:g}",
    ]


@guarded(Guard(shell=_SHELL, arguments=_arguments))
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
    idle = [r for r in readings if r is not None]  # all of them, as checked above
    name = trace.gpu.get("name")
    gpu = f"GPU {name}" if name else "GPU"
    return MonitorResult(
        message=f"{gpu} idle: under {threshold:g}% in all {len(readings)} samples of the last "
        f"{seconds:g} s (at most {max(idle):g}%)",
        retrieve=True,
    )


def idle_by_average(
    transport: Any, threshold: float, seconds: float, state: dict[str, Any]
) -> MonitorResult | None:
    """Stop the job once the ``gpu.pct`` that Fusion keeps in ``.fusion/trace.json`` (the
    average since the task started) has stayed under ``threshold`` for ``seconds``. No
    trace, or no GPU block, is not a reason to act."""
    try:
        trace = read_trace_file(transport, FUSION_TRACE, missing=" (Fusion did not write it)")
    except TraceFileUnusable:
        return None
    gpu = trace.get("gpu") or {}
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
