"""The "GPU / CPU / memory" table of ``veglia process show``, from the job's trace.

A running job shows what the engine last read of its live trace (attribute ``trace_live``);
a finished one what its trace record kept (``trace_record.extras``: the sampler's blocks
under ``trace``, Fusion's under ``fusion``; the GPU block in ``gpu_metrics``). Each row
names where its figures came from. Nothing here reaches the computer.
"""

from __future__ import annotations

import math
import time
from typing import Any

from veglia.plugin_api import hookimpl

__all__ = ["SPARK_WIDTH", "process_show_tables", "sparkline", "trace_rows"]

TITLE = "GPU / CPU / memory"
#: Characters in a row's sparkline; a longer series is averaged into this many buckets.
SPARK_WIDTH = 32
_BLOCKS = "▁▂▃▄▅▆▇█"
#: Columns of a series point (the contract's ``_veglia_trace.series``).
_T, _CPU, _RSS, _MEM, _GPU, _GPU_MEM = range(6)

Row = tuple[str, str, str, str]


@hookimpl
def process_show_tables(node: Any) -> list[tuple[tuple[str, ...], list[tuple[Any, ...]]]]:
    """One table when the job has a trace (live while it runs, else the final one)."""
    rows = trace_rows(node)
    if not rows:
        return []
    return [((TITLE, "Value", "Over the run", "Source"), list(rows))]


def trace_rows(node: Any) -> list[Row]:
    """The table's rows; none for a job without a trace."""
    live = node.get_attribute("trace_live")
    if live and not node.is_terminated:
        return _live_rows(live)
    record = node.get_attribute("trace_record") or {}
    extras = record.get("extras") or {}
    trace = extras.get("trace") or {}
    fusion = extras.get("fusion") or {}
    gpu = node.get_attribute("gpu_metrics") or record.get("gpu_metrics")
    if not (trace or fusion or gpu):
        return []
    sources = trace.get("sources") or {}
    series = trace.get("series") or []
    proc, proc_source = _first_block("proc", trace, fusion)
    cgroup, cgroup_source = _first_block("cgroup", trace, fusion)
    rows = _sampler_row(trace.get("sampler"), live=False)
    if not proc and _number(record.get("peak_rss")) is not None:
        # No sampler, no Fusion: what /usr/bin/time (or sacct, or a plugin) measured.
        proc = _proc_of_record(record)
        usage = node.get_attribute("usage") or {}
        measured_by = record.get("measured_by") or usage.get("source") or "time"
        proc_source = str(measured_by).removeprefix("core.")
    rows += _proc_rows(proc, proc_source, series, live=False)
    rows += _cgroup_rows(cgroup, cgroup_source, series)
    # Neither the sampler nor Fusion named it: another plugin's block.
    gpu_source = sources.get("gpu") or ("fusion" if fusion else "trace" if trace else "plugin")
    rows += _gpu_rows(gpu, gpu_source, series)
    return rows


def _live_rows(live: dict[str, Any]) -> list[Row]:
    latest = live.get("latest") or {}
    series = live.get("series") or []
    sampler = dict(latest.get("sampler") or {})
    if live.get("updated") is not None:
        sampler["read"] = live["updated"]
    rows = _sampler_row(sampler, live=True)
    rows += _proc_rows(latest.get("proc") or {}, "trace", series, live=True)
    rows += _cgroup_rows(latest.get("cgroup") or {}, "trace", series)
    rows += _gpu_rows(latest.get("gpu") or {}, "trace", series)
    return rows


