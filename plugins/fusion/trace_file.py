"""Reading ``.fusion/trace.json`` through a job's transport."""

from __future__ import annotations

import json
from typing import Any

from veglia.exceptions import TransportError
from veglia.orm.attributes import COMPUTER

__all__ = ["MAX_TRACE_BYTES", "TRACE_PATH", "fusion_enabled", "parse_trace", "read_trace"]

TRACE_PATH = ".fusion/trace.json"
#: A trace file is a few kB; anything past this is not one, and is not read.
MAX_TRACE_BYTES = 1024 * 1024
#: Metrics are flat; a block nested deeper than this is not Fusion's and would not store.
MAX_DEPTH = 16


class TraceUnusable(Exception):
    """The trace file is missing or cannot be used; the message says why."""


def fusion_enabled(node: Any, computer: Any = None) -> bool:
    """The job's ``fusion`` option, else its computer's ``fusion`` property (of
    ``computer`` when given: the engine's copy, not read again)."""
    option = (node.options or {}).get("fusion")
    if option is not None:
        return bool(option)
    if computer is not None:
        return bool(computer.get_property("fusion"))

    # Lazy: the package is loaded with the plugin's hooks in every process (the daemon's
    # supervisor too), which need not load the ORM and the storage.
    from veglia.orm.computers import load_computer

    label = node.get_attribute(COMPUTER)
    return bool(label and load_computer(label).get_property("fusion"))


def parse_trace(raw: bytes) -> dict[str, Any]:
    """The blocks of a trace file: ``{"gpu": ..., "proc": ..., "cgroup": ...}`` (dicts only)."""
    try:
        # NaN and Infinity are not JSON; Python reads them, no database stores them: null.
        data = json.loads(raw.decode("utf-8"), parse_constant=lambda _: None)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise TraceUnusable(f"{TRACE_PATH} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TraceUnusable(f"{TRACE_PATH} holds a {type(data).__name__}, not an object")
    blocks = {
        key: data[key] for key in ("gpu", "proc", "cgroup") if isinstance(data.get(key), dict)
    }
    for key, block in blocks.items():
        if _depth(block) > MAX_DEPTH:
            raise TraceUnusable(f"the {key} block of {TRACE_PATH} nests deeper than {MAX_DEPTH}")
    return blocks


def _depth(value: Any, level: int = 0) -> int:
    """How deep ``value`` nests, counting stops past the limit."""
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def read_trace(transport: Any, path: str = TRACE_PATH) -> dict[str, Any]:
    """Read and parse the trace file in the transport's cwd (the job's work directory)."""
    # The job may have made .fusion, or its whole folder, a link leading elsewhere.
    link = transport.link_above(".", path)
    if link is not None:
        raise TraceUnusable(
            f"{path} is not read: {link} is a link, and veglia follows no link in a job's folder"
        )
    try:
        info = transport.lstat(path)
    except TransportError:
        raise TraceUnusable(f"{path} does not exist (Fusion did not write it)") from None
    if not info.is_file:
        raise TraceUnusable(f"{path} is not a regular file (a link, FIFO or device): not read")
    if info.size > MAX_TRACE_BYTES:
        raise TraceUnusable(f"{path} is {info.size} bytes, over the {MAX_TRACE_BYTES} byte cap")
    try:
        # The cap again on the read itself: the file may grow, or be swapped, after lstat.
        raw = transport.read_bytes(path, size=MAX_TRACE_BYTES + 1)
    except TransportError as exc:
        raise TraceUnusable(f"{path} could not be read: {exc}") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceUnusable(f"{path} grew over the {MAX_TRACE_BYTES} byte cap while read")
    return parse_trace(raw)
