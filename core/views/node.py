"""A node's provenance: the nodes within some links of it and the links between them, as
Graphviz dot text (``veglia node graph``) and, where Graphviz is installed, as SVG for the
web page."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from typing import Any

import veglia.orm
from veglia.orm.attributes import COMPUTER
from veglia.orm.loading import load_node
from veglia.orm.queries import provenance_around
from veglia.views.rows import format_state, iso_time, kind_of, url_of

__all__ = ["graph_dot", "graph_svg", "node_view", "type_name"]

#: Link hops the node page draws unless asked for more; at most MAX_DEPTH.
DEFAULT_DEPTH = 1
MAX_DEPTH = 4
#: Seconds Graphviz may take to draw a page's graph.
DOT_TIMEOUT = 20
#: The most nodes the page draws: Graphviz takes seconds on thousands (a workflow's calls),
#: and such a picture is unreadable; the page shows the dot text then.
DRAWN_NODES = 300


#: The attributes a node's box in the picture shows.
STYLE_ATTRIBUTES = ("value", "filename", "remote_path", COMPUTER)


@functools.cache
def type_name(node_type: str) -> str:
    """``data.str`` -> ``Str``: the ORM class name of a node type."""
    for name in veglia.orm.__all__:
        cls = getattr(veglia.orm, name)
        if getattr(cls, "node_type", None) == node_type and isinstance(cls, type):
            return name
    return node_type


def _dot_string(*lines: str) -> str:
    escaped = [line.replace("\\", "\\\\").replace('"', '\\"') for line in lines]
    return '"' + "\\n".join(escaped) + '"'


def _node_style(row: Any) -> dict[str, str]:
    name = f"{type_name(row.node_type)} ({row.id})"
    attributes = row.attributes or {}
    if row.node_type.startswith("process"):
        ok = row.process_state == "finished" and row.exit_status == 0
        failed = row.process_state in ("excepted", "killed") or (
            row.process_state == "finished" and row.exit_status != 0
        )
        state = format_state(row.process_state, row.exit_status)[2:]
        return {
            "label": _dot_string(
                *filter(None, (f"{row.process_type} ({row.id})", row.label, state))
            ),
            "shape": "box",
            "style": '"filled,rounded"',
            "fillcolor": '"#f08080"' if failed else ('"#90ee90"' if ok else '"#e0e0e0"'),
        }
    detail = ""
    if attributes.get("value") is not None:
        detail = repr(attributes["value"])
    elif attributes.get("filename") is not None:
        detail = str(attributes["filename"])
    elif attributes.get("remote_path") is not None:
        detail = f"@{attributes.get(COMPUTER) or ''}"
    if len(detail) > 40:
        detail = detail[:37] + "..."
    lines = [line for line in (name, row.label, detail) if line]
    return {
        "label": _dot_string(*lines),
        "shape": "ellipse",
        "style": "filled",
        "fillcolor": '"#add8e6"',
    }


_EDGE_STYLE = {
    "input": "solid",
    "create": "bold",
    "output": "dashed",
    "call": "dotted",
    # Not stored links: a run made again, and the earlier run's children it reused.
    "rerun of": "dashed, color=gray40",
    "reused": "dotted, color=gray40",
}


def _url(row: Any) -> str:
    kind = kind_of(row.node_type) if row.node_type.startswith("process") else "data"
    return url_of(row.id, kind)


def graph_dot(
    pk: int, depth: int, *, links: bool = False, around: tuple[list[Any], list[Any]] | None = None
) -> str:
    """Graphviz dot of the nodes within ``depth`` links of node ``pk``, one query a level
    (none when ``around`` holds what :func:`provenance_around` gave already); with
    ``links``, each node links to its web page."""
    nodes, edges = around or provenance_around(pk, depth, STYLE_ATTRIBUTES)
    lines = [f"digraph provenance_{pk} {{", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    for row in nodes:
        style = _node_style(row)
        if row.id == pk:
            style["penwidth"] = "3"
        if links:
            style["URL"] = f'"{_url(row)}"'
        options = ", ".join(f"{key}={value}" for key, value in style.items())
        lines.append(f"  N{row.id} [{options}];")
    for source, target, label, kind in edges:
        text = _dot_string(label, kind)
        lines.append(f"  N{source} -> N{target} [label={text}, style={_EDGE_STYLE[kind]}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


#: What must never reach a page from an SVG (Graphviz escapes labels, so this is a guard).
_UNSAFE_SVG = re.compile(r"<script|<foreignObject|\son\w+\s*=|javascript:", re.IGNORECASE)


def graph_svg(text: str) -> str | None:
    """``text`` (dot) drawn as an inline ``<svg>`` element; None without Graphviz, or when
    it fails or takes too long (the page then shows the dot text)."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    try:
        result = subprocess.run(
            [dot, "-Tsvg"], input=text.encode(), capture_output=True, timeout=DOT_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return None
    svg = result.stdout.decode(errors="replace")
    start = svg.find("<svg")
    if result.returncode != 0 or start < 0 or _UNSAFE_SVG.search(svg):
        return None
    return svg[start:]


def node_view(pk: int, depth: int | str = DEFAULT_DEPTH) -> dict[str, Any]:
    """The node page's dict: the node, its neighbours within ``depth`` links (1 to
    :data:`MAX_DEPTH`), the links between them, and the picture."""
    try:
        hops = max(1, min(MAX_DEPTH, int(depth)))
    except (TypeError, ValueError):
        hops = DEFAULT_DEPTH
    node = load_node(pk)
    rows, edges = provenance_around(node.pk, hops, STYLE_ATTRIBUTES)
    dot = graph_dot(node.pk, hops, links=True, around=(rows, edges))
    drawn = len(rows) <= DRAWN_NODES
    return {
        "node": {
            "pk": node.pk,
            "uuid": node.uuid,
            "label": node.label,
            "type": type_name(node.node_type),
            "node_type": node.node_type,
            "ctime": iso_time(node.ctime),
            "url": _url(node_row_of(rows, node.pk)),
        },
        "depth": hops,
        "max_depth": MAX_DEPTH,
        "nodes": [
            {
                "pk": row.id,
                "type": type_name(row.node_type),
                "label": row.label,
                "state": format_state(row.process_state, row.exit_status)
                if row.process_state
                else None,
                "url": _url(row),
            }
            for row in rows
        ],
        "edges": [
            {"source": source, "target": target, "label": label, "link_type": kind}
            for source, target, label, kind in edges
        ],
        "dot": dot,
        "svg": graph_svg(dot) if drawn else None,
        "svg_note": None
        if drawn
        else f"{len(rows):,} nodes are too many to draw (at most {DRAWN_NODES:,})",
    }


def node_row_of(rows: list[Any], pk: int) -> Any:
    return next(row for row in rows if row.id == pk)
