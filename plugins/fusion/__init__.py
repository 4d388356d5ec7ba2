"""Fusion GPU metrics: the ``gpu`` block of ``.fusion/trace.json``, carried on trace records.

The Fusion client writes ``.fusion/trace.json`` in a task's work directory. When Fusion is
enabled for a job (``metadata.options.fusion``, else the computer's ``fusion`` property),
this plugin reads it once the job has ended, whatever its outcome, and puts the whole
``gpu`` block, verbatim (unknown fields included), on the record's ``gpu_metrics``; the
``proc`` and ``cgroup`` blocks go to ``record.extras["fusion"]``, and what ``proc``
measured to the record's fields (``peak_rss``, ``realtime``, ...), with ``measured_by``
set to ``"fusion"``. A missing,
unreadable, oversized or malformed file costs a debug line on the node and nothing else.
When Fusion is off the file is never read.
"""

from __future__ import annotations

from veglia.plugins.fusion.trace_file import TRACE_PATH, fusion_enabled, read_trace

__all__ = ["TRACE_PATH", "fusion_enabled", "read_trace"]
