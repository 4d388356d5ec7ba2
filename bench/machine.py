"""The line every bench prints first: the machine its figures were measured on; and the
machine's busy CPU time, which benches read before and after a run.

Benches run as scripts (``python bench/NAME.py``), so this directory is on ``sys.path`` and
``from machine import describe`` works from any of them.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import re
from pathlib import Path


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        if found:
            return found.group(1).strip()
    return platform.machine()


def memory_gib() -> float:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    return 0.0


def describe(*extra: str) -> str:
    """CPU model and count, memory, load, Python and the date; then ``extra`` parts."""
    parts = [
        f"{os.cpu_count()} CPUs ({cpu_model()})",
        f"{memory_gib():.0f} GiB",
        f"load {os.getloadavg()[0]:.1f}",
        f"Python {platform.python_version()}",
        datetime.date.today().isoformat(),
        *extra,
    ]
    return ", ".join(parts)


def machine_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (every process, every user)."""
    tick = os.sysconf("SC_CLK_TCK")
    parts = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + parts[4]
    return (sum(parts[:8]) - idle) / tick
