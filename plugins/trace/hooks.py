"""The ``core.trace`` plugin's hook implementations."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import hookimpl, parse_positive_seconds
from veglia.plugins.trace.show import process_show_tables

if TYPE_CHECKING:
    # Lazy: every process loads this hook module (`veglia --help` too); the engine when asked.
    from veglia.plugin_api import ComputerProperty, JobScriptWrap

__all__ = [
    "BLOCKS",
    "SERIES_FILE",
    "TRACE_FILE",
    "parse_interval",
    "process_show_tables",
    "sampler_text",
    "start_text",
]

#: The live trace in the job's work directory, Fusion's blocks plus the sampler's.
TRACE_FILE = "_veglia_trace.json"
#: One line per periodic sample (see docs/trace.md).
SERIES_FILE = "_veglia_trace.series"
#: The sampler's functions, uploaded beside the job script, which sources them.
SAMPLER_FILE = "_veglia_trace.sh"
#: The blocks of the trace file read back.
BLOCKS = ("proc", "cgroup", "gpu", "sampler")


#: ``trace_interval`` as typed: seconds, more than zero.
parse_interval = parse_positive_seconds


@hookimpl
def computer_properties() -> list[ComputerProperty]:
    """``trace`` (yes/no) and ``trace_interval`` (seconds between samples)."""
    # Lazy: every process loads this hook module; the ORM only when asked.
    from veglia.plugin_api import ComputerProperty

    return [
        ComputerProperty("trace", True, "Sample each job's trace beside it (yes/no)."),
        ComputerProperty(
            "trace_interval", 10, "Seconds between a job's trace samples.", parse_interval
        ),
    ]


@functools.cache
def sampler_text() -> str:
    """The sampler's bash functions (``_veglia_trace.sh``), without their comment lines."""
    return _packaged("veglia.plugins.trace", "sampler.sh")


@functools.cache
def start_text() -> str:
    """What the job script's own shell holds: ``veglia_trace_start`` and ``_stop``."""
    return _packaged("veglia.plugins.trace", "start.sh")


@hookimpl
def job_script_wrap(node: Any, computer: Any) -> JobScriptWrap | None:
    """The sampler around the job's commands, unless the computer's ``trace`` is off."""
    if not computer.get_property("trace"):
        return None
    # Lazy: the engine only in a process that writes job scripts.
    from veglia.plugin_api import JobScriptWrap

    interval = parse_interval(str(computer.get_property("trace_interval")))
    return JobScriptWrap(
        name="core.trace",
        # A file beside the script, the same for every job: stored once in the repository.
        # The placeholder fd keeps the prefix's close valid should the sampler not start.
        before=(
            f"exec {{veglia_trace_fd}}</dev/null\n{start_text()}\nveglia_trace_start {interval}"
        ),
        files={SAMPLER_FILE: sampler_text()},
        # The job's programs must not hold the sampler's pipe: a daemon the job leaves
        # behind would keep the sampler from seeing the end.
        prefix="{veglia_trace_fd}>&-",
        after="veglia_trace_stop 2>/dev/null || :",
        live_trace=True,
        sample_interval=interval,
    )


@hookimpl(trylast=True)
def collect_trace(node: Any, transport: Any, record: Any, computer: Any) -> None:
    """The sampler's blocks on the record, where Fusion (run first) put none."""
    if transport is None:
        return
    # Lazy: every process loads this hook module (`veglia --help` too); the engine only for
    # a process that collects traces.
    from veglia.plugin_api import TraceFileUnusable, apply_proc_block, read_trace_file

    try:
        blocks = read_trace_file(
            transport, TRACE_FILE, BLOCKS, missing=" (the job ran without the sampler)"
        )
    except TraceFileUnusable as exc:
        node.add_log("DEBUG", f"trace: no sampled trace: {exc}")
        return
    sources: dict[str, str] = {}
    if "gpu" in blocks:
        if record.gpu_metrics is None:
            record.gpu_metrics = blocks["gpu"]
            sources["gpu"] = "trace"
        else:
            sources["gpu"] = "fusion"
    proc = blocks.get("proc")
    if proc is not None:
        if record.measured_by is None and apply_proc_block(record, proc):
            record.measured_by = "trace"
        sources["proc"] = "fusion" if record.measured_by == "fusion" else "trace"
    if "cgroup" in blocks:
        sources["cgroup"] = "trace"
    sampler = blocks.get("sampler")
    record.extras["trace"] = {
        "proc": proc,
        "cgroup": blocks.get("cgroup"),
        "sampler": sampler,
        "sources": sources,
        "series": _final_series(node, transport) if _sampled_periodically(sampler) else [],
    }


def _sampled_periodically(sampler: Any) -> bool:
    """Whether the sampler wrote a series (its periodic samples do, its final one does not):
    not when the final sample was its only one, as for a job that ended before its first,
    whose series is not looked for (a round trip to the computer saved)."""
    return not (
        isinstance(sampler, dict) and sampler.get("final") is True and sampler.get("samples") == 1
    )


#: The most of a finished job's series read back: its last ~150,000 samples (17 days at
#: the default interval), enough for a plot of MAX_POINTS.
MAX_SERIES_BYTES = 8 * 1024 * 1024


def _final_series(node: Any, transport: Any) -> list[list[Any]]:
    """The whole run's series, evenly cut down to a plot's points (the live one keeps the
    recent samples finer, for monitors)."""
    # Lazy: the engine only for a process that collects traces.
    from veglia.plugin_api import TransportError, evenly, parse_series

    try:
        info = transport.lstat(SERIES_FILE)
        if not info.is_file:
            return []
        offset = max(0, info.size - MAX_SERIES_BYTES)
        raw = transport.read_bytes(SERIES_FILE, offset=offset, size=MAX_SERIES_BYTES)
    except TransportError:
        return []
    text = raw.decode(errors="replace")
    if offset:
        text = text.partition("\n")[2]  # a line cut by the offset
    samples, dropped = parse_series(text, at_start=offset == 0)
    if dropped:
        node.add_log("DEBUG", f"trace: {dropped} line(s) of {SERIES_FILE} were not samples")
    return [list(point) for point in evenly(samples)]


def _packaged(package: str, name: str) -> str:
    # Lazy: every process loads this hook module; the engine only where scripts are written.
    from veglia.plugin_api import packaged_shell

    return packaged_shell(package, name)
