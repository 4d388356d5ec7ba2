"""Monitors that read the job's output files in its work directory.

All three declare their file with ``watch_files``: the engine reads it for every job of a
computer in one command per cycle and hands over only what is new (or only the size).
"""

from __future__ import annotations

import re
import time
from typing import Any

from veglia.engine.calcjob.file_watch import FileSlice, FileWatch, watch_files
from veglia.engine.calcjob.monitors import MonitorResult

__all__ = ["convergence", "file_pattern", "stalled_output"]

_MAX_READ = 4 * 1024 * 1024
Files = dict[str, FileSlice]


@watch_files(FileWatch("{path}", lines=True, max_bytes=_MAX_READ))
def file_pattern(
    node: Any,
    transport: Any,
    path: str,
    pattern: str,
    retrieve: bool = True,
    files: Files | None = None,
) -> MonitorResult | None:
    """Kill the job when a line of ``path`` (in its work directory) matches the regex
    ``pattern``. Only the lines written since the last poll are read.

    :param path: file to watch, relative to the work directory.
    :param pattern: regular expression searched in each new line.
    :param retrieve: bring the job's files back before ending it.
    """
    assert files is not None  # watch_files fills it
    regex = re.compile(pattern)
    for line in files[path].lines():
        if regex.search(line):
            return MonitorResult(
                message=f"{path} matched {pattern!r}: {line.strip()[:200]}", retrieve=retrieve
            )
    return None


@watch_files(FileWatch("{path}", mode="stat"))
def stalled_output(
    node: Any,
    transport: Any,
    path: str,
    seconds: float,
    state: dict[str, Any],
    files: Files | None = None,
) -> MonitorResult | None:
    """Kill the job when ``path`` has not grown for ``seconds`` (a hung program).

    :param path: file to watch, relative to the work directory.
    :param seconds: how long it may stay the same size.
    """
    assert files is not None  # watch_files fills it
    size = files[path].size
    now = time.time()
    if size != state.get("size"):
        state.update(size=size, since=now)
        return None
    if now - state["since"] >= seconds:
        what = "does not exist" if size < 0 else f"stayed at {size} bytes"
        return MonitorResult(
            message=f"{path} {what} for {now - state['since']:.0f} s", retrieve=True
        )
    return None


@watch_files(FileWatch("{path}", lines=True, max_bytes=_MAX_READ))
def convergence(
    node: Any,
    transport: Any,
    path: str,
    pattern: str,
    window: int = 5,
    rtol: float = 1e-3,
    state: dict[str, Any] | None = None,
    files: Files | None = None,
) -> MonitorResult | None:
    """Kill the job when a numeric series stops improving (a stagnating SCF, say).

    Each new line of ``path`` matching ``pattern`` (a regex whose first group is the number)
    adds a value. When the best of the last ``window`` values improves on the best before
    them by less than ``rtol`` (relative), the job is stopped.

    :param path: file to read, relative to the work directory.
    :param pattern: regex with one group capturing the value, e.g. ``'energy = (\\S+)'``.
    :param window: how many values to judge.
    :param rtol: the relative improvement that counts as progress.
    """
    assert files is not None  # watch_files fills it
    state = {} if state is None else state
    regex = re.compile(pattern)
    values = state.setdefault("values", [])
    for line in files[path].lines():
        match = regex.search(line)
        if match:
            try:
                values.append(float(match.group(1)))
            except (ValueError, IndexError):
                continue
    del values[: -(window * 4)]  # enough history, bounded state
    if len(values) <= window:
        return None
    before, recent = min(values[:-window]), min(values[-window:])
    improvement = (before - recent) / max(abs(before), 1e-300)
    if improvement < rtol:
        return MonitorResult(
            message=f"no progress in the last {window} values of {path}: best {recent:g}, "
            f"before {before:g} (improvement {improvement:.2e} < {rtol:g})",
            retrieve=True,
        )
    return None
