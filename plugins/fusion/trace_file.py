"""Reading ``.fusion/trace.json`` through a job's transport."""

from __future__ import annotations

from typing import Any

from veglia.plugin_api import COMPUTER, MAX_TRACE_BYTES, TraceFileUnusable, read_trace_file
from veglia.plugin_api import parse_trace as _parse_trace

__all__ = [
    "MAX_TRACE_BYTES",
    "TRACE_PATH",
    "TraceUnusable",
    "fusion_enabled",
    "parse_trace",
    "read_trace",
]

TRACE_PATH = ".fusion/trace.json"
#: The trace file is missing or cannot be used; the message says why (the core's reader's).
TraceUnusable = TraceFileUnusable


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
    from veglia.plugin_api import load_computer

    label = node.get_attribute(COMPUTER)
    return bool(label and load_computer(label).get_property("fusion"))


def parse_trace(raw: bytes) -> dict[str, Any]:
    """The blocks of a trace file: ``{"gpu": ..., "proc": ..., "cgroup": ...}`` (dicts only)."""
    return _parse_trace(raw, TRACE_PATH)


def read_trace(transport: Any, path: str = TRACE_PATH) -> dict[str, Any]:
    """Read and parse the trace file in the transport's cwd (the job's work directory)."""
    return read_trace_file(transport, path, missing=" (Fusion did not write it)")
