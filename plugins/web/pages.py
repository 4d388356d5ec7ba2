"""The pages of ``veglia web``: each a view of :mod:`veglia.views` at a stable URL, drawn by
its template; the server serves the same view as JSON at ``/api<path>`` and live at
``/live<path>``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from veglia.plugin_api import (
    DRAWN_NODES,
    format_seconds,
    job_view,
    node_view,
    overview_view,
    pipeline_view,
    pipelines_view,
    processes_view,
    workflow_view,
)
from veglia.plugins.web import charts
from veglia.plugins.web.formatting import parse_time, size_text, time_text
from veglia.plugins.web.live import Covers

__all__ = [
    "NODE_ROWS",
    "PAGES",
    "STEPS_ROWS",
    "TEMPLATE_GLOBALS",
    "TIMELINE_ROWS",
    "Page",
    "fact_text",
    "human_bytes",
    "human_seconds",
    "setting_text",
    "state_words",
    "when",
]

#: A workflow page draws the timeline of at most this many steps (the latest); the steps
#: table and the processes search list them all.
TIMELINE_ROWS = 40
#: A workflow page and its ``/api`` answer list at most this many steps (the latest; the
#: health and problems are of all); the processes search lists all it called
#: (``called_by``). A workflow of 2,000 steps took longer to draw than to load.
STEPS_ROWS = 100
#: A node page lists at most this many of its nodes and of its links (its ``/api`` answer
#: has them all), as many as it draws.
NODE_ROWS = DRAWN_NODES


@dataclass(frozen=True)
class Page:
    """A page: its ``name``, Starlette ``path``, ``template`` (extends base.html, fills
    ``content``), ``load`` (path and query params -> the view's JSON-able dict; raises
    :class:`veglia.exceptions.NotExistent` for a missing pk) and ``title`` (view -> the
    ``<title>``) and ``covers`` (view -> the pks of the nodes it shows, for the live hub to
    load it again only when one of them changed; None: it shows everything)."""

    name: str
    path: str
    template: str
    load: Callable[[dict[str, Any]], dict[str, Any]]
    title: Callable[[dict[str, Any]], str] = lambda view: "veglia"
    covers: Covers | None = None


def _workflow_covers(view: dict[str, Any]) -> frozenset[int]:
    return frozenset([view["process"]["pk"], *view["step_pks"]])


def _job_covers(view: dict[str, Any]) -> frozenset[int]:
    links = [*view["inputs"], *view["outputs"]]
    return frozenset([view["process"]["pk"], *(link["pk"] for link in links)])


def _node_covers(view: dict[str, Any]) -> frozenset[int]:
    return frozenset([view["node"]["pk"], *(node["pk"] for node in view["nodes"])])


def _named(row: dict[str, Any]) -> str:
    return f"{row['label'] or row['process_type']} ({row['pk']})"


PAGES: list[Page] = [
    Page("overview", "/", "overview.html", lambda params: overview_view(), lambda view: "Overview"),
    Page(
        "workflow",
        "/workflow/{pk:int}",
        "workflow.html",
        lambda params: workflow_view(int(params["pk"]), latest=STEPS_ROWS),
        lambda view: f"Workflow {_named(view['process'])}",
        _workflow_covers,
    ),
    Page(
        "job",
        "/job/{pk:int}",
        "job.html",
        lambda params: job_view(int(params["pk"])),
        lambda view: f"Job {_named(view['process'])}",
        _job_covers,
    ),
    Page(
        "node",
        "/node/{pk:int}",
        "node.html",
        lambda params: node_view(int(params["pk"]), params.get("depth", 1)),
        lambda view: f"Node {view['node']['pk']} provenance",
        _node_covers,
    ),
    Page(
        "processes",
        "/processes",
        "processes.html",
        processes_view,
        lambda view: "Processes",
    ),
    Page(
        "pipelines",
        "/pipelines",
        "pipelines.html",
        lambda params: pipelines_view(),
        lambda view: "Pipelines",
    ),
    Page(
        "pipeline",
        # A setup's name may hold a slash (no space): the path converter keeps it whole.
        "/pipeline/{name:path}",
        "pipeline.html",
        lambda params: pipeline_view(str(params["name"]), params),
        lambda view: f"Pipeline {view['setup']['name']}",
    ),
]


def human_bytes(value: float | None) -> str:
    """``1.5 GiB``; empty for None."""
    return "" if value is None else size_text(value)


def human_seconds(value: float | None) -> str:
    """``45s``, ``12m 5s``, ``3h 20m`` (as ``process show``); empty for None."""
    return "" if value is None else format_seconds(value)


def when(value: str | None) -> str:
    """An ISO time of a view as ``2026-01-31 14:05:09 UTC`` (a page's script may show it in
    the reader's zone from the ``<time datetime>`` around it); empty for None, and a text
    that is no time as it is."""
    if not value:
        return ""
    return time_text(value) if parse_time(value) else value


def fact_text(value: Any) -> str:
    """A property's value as a page shows it: a time as :func:`when` writes it, anything
    else as text."""
    if isinstance(value, str) and len(value) >= 19 and value[10:11] == "T":
        shown = when(value)
        if shown != value:
            return shown
    return "" if value is None else str(value)


def setting_text(value: Any) -> str:
    """A setting's value as the setup's TOML means it: text as it is, anything else as JSON
    (a list, a table, true)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def state_words(text: str) -> str:
    """A state's text without the symbol the terminal shows before it (``✔ Finished [0]`` ->
    ``Finished [0]``): on a page the badge's colour says it, and not every font has the
    symbols."""
    first, _, rest = text.partition(" ")
    return rest if rest and not any(ch.isalnum() for ch in first) else text


#: Functions and constants the templates use (the server adds them to its Jinja2 environment).
TEMPLATE_GLOBALS: dict[str, Any] = {
    "timeline_svg": charts.timeline_svg,
    "usage_svg": charts.usage_svg,
    "human_bytes": human_bytes,
    "human_seconds": human_seconds,
    "when": when,
    "fact_text": fact_text,
    "state_words": state_words,
    "setting_text": setting_text,
    "TIMELINE_ROWS": TIMELINE_ROWS,
    "STEPS_ROWS": STEPS_ROWS,
    "NODE_ROWS": NODE_ROWS,
}