def _first_block(name: str, *traces: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The sampler's block, else Fusion's, with the name of the one taken."""
    for source, trace in zip(("trace", "fusion"), traces, strict=True):
        block = trace.get(name)
        if isinstance(block, dict) and block:
            return block, source
    return {}, ""


def _proc_of_record(record: dict[str, Any]) -> dict[str, Any]:
    """The record's measured fields in the units of a ``proc`` block (kB, percent x10)."""
    proc: dict[str, Any] = {"peak_rss": record["peak_rss"] / 1024}
    if _number(record.get("pcpu")) is not None:
        proc["pct_cpu"] = record["pcpu"] * 10
    if _number(record.get("realtime")) is not None:
        proc["realtime"] = record["realtime"]
    return proc


def _sampler_row(sampler: dict[str, Any] | None, *, live: bool) -> list[Row]:
    if not sampler:
        return []
    parts = []
    if live:
        when = _number(sampler.get("read")) or _number(sampler.get("updated"))
        ago = f", {_duration(max(0.0, time.time() - when / 1000))} ago" if when else ""
        parts.append(f"live{ago}")
    else:
        parts.append("final" if sampler.get("final") else "last sample before the job ended")
    samples, interval = _number(sampler.get("samples")), _number(sampler.get("interval"))
    if samples is not None:
        parts.append(f"{samples:g} sample{'' if samples == 1 else 's'}")
    if interval:
        parts.append(f"every {_duration(interval)}")
    return [("trace", ", ".join(parts), "", "trace")]


def _proc_rows(
    proc: dict[str, Any], source: str, series: list[list[Any]], *, live: bool
) -> list[Row]:
    rows: list[Row] = []
    pct_cpu, realtime = _number(proc.get("pct_cpu")), _number(proc.get("realtime"))
    if pct_cpu is not None:
        text = f"{pct_cpu / 10:.0f}% of one core on average"
        if realtime:
            text += f", {_duration(realtime / 1000 * pct_cpu / 1000)} cpu time"
            text += f" in {_duration(realtime / 1000)}"
        if proc.get("cpu_name"):
            text += f" ({proc['cpu_name']})"
        rows.append(("CPU", text, sparkline(_column(series, _CPU)), source))
    peak, now = _number(proc.get("peak_rss")), _number(proc.get("rss"))
    if peak is not None or now is not None:
        parts = []
        if peak is not None:
            parts.append(f"peak RSS {_bytes(peak * 1024)}")
        if now is not None:
            parts.append(f"{'current' if live else 'last'} RSS {_bytes(now * 1024)}")
        rows.append(("memory", ", ".join(parts), sparkline(_column(series, _RSS)), source))
    return rows


def _cgroup_rows(cgroup: dict[str, Any], source: str, series: list[list[Any]]) -> list[Row]:
    if not cgroup:
        return []
    version = cgroup.get("version", "")
    if cgroup.get("scope") != "job":
        text = (
            f"shared cgroup {version}: not the job's own (other processes count in it), "
            "so its figures are left out"
        )
        return [("cgroup", text.replace("  ", " "), "", source)]
    parts = []
    peak, limit = _number(cgroup.get("memory_peak")), _number(cgroup.get("memory_limit"))
    if peak is not None:
        parts.append(f"memory peak {_bytes(peak)}" + (f" of {_bytes(limit)}" if limit else ""))
    elif limit:
        parts.append(f"memory limit {_bytes(limit)}")
    oom = _number(cgroup.get("memory_oom_kills"))
    if oom:
        parts.append(f"{oom:g} OOM kill(s)")
    throttled = _number(cgroup.get("cpu_throttled_usec"))
    if throttled:
        parts.append(f"CPU throttled {_duration(throttled / 1e6)}")
    text = f"the job's own cgroup {version}" + (": " + ", ".join(parts) if parts else "")
    return [("cgroup", text, sparkline(_column(series, _MEM)), source)]


def _gpu_rows(gpu: dict[str, Any] | None, source: str, series: list[list[Any]]) -> list[Row]:
    if not gpu:
        return []
    rows: list[Row] = []
    devices = gpu.get("devices") or []
    count = f" x {len(devices)}" if len(devices) > 1 else ""
    what = [f"{gpu['name']}{count}" if gpu.get("name") else f"{len(devices) or 1} device(s)"]
    if gpu.get("driver"):
        what.append(f"driver {gpu['driver']}")
    if gpu.get("scope") == "node":
        what.append("every GPU of the node (the job's own were not named)")
    rows.append(("GPU", ", ".join(what), "", source))
    util = [
        f"{label} {value:g}%"
        for label, value in (("avg", _number(gpu.get("pct"))), ("peak", _number(gpu.get("peak"))))
        if value is not None
    ]
    active = _number(gpu.get("active_time"))
    if active is not None:
        util.append(f"active {_duration(active / 1000)}")
    if util:
        rows.append(("GPU use", ", ".join(util), sparkline(_column(series, _GPU)), source))
    memory = []
    for label, mib, pct in (("avg", "avg_mem", "pct_mem"), ("peak", "peak_mem_used", "peak_mem")):
        used, share = _number(gpu.get(mib)), _number(gpu.get(pct))
        if used is not None:
            share_text = f" ({share:.0f}%)" if share is not None else ""
            memory.append(f"{label} {_mib(used)}{share_text}")
    total = _number(gpu.get("mem"))
    if memory or total:
        text = ", ".join(memory) + (f" of {_mib(total)}" if total else "")
        spark = sparkline(_column(series, _GPU_MEM))
        rows.append(("GPU memory", text.strip(), spark, source))
    return rows


def sparkline(values: list[float | None], width: int = SPARK_WIDTH) -> str:
    """``values`` as a row of block characters, averaged into at most ``width`` buckets,
    scaled from zero to the largest; a blank for a bucket with nothing known."""
    if not any(v is not None for v in values):
        return ""
    count = min(width, len(values))
    buckets: list[float | None] = []
    for i in range(count):
        chunk = values[i * len(values) // count : (i + 1) * len(values) // count]
        known = [v for v in chunk if v is not None]
        buckets.append(sum(known) / len(known) if known else None)
    top = max(v for v in buckets if v is not None)
    return "".join(
        " " if v is None else _BLOCKS[0 if top <= 0 else round(v / top * (len(_BLOCKS) - 1))]
        for v in buckets
    )


def _column(series: list[list[Any]], index: int) -> list[float | None]:
    return [_number(point[index]) if len(point) > index else None for point in series]


def _number(value: Any) -> float | None:
    """A measured figure, or None for what was not measured (or is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _bytes(value: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _mib(value: float) -> str:
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds:.2g} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
