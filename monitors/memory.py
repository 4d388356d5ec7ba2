"""A monitor that stops a job before the scheduler kills it for memory."""

from __future__ import annotations

from typing import Any

from veglia.plugin_api import Guard, LiveTrace, MonitorResult, guarded, positive_kwarg, watch_trace

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


#: The trace sampler's last sample and blocks (docs/trace.md), as the monitor reads them.
_SHELL = r"""
# $1: share of the limit (parts per million), $2: that share as shown, $3: max_memory_kb
local json= cg= proc= last= t cpu rss mem memory= limit= what of
[[ -r _veglia_trace.json ]] || return 0
IFS= read -r -d '' json <_veglia_trace.json
[[ $json =~ \"cgroup\":\{([^}]*)\} ]] && cg=${BASH_REMATCH[1]}
[[ $json =~ \"proc\":\{([^}]*)\} ]] && proc=${BASH_REMATCH[1]}
[[ -r _veglia_trace.series ]] && last=$(tail -n 1 -- _veglia_trace.series)
[[ $last == "#"* ]] && last=
read -r t cpu rss mem _ <<<"$last"
if [[ $cg == *'"scope":"job"'* ]]; then
    if [[ $mem =~ ^[0-9]+$ ]]; then
        memory=$mem
    elif [[ $cg =~ \"memory_rss\":([0-9]+) ]]; then
        memory=${BASH_REMATCH[1]}
    fi
    [[ $cg =~ \"memory_limit\":([0-9]+) ]] && limit=${BASH_REMATCH[1]}
    what="the job's cgroup rss" of="its cgroup's memory limit"
else
    if [[ $rss =~ ^[0-9]+$ ]]; then
        memory=$rss
    elif [[ $proc =~ \"rss\":([0-9]+) ]]; then
        memory=${BASH_REMATCH[1]}
    fi
    [[ -n $memory ]] && memory=$((memory * 1024))
    [[ -n $3 ]] && limit=$(($3 * 1024))
    what="the job's processes' rss" of="max_memory_kb"
fi
[[ -n $memory && -n $limit ]] || return 0
((limit > 0 && limit < 1 << 60)) || return 0
((memory >= limit / 1000000 * $1 + limit % 1000000 * $1 / 1000000)) || return 0
local mib=$(((memory + 524288) / 1048576)) share=$(((memory * 200 + limit) / (2 * limit)))
echo "$what reached $mib MiB, $share% of $of ($(((limit + 524288) / 1048576)) MiB; stopped at $2)"
return 1
"""


def _arguments(kwargs: dict[str, Any], node: Any) -> list[str]:
    fraction = positive_kwarg(kwargs, "fraction", 0.95)
    limit_kb = _number((getattr(node, "options", None) or {}).get("max_memory_kb"))
    return [
        str(round(fraction * 1_000_000)),
        f"{fraction:.0%}",
        "" if limit_kb is None else str(int(limit_kb)),
    ]


@guarded(Guard(shell=_SHELL, arguments=_arguments))
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
