"""The Fusion plugin's hook implementations."""

from __future__ import annotations

from typing import Any

from veglia.hookspecs import hookimpl
from veglia.plugins.fusion.trace_file import TraceUnusable, fusion_enabled, read_trace


@hookimpl
def collect_trace(node: Any, transport: Any, record: Any) -> None:
    """Put the Fusion trace's ``gpu``, ``proc`` and ``cgroup`` blocks on the record."""
    if transport is None or not fusion_enabled(node):
        return
    try:
        blocks = read_trace(transport)
    except TraceUnusable as exc:
        node.add_log("DEBUG", f"fusion: no GPU metrics: {exc}")
        return
    record.gpu_metrics = blocks.get("gpu")
    record.fusion_proc = blocks.get("proc")
    record.fusion_cgroup = blocks.get("cgroup")
    if record.gpu_metrics is None:
        node.add_log("DEBUG", "fusion: the trace has no gpu block (a CPU-only task)")
