"""What veglia shows of processes, computed once for every front end: the CLI renders these
as tables and text, the web plugin as pages, ``/api/...`` as JSON, so they never disagree.

Each builder returns plain JSON-able data (dicts of str, int, float, bool, None, lists);
times are ISO-8601 strings in UTC, sizes bytes, durations seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.lazy import lazy_exports

if TYPE_CHECKING:
    from veglia.views.job import job_view
    from veglia.views.node import node_view
    from veglia.views.overview import overview_view
    from veglia.views.pipelines import pipeline_view, pipelines_view
    from veglia.views.processes import processes_view
    from veglia.views.rows import process_row, process_rows
    from veglia.views.workflow import workflow_view

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

# Lazy: `process list` imports veglia.views.rows alone; the job and workflow views load the
# ORM and the engine, which it does without.
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


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
