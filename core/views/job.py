"""A calc job: its row and history, its scheduler job, what it asked for and used, its
script, inputs and outputs, log, monitors and resource trace."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from veglia.engine.calcjob.tasks import SCRIPT_NAME
from veglia.exceptions import NotExistent
from veglia.orm.attributes import (
    COMMAND_LINES,
    COMPUTER,
    MONITOR_STATE,
    MONITORS,
    STARTED_AT,
    SUBMITTED_AT,
    TRACE_LIVE,
    TRACE_RECORD,
)
from veglia.orm.nodes import Node
from veglia.orm.process_nodes import CalcJobNode
from veglia.orm.queries import ACTIVE_STATES, file_sizes, list_processes
from veglia.views.detail import process_facts
from veglia.views.rows import (
    ROW_ATTRIBUTES,
    iso_time,
    kind_of,
    monitor_notes,
    process_row,
    url_of,
)
from veglia.views.workflow import load_process_node

__all__ = ["LOG_LIMIT", "job_view", "link_rows"]

#: The last this many log entries.
LOG_LIMIT = 100
#: A plain value longer than this is cut.
VALUE_WIDTH = 200


def _epoch_iso(seconds: float | None) -> str | None:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat() if seconds else None


def _value(node: Node) -> str | None:
    attributes = node.attributes
    if "value" not in attributes:
        return None
    text = str(attributes["value"])
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 1] + "…"


def _location(node: Node) -> str | None:
    attributes = node.attributes
    if "remote_path" in attributes:
        return f"{attributes.get(COMPUTER) or '?'}:{attributes['remote_path']}"
    if "filename" in attributes:
        return str(attributes["filename"])
    return None


def link_rows(links: list[tuple[str, Node]]) -> list[dict[str, Any]]:
    """Linked nodes (inputs or outputs) as rows; their stored files' sizes in one query."""
    sizes: dict[int, int] = {}
    pks = [node.pk for _, node in links]
    if pks:
        sizes = file_sizes(pks)
    rows = []
    for label, node in links:
        kind = kind_of(node.node_type)
        rows.append(
            {
                "link_label": label,
                "pk": node.pk,
                "type": type(node).__name__,
                "value": _value(node),
                "location": _location(node),
                "size": sizes.get(node.pk),
                "url": url_of(node.pk, kind),
            }
        )
    return rows


def _history(node: CalcJobNode, row: dict[str, Any]) -> list[dict[str, Any]]:
    history = [{"state": "created", "at": iso_time(node.ctime)}]
    if node.get_attribute(SUBMITTED_AT):
        history.append({"state": "submitted", "at": _epoch_iso(node.get_attribute(SUBMITTED_AT))})
    if node.get_attribute(STARTED_AT):
        history.append({"state": "running", "at": _epoch_iso(node.get_attribute(STARTED_AT))})
    if row["state"] not in ACTIVE_STATES:
        history.append({"state": row["state"], "at": row["mtime"]})
    return history


def _resources(node: CalcJobNode) -> list[dict[str, Any]]:
    options = node.options or {}
    usage = node.usage or {}
    resources = options.get("resources") or {}
    memory_kb = options.get("max_memory_kb")
    used_kb = usage.get("peak_memory_kb")
    rows = [
        {
            "name": "memory",
            "asked": memory_kb * 1024 if memory_kb else None,
            "used": used_kb * 1024 if used_kb else None,
            "unit": "bytes",
        },
        {
            "name": "wall time",
            "asked": options.get("max_wallclock_seconds"),
            "used": usage.get("runtime_seconds"),
            "unit": "seconds",
        },
    ]
    for name in ("num_machines", "num_mpiprocs_per_machine", "num_cores_per_machine"):
        if resources.get(name) is not None:
            rows.append({"name": name.replace("_", " "), "asked": resources[name], "used": None,
                         "unit": ""})  # fmt: skip
    return rows


def _script(node: CalcJobNode) -> str | None:
    try:
        return node.get_object_content(SCRIPT_NAME).decode(errors="replace")
    except (NotExistent, FileNotFoundError, OSError, KeyError):
        return None


def _monitors(node: CalcJobNode) -> list[dict[str, Any]]:
    states = node.get_attribute(MONITOR_STATE) or {}
    result = []
    for spec in node.get_attribute(MONITORS) or []:
        state = states.get(spec.get("name")) or {}
        last = state.get("last_result") or {}
        verdict = None
        if state.get("disabled"):
            verdict = f"disabled: {state.get('disabled_reason') or '?'}"
        elif last:
            verdict = f"{last.get('action')}: {last.get('message') or ''}".rstrip(": ")
        result.append(
            {
                "name": spec.get("name"),
                "entry_point": spec.get("entry_point"),
                "kwargs": spec.get("kwargs") or {},
                "last_verdict": verdict,
                "at": _epoch_iso(state.get("last_call")),
            }
        )
    return result


def _point(point: list[Any]) -> dict[str, Any]:
    """A series point in the views' units: ``t`` seconds since the epoch, ``cpu`` percent of
    one core, ``rss`` and ``mem`` and ``gpu_mem`` bytes, ``gpu`` percent."""
    t, cpu, rss, mem, gpu, gpu_mem = (list(point) + [None] * 6)[:6]
    return {
        "t": t / 1000 if t is not None else None,
        "cpu": cpu / 10 if cpu is not None else None,
        "rss": rss * 1024 if rss is not None else None,
        "mem": mem,
        "gpu": gpu,
        "gpu_mem": gpu_mem * 1024 * 1024 if gpu_mem is not None else None,
    }


def _trace(node: CalcJobNode) -> dict[str, Any] | None:
    live = node.get_attribute(TRACE_LIVE)
    if live and not node.is_terminated:
        return {
            "measured_by": "trace (live)",
            "points": [_point(p) for p in live.get("series") or []],
        }
    record = node.get_attribute(TRACE_RECORD) or {}
    trace = (record.get("extras") or {}).get("trace") or {}
    # The series is the core.trace sampler's; a job it missed keeps the last live read.
    series = trace.get("series") or (live or {}).get("series") or []
    if not series:
        return None
    return {"measured_by": "trace", "points": [_point(p) for p in series]}


def job_view(pk: int) -> dict[str, Any]:
    """The job page's dict; :class:`NotExistent` when ``pk`` is no calc job."""
    node = load_process_node(pk, "process.calcjob")
    assert isinstance(node, CalcJobNode)
    row = process_row(list_processes(None, pks=[pk], attribute_keys=ROW_ATTRIBUTES)[0])
    options = node.options or {}
    logs = node.logs[-LOG_LIMIT:]
    return {
        "process": row,
        "history": _history(node, row),
        "scheduler": {
            "job_id": node.job_id,
            "queue": options.get("queue_name"),
            "state": node.scheduler_state,
            "computer": node.computer_label,
        },
        "resources": _resources(node),
        "command_line": "\n".join(node.get_attribute(COMMAND_LINES) or []) or None,
        "script": _script(node),
        "inputs": link_rows(list(node.inputs.items())),
        "outputs": link_rows(list(node.outputs.items())),
        "log": [
            {"at": iso_time(log.time), "level": log.levelname, "message": log.message}
            for log in logs
        ],
        "monitors": _monitors(node),
        "trace": _trace(node),
        "blocked": (node.blocked or {}).get("reason"),
        "stopped_by": row["stopped_by"],
        "monitor_notes": monitor_notes(node.attributes),
        "facts": [[name, value] for name, value in process_facts(node)],
    }
