"""What veglia shows of processes, computed once for every front end: the CLI renders these
as tables and text, the web plugin as pages, ``/api/...`` as JSON, so they never disagree.

Each builder returns plain JSON-able data (dicts of str, int, float, bool, None, lists);
times are ISO-8601 strings in UTC, sizes bytes, durations seconds.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "job_view",
    "node_view",
    "overview_view",
    "pipeline_view",
    "pipelines_view",
    "process_row",
    "process_rows",
    "processes_view",
    "workflow_view",
]

_HOMES = {
    "job_view": "veglia.views.job",
    "node_view": "veglia.views.node",
    "overview_view": "veglia.views.overview",
    "pipeline_view": "veglia.views.pipelines",
    "pipelines_view": "veglia.views.pipelines",
    "process_row": "veglia.views.rows",
    "process_rows": "veglia.views.rows",
    "processes_view": "veglia.views.processes",
    "workflow_view": "veglia.views.workflow",
}


def __getattr__(name: str) -> Any:
    # Lazy: `process list` imports veglia.views.rows alone; the job and workflow views load
    # the ORM and the engine, which it does without.
    if name not in _HOMES:
        raise AttributeError(f"module 'veglia.views' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
