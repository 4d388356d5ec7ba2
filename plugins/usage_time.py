"""``core.time``: each job's peak memory, run time and CPU use, measured by ``/usr/bin/time``.

Every command line of a job runs under ``/usr/bin/time -a -o _veglia_usage -f '%M %e %P'``
where the computer has it (``measure_usage``, yes by default), through the ``job_script_wrap``
hook any plugin can use. Once the job has ended, ``collect_trace`` reads the file back: the
largest peak memory of one process (kB), the summed run time and the CPU use, kept on the trace
record under ``extras["time"]``, and as the record's measured figures when no plugin measured
the job before (Fusion) and the batch system did not (SLURM's sacct counts every process of the
job, where ``%M`` is the largest single one).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import hookimpl

if TYPE_CHECKING:
    # Lazy: every process loads this hook module (`veglia --help` too); the engine when asked.
    from veglia.plugin_api import ComputerProperty, JobScriptWrap

__all__ = ["USAGE_FILE", "measurement", "parse_usage"]

#: Where ``/usr/bin/time`` appends one line per command, in the job's work directory.
USAGE_FILE = "_veglia_usage"
#: The most of it read back: a few lines per command, and the job may write there too.
MAX_USAGE_BYTES = 65536
#: The line GNU time writes before the figures of a command that did not exit 0 ("Command
#: exited with non-zero status 3", "Command terminated by signal 9"): expected, not garbage.
_COMMAND_ENDED = re.compile(r"Command (?:exited with non-zero status|terminated by signal) (\d+)")


@hookimpl
def computer_properties() -> list[ComputerProperty]:
    """``measure_usage`` (``veglia computer setup --measure-usage yes``)."""
    # Lazy: every process loads this hook module; the ORM only when asked.
    from veglia.plugin_api import ComputerProperty

    return [
        ComputerProperty(
            "measure_usage", True, "Record each job's peak memory with /usr/bin/time (yes/no)."
        )
    ]


@hookimpl
def job_script_wrap(node: Any, computer: Any) -> JobScriptWrap | None:
    """Each command line under ``/usr/bin/time``, when the computer has it."""
    if not computer.get_property("measure_usage"):
        return None
    # Lazy: the engine only in a process that writes job scripts.
    from veglia.plugin_api import JobScriptWrap

    return JobScriptWrap(
        name="core.time",
        before=(
            f"VEGLIA_TIME=(); [ -x /usr/bin/time ] && VEGLIA_TIME=(/usr/bin/time -a -o "
            f"{USAGE_FILE} -f '%M %e %P')"
        ),
        prefix='"${VEGLIA_TIME[@]}"',
    )


@hookimpl
def collect_trace(node: Any, transport: Any, record: Any, computer: Any) -> None:
    """What ``/usr/bin/time`` wrote, on the record (``extras["time"]``)."""
    if transport is None:
        return
    # Lazy: the transport's errors only for a process that collects traces.
    from veglia.plugin_api import TransportError

    try:
        info = transport.lstat(USAGE_FILE)
        if not info.is_file:
            return  # a link or a FIFO the job made: nothing of it is read
        raw = transport.read_bytes(USAGE_FILE, size=MAX_USAGE_BYTES)
    except TransportError:
        return  # no /usr/bin/time there, or no command ran
    usage = parse_usage(raw.decode(errors="replace"))
    if usage is None:
        return
    dropped = usage.pop("dropped", 0)
    if dropped:
        node.add_log("REPORT", f"{dropped} line(s) of {USAGE_FILE} were not sane numbers: dropped")
    if "peak_memory_kb" not in usage:
        return
    record.extras["time"] = usage
    if record.measured_by is None:
        record.peak_rss = usage["peak_memory_kb"] * 1024
        record.realtime = int(usage["runtime_seconds"] * 1000)
        record.pcpu = usage.get("cpu_percent")
        record.measured_by = "time"


#: The largest measurement taken as one: beyond it a float loses whole units.
MAX_MEASURE = 2**53


def measurement(text: str) -> float | None:
    """A finite, non-negative number below :data:`MAX_MEASURE`, or None (``nan``, ``inf``,
    ``1e999``, a 400-digit count, a negative time: what a job may write, no machine measured)."""
    try:
        value = float(text)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and 0 <= value < MAX_MEASURE else None


def parse_usage(text: str) -> dict[str, Any] | None:
    """``/usr/bin/time -f '%M %e %P'`` lines: the largest peak memory, the summed run time,
    and the CPU use (percent of one core) over the whole run time.

    GNU time's own line for a command that exited non-zero or was killed is read as such:
    ``failed_commands`` counts them. The job can write this file too: any other line that is
    not three sane numbers is dropped, and counted in ``dropped``."""
    peaks, seconds, cpu_seconds = [], [], []
    dropped = failed = 0
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if _COMMAND_ENDED.fullmatch(line.strip()):
            failed += 1
            continue
        peak = measurement(parts[0]) if parts[0].isdigit() else None
        elapsed = measurement(parts[1]) if len(parts) in (2, 3) else None
        if peak is None or elapsed is None:
            dropped += 1
            continue
        peaks.append(int(peak))
        seconds.append(elapsed)
        percent = measurement(parts[2].rstrip("%")) if len(parts) == 3 else None
        if percent is not None:
            cpu_seconds.append(elapsed * percent / 100)
    if not peaks:
        return {"dropped": dropped} if dropped else None
    usage: dict[str, Any] = {
        "peak_memory_kb": max(peaks),
        "runtime_seconds": round(sum(seconds), 2),
        "source": "time",
    }
    if cpu_seconds and sum(seconds) > 0:
        usage["cpu_percent"] = round(100 * sum(cpu_seconds) / sum(seconds), 1)
    if failed:
        usage["failed_commands"] = failed
    if dropped:
        usage["dropped"] = dropped
    return usage
