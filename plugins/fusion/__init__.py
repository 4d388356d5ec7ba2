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

from typing import TYPE_CHECKING

from veglia.plugin_api import lazy_exports

if TYPE_CHECKING:
    from veglia.plugins.fusion.trace_file import TRACE_PATH, fusion_enabled, read_trace

__all__ = ["TRACE_PATH", "fusion_enabled", "read_trace"]

# Lazy: every veglia process loads this package with its hook module (``veglia --help``
# too), and ``trace_file`` brings the ORM and SQLAlchemy, wanted only to read a trace.
__getattr__, __dir__ = lazy_exports(
    __name__, dict.fromkeys(__all__, "veglia.plugins.fusion.trace_file")
)
