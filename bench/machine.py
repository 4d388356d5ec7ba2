"""The line every bench prints first: the machine its figures were measured on.

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
