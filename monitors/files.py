"""Monitors that read the job's output files in its work directory."""

from __future__ import annotations

import re
import time
from typing import Any

from veglia.engine.calcjob.monitors import MonitorResult
from veglia.exceptions import TransportError

__all__ = ["convergence", "file_pattern", "stalled_output"]

_MAX_READ = 4 * 1024 * 1024


def _new_bytes(transport: Any, path: str, state: dict[str, Any]) -> str:
    """What was appended to ``path`` since the last call (at most 4 MiB at a time)."""
    try:
        info = transport.lstat(path)
    except TransportError:
        return ""  # not written yet
    if not info.is_file:
        return ""  # a link or a FIFO the job made: never followed, never waited on
    size = info.size
    offset = state.get("offset", 0)
    if size < offset:  # truncated or rewritten: read it again from the start
        offset = 0
    data = (
        transport.read_bytes(path, offset, min(size - offset, _MAX_READ)) if size > offset else b""
    )
    state["offset"] = offset + len(data)
    # Keep a line cut in two by the read for the next call.
    tail = state.pop("partial", "")
    text = tail + data.decode(errors="replace")
    head, newline, rest = text.rpartition("\n")
    state["partial"] = rest[-4096:]
    return head + newline


def file_pattern(
    node: Any,
    transport: Any,
    path: str,
    pattern: str,
    state: dict[str, Any],
    retrieve: bool = True,
) -> MonitorResult | None:
    """Kill the job when a line of ``path`` (in its work directory) matches the regex
    ``pattern``. Only the bytes written since the last poll are read.

    :param path: file to watch, relative to the work directory.
    :param pattern: regular expression searched in each new line.
    :param retrieve: bring the job's files back before ending it.
    """
    regex = re.compile(pattern)
    for line in _new_bytes(transport, path, state).splitlines():
        if regex.search(line):
            return MonitorResult(
                message=f"{path} matched {pattern!r}: {line.strip()[:200]}", retrieve=retrieve
            )
    return None


def stalled_output(
    node: Any, transport: Any, path: str, seconds: float, state: dict[str, Any]
) -> MonitorResult | None:
    """Kill the job when ``path`` has not grown for ``seconds`` (a hung program).

    :param path: file to watch, relative to the work directory.
    :param seconds: how long it may stay the same size.
    """
    try:
        size = transport.stat(path).size
    except TransportError:
        size = -1
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


def convergence(
    node: Any,
    transport: Any,
    path: str,
    pattern: str,
    window: int = 5,
    rtol: float = 1e-3,
    state: dict[str, Any] | None = None,
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
    state = {} if state is None else state
    regex = re.compile(pattern)
    values = state.setdefault("values", [])
    for line in _new_bytes(transport, path, state).splitlines():
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
