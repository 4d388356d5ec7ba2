"""The pages of ``veglia web``: what each one loads and which template shows it.

A placeholder with an overview and a bare job page, for the server's own tests; the views
(veglia.views) bring the real pages. The server turns each :class:`Page` into ``GET <path>`` (HTML),
``GET /api<path>`` (the view as JSON) and ``GET /live<path>`` (server-sent events).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veglia.exceptions import NotExistent
from veglia.orm.queries import list_processes

__all__ = ["PAGES", "Page"]


@dataclass(frozen=True)
class Page:
    """One page: its Starlette ``path``, its Jinja ``template`` (extends base.html and fills
    ``{% block content %}``), its ``load`` (path and query parameters -> the JSON-able view;
    raises NotExistent for a missing pk) and its ``title``."""

    name: str
    path: str
    template: str
    load: Callable[[dict[str, Any]], dict[str, Any]]
    title: Callable[[dict[str, Any]], str] = lambda view: "veglia"


def _overview(params: dict[str, Any]) -> dict[str, Any]:
    rows = list_processes(limit=50, descending=True, attribute_keys=())
    counts: dict[str, int] = {}
    for row in list_processes(attribute_keys=()):
        state = row.process_state or "unknown"
        counts[state] = counts.get(state, 0) + 1
    return {
        "counts": counts,
        "processes": [
            {
                "pk": row.pk,
                "label": row.label,
                "state": row.process_state,
                "kind": "calcjob" if row.node_type.endswith("calcjob") else "process",
            }
            for row in rows
        ],
    }


def _job(params: dict[str, Any]) -> dict[str, Any]:
    rows = list_processes(pks=[params["pk"]], attribute_keys=())
    if not rows:
        raise NotExistent(f"No process with PK {params['pk']}.")
    row = rows[0]
    return {"process": {"pk": row.pk, "label": row.label, "state": row.process_state}}


PAGES: list[Page] = [
    Page("overview", "/", "overview.html", _overview, lambda view: "veglia: overview"),
    Page("job", "/job/{pk:int}", "job.html", _job, lambda view: "veglia: job"),
]
