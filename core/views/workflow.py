"""A workflow: its row, times and estimated end, its steps (the call tree) with their
health and problems, and a timeline of its jobs (queued, then running)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from veglia.engine.progress import Step, workflow_progress
from veglia.exceptions import NotExistent
from veglia.orm.attributes import SCHEDULER_STATE, SIMILARITY_KEY, STARTED_AT, SUBMITTED_AT
from veglia.orm.loading import load_node
from veglia.orm.process_nodes import TERMINAL_STATES, ProcessNode
from veglia.orm.queries import ACTIVE_STATES, ProcessRow, list_processes, process_tree_select
from veglia.views.detail import process_facts
from veglia.views.problems import PROBLEM_ATTRIBUTES, problem_of
from veglia.views.rows import ROW_ATTRIBUTES, as_tree, iso_time, process_row

__all__ = ["load_process_node", "workflow_view"]


def load_process_node(pk: int, node_type: str | None = None) -> ProcessNode:
    """Process ``pk`` (of ``node_type`` when given); :class:`NotExistent` when there is none."""
    node = load_node(pk)
    if not isinstance(node, ProcessNode) or (node_type and node.node_type != node_type):
        what = {"process.workflow": "workflow", "process.calcjob": "calc job"}.get(
            node_type or "", "process"
        )
        raise NotExistent(f"Node {pk} is no {what}; look it up with `veglia node show {pk}`.")
    return node


def _epoch_iso(seconds: float | None) -> str | None:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat() if seconds else None


def _health(rows: list[ProcessRow]) -> dict[str, int]:
    health = {"succeeded": 0, "failed": 0, "running": 0, "waiting": 0}
    for row in rows:
        state = row.process_state
        if state == "finished" and row.exit_status == 0:
            health["succeeded"] += 1
        elif state in ACTIVE_STATES:
            running = state == "running" or row.attributes.get(SCHEDULER_STATE) == "running"
            health["running" if running else "waiting"] += 1
        else:
            health["failed"] += 1
    return health


def _may_have_problem(row: ProcessRow) -> bool:
    """Whether :func:`problem_of` may find one: not a step that finished well and quietly."""
    if row.process_state != "finished" or row.exit_status not in (0, None):
        return True
    return any(row.attributes.get(key) for key in PROBLEM_ATTRIBUTES)


def _span(step: ProcessRow, row: dict[str, Any]) -> dict[str, Any]:
    attrs = step.attributes
    ended = row["mtime"] if row["state"] not in ACTIVE_STATES else None
    return {
        "pk": row["pk"],
        "label": row["label"] or row["process_type"],
        "url": row["url"],
        "state": row["state"],
        "submitted": _epoch_iso(attrs.get(SUBMITTED_AT)),
        "started": _epoch_iso(attrs.get(STARTED_AT)),
        "ended": ended,
    }


def _step(row: ProcessRow) -> Step:
    return Step(
        row.pk,
        row.process_type,
        row.attributes.get(SIMILARITY_KEY),
        row.process_state in TERMINAL_STATES,
        row.process_state == "finished" and row.exit_status == 0,
        row.ctime,
        row.mtime,
    )


def workflow_view(pk: int, latest: int | None = None) -> dict[str, Any]:
    """The workflow page's dict; :class:`NotExistent` when ``pk`` is no workflow. Its
    ``steps`` (the call tree) and ``timeline`` hold the ``latest`` steps (None: all);
    ``steps_total``, ``timeline_total`` (its calc jobs), ``step_pks``, ``health`` and
    ``problems`` are of every step."""
    node = load_process_node(pk, "process.workflow")
    now = datetime.now(timezone.utc)
    keys = tuple(
        dict.fromkeys(
            (*ROW_ATTRIBUTES, *PROBLEM_ATTRIBUTES, SIMILARITY_KEY, SUBMITTED_AT, STARTED_AT)
        )
    )
    # One query for the whole tree, however many steps, rows read only for these keys.
    found = list_processes(None, pks=process_tree_select([pk]), attribute_keys=keys)
    root = next(row for row in found if row.pk == pk)
    tree = list(as_tree([row for row in found if row.pk != pk]))
    shown = tree if latest is None else tree[max(0, len(tree) - latest) :]
    rows = {step.pk: process_row(step) for step, _ in shown}
    steps = [{"row": rows[step.pk], "depth": depth} for step, depth in shown]
    timeline = [
        _span(step, rows[step.pk]) for step, _ in shown if step.node_type == "process.calcjob"
    ]
    problems = []
    for step, _ in tree:
        if _may_have_problem(step):
            problem = problem_of(rows.get(step.pk) or process_row(step), step.attributes)
            if problem:
                problems.append(problem)
    progress = workflow_progress(node, [_step(row) for row in found if row.caller_pk == pk])
    terminated = node.is_terminated
    estimated_end = None
    if not terminated and progress.remaining is not None:
        estimated_end = (now + timedelta(seconds=progress.remaining)).isoformat()
    return {
        "process": process_row(root),
        "started": iso_time(node.ctime),
        "ended": iso_time(root.mtime) if terminated else None,
        "estimated_end": estimated_end,
        "estimate_basis": progress.basis or None,
        "health": _health([step for step, _ in tree]),
        "problems": problems,
        "steps_total": len(tree),
        "timeline_total": sum(step.node_type == "process.calcjob" for step, _ in tree),
        "step_pks": [step.pk for step, _ in tree],
        "steps": steps,
        "timeline": timeline,
        "facts": [[name, value] for name, value in process_facts(node, progress=progress)],
        "now": now.isoformat(),
    }
