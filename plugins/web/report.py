"""``veglia report PK -o report.html``: one workflow as a single self-contained HTML file.

The file holds everything it shows (inline CSS, inline SVG charts) and nothing that reaches
out: no script, no font, no image, no link outside itself, so it can be mailed, attached to
a ticket or opened years later offline. Its rows link to sections of the same file.

``render_report`` takes the views the web pages and ``/api`` serve (veglia.views' workflow
view and one job view per job); ``report_of(pk)`` builds them for a workflow, or for one
calc job as a run of one step, and the command (plugins/web/cli.py) writes the result.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from veglia.plugin_api import WrongNodeTypeError
from veglia.plugins.web.charts import TEMPLATE_GLOBALS, timeline_svg, usage_svg
from veglia.plugins.web.formatting import duration_text, number, parse_time, size_text, time_text

__all__ = ["render_report", "report_of"]

TEMPLATES = Path(__file__).parent / "templates"
_TERMINAL = frozenset({"finished", "excepted", "killed"})
#: The trace series a job's section charts: (key, title, unit); GPU ones only when measured.
_CPU_CHART = ("cpu", "CPU", "%")
_MEMORY_CHARTS = (("rss", "Memory (RSS)", "bytes"), ("mem", "Memory (cgroup)", "bytes"))
_GPU_CHARTS = (("gpu", "GPU", "%"), ("gpu_mem", "GPU memory", "bytes"))


def report_of(pk: int) -> str:
    """The report of workflow ``pk`` (its steps' job views with it), or of calc job ``pk``
    alone, as a one-step run; :class:`NotExistent` for anything else."""
    # Lazy: the views load the ORM; rendering a report from dicts needs none of it.
    from veglia.plugin_api import BLOCKED, job_view, load_process_node, problem_of, workflow_view

    node_type = load_process_node(pk).node_type
    if node_type == "process.calcjob":
        job = job_view(pk)
        run = _one_job_run(job)
        blocked = {BLOCKED: {"reason": job["blocked"]}} if job.get("blocked") else {}
        run["problems"] = [p for p in [problem_of(job["process"], blocked)] if p]
        return render_report(run, {pk: job})
    if node_type != "process.workflow":
        raise WrongNodeTypeError(
            f"Process {pk} is neither a workflow nor a calc job; a report covers one of those."
        )
    workflow = workflow_view(pk)
    jobs = {
        step["row"]["pk"]: job_view(step["row"]["pk"])
        for step in workflow["steps"]
        if step["row"]["kind"] == "calcjob"
    }
    return render_report(workflow, jobs)


def _one_job_run(job: Mapping[str, Any]) -> dict[str, Any]:
    """A calc job run on its own, in the shape of a workflow view: one step, its span."""
    row = job["process"]
    at = {entry["state"]: entry["at"] for entry in job.get("history") or []}
    ended = row["mtime"] if row["state"] in _TERMINAL else None
    failed = row["state"] in _TERMINAL and not (
        row["state"] == "finished" and row["exit_status"] == 0
    )
    running = row["state"] == "running" or row.get("scheduler_state") == "running"
    return {
        "process": row,
        "started": row["ctime"],
        "ended": ended,
        "estimated_end": None,
        "health": {
            "succeeded": int(ended is not None and not failed),
            "failed": int(failed),
            "running": int(ended is None and running),
            "waiting": int(ended is None and not running),
        },
        "problems": [],
        "steps": [{"row": row, "depth": 0}],
        "timeline": [
            {
                "pk": row["pk"],
                "label": row["label"] or row["process_type"],
                "url": row["url"],
                "state": row["state"],
                "submitted": at.get("submitted"),
                "started": at.get("running"),
                "ended": ended,
            }
        ],
        "now": datetime.now(timezone.utc).isoformat(),
    }


def render_report(workflow: Mapping[str, Any], jobs: Mapping[int, Mapping[str, Any]]) -> str:
    """The report's HTML for the ``workflow`` view and the ``job`` views of its jobs, keyed
    by pk (a job without a view still shows in the steps and the timeline)."""
    jobs_by_pk = {int(pk): job for pk, job in jobs.items()}
    now = parse_time(workflow.get("now"))
    spans = {
        entry.get("pk"): (parse_time(entry.get("started")), parse_time(entry.get("ended")))
        for entry in workflow.get("timeline") or []
    }
    steps = [_step(step, spans, now, jobs_by_pk) for step in workflow.get("steps") or []]
    ordered = [step["pk"] for step in steps if step["pk"] in jobs_by_pk]
    ordered += sorted(pk for pk in jobs_by_pk if pk not in ordered)
    timeline = timeline_svg(
        workflow.get("timeline") or [],
        workflow.get("now"),
        link=lambda entry: _anchor(entry.get("pk")) if entry.get("pk") in jobs_by_pk else None,
    )
    return (
        _environment()
        .get_template("report.html")
        .render(
            summary=_summary(workflow, now),
            steps=steps,
            timeline=timeline,
            jobs=[_job(jobs_by_pk[pk]) for pk in ordered],
        )
    )


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals.update(TEMPLATE_GLOBALS)
    return environment


def _anchor(pk: Any) -> str:
    return f"#job-{pk}"


def _summary(workflow: Mapping[str, Any], now: datetime | None) -> dict[str, Any]:
    process = workflow.get("process") or {}
    started, ended = parse_time(workflow.get("started")), parse_time(workflow.get("ended"))
    health = workflow.get("health") or {}
    return {
        "pk": process.get("pk"),
        "label": process.get("label") or process.get("process_type") or "workflow",
        "state": process.get("state") or "unknown",
        "status": _status(process),
        "started": time_text(started),
        "ended": time_text(ended),
        "duration": _duration(started, ended, now),
        "estimated_end": time_text(workflow.get("estimated_end"))
        if workflow.get("estimated_end")
        else None,
        "health": [
            (name, health.get(name) or 0) for name in ("succeeded", "failed", "running", "waiting")
        ],
        "problems": [
            {
                "pk": problem.get("pk"),
                "label": problem.get("label") or "",
                "problem": problem.get("problem") or "",
                "what_to_do": problem.get("what_to_do") or "",
            }
            for problem in workflow.get("problems") or []
        ],
        "now": time_text(now),
    }


def _step(
    step: Mapping[str, Any],
    spans: dict[Any, tuple[datetime | None, datetime | None]],
    now: datetime | None,
    jobs: Mapping[int, Any],
) -> dict[str, Any]:
    row = step.get("row") or {}
    pk = row.get("pk")
    state = row.get("state") or "unknown"
    if pk in spans:
        started, ended = spans[pk]
    else:
        # A step off the timeline (a sub-workflow, a function): its life in the database.
        started = parse_time(row.get("ctime"))
        ended = parse_time(row.get("mtime")) if state in _TERMINAL else None
    return {
        "pk": pk,
        "anchor": _anchor(pk) if pk in jobs else None,
        "depth": int(number(step.get("depth")) or 0),
        "label": row.get("label") or row.get("process_type") or f"pk {pk}",
        "kind": row.get("kind") or "",
        "state": state,
        "status": _status(row),
        "computer": row.get("computer") or "",
        "duration": _duration(started, ended, now),
        "exit": _exit(row),
    }


def _job(job: Mapping[str, Any]) -> dict[str, Any]:
    process = job.get("process") or {}
    scheduler = job.get("scheduler") or {}
    trace = job.get("trace")
    return {
        "pk": process.get("pk"),
        "anchor": _anchor(process.get("pk"))[1:],
        "label": process.get("label") or process.get("process_type") or "job",
        "state": process.get("state") or "unknown",
        "status": _status(process),
        "exit": _exit(process),
        "computer": scheduler.get("computer") or process.get("computer") or "",
        "scheduler": [
            (name, scheduler.get(key))
            for name, key in (("job id", "job_id"), ("queue", "queue"), ("state", "state"))
            if scheduler.get(key) not in (None, "")
        ],
        "command_line": job.get("command_line"),
        "stopped_by": job.get("stopped_by") or process.get("stopped_by"),
        "monitor_notes": job.get("monitor_notes") or process.get("monitor_notes"),
        "resources": [
            {
                "name": resource.get("name") or "",
                "asked": _amount(resource.get("asked"), resource.get("unit")),
                "used": _amount(resource.get("used"), resource.get("unit")),
            }
            for resource in job.get("resources") or []
        ],
        "measured_by": (trace or {}).get("measured_by"),
        "charts": _charts(trace),
    }


def _charts(trace: Mapping[str, Any] | None) -> list[Markup]:
    """CPU and memory whenever the job has a trace, GPU ones when it measured a GPU."""
    if not trace:
        return []
    points = trace.get("points") or []

    def measured(key: str) -> bool:
        return any(number(point.get(key)) is not None for point in points)

    memory = next((chart for chart in _MEMORY_CHARTS if measured(chart[0])), _MEMORY_CHARTS[0])
    wanted = [_CPU_CHART, memory, *(chart for chart in _GPU_CHARTS if measured(chart[0]))]
    return [usage_svg(points, key, title, unit) for key, title, unit in wanted]


def _status(row: Mapping[str, Any]) -> str:
    """The CLI's status text when it says more than the state."""
    status = str(row.get("status") or "")
    return "" if status == str(row.get("state") or "") else status


def _exit(row: Mapping[str, Any]) -> str:
    status, message = row.get("exit_status"), row.get("exit_message")
    if status is None:
        return str(message or "")
    return f"{status}: {message}" if message else str(status)


def _duration(started: datetime | None, ended: datetime | None, now: datetime | None) -> str:
    if started is None:
        return "-"
    if ended is not None:
        return duration_text((ended - started).total_seconds())
    if now is not None:
        return f"{duration_text((now - started).total_seconds())} so far"
    return "-"


def _amount(value: Any, unit: Any) -> str:
    """An asked or used resource in its unit: bytes and seconds written for reading."""
    if value is None or value == "":
        return "-"
    figure = number(value)
    if figure is not None and unit in ("bytes", "B"):
        return size_text(figure)
    if figure is not None and unit in ("seconds", "s"):
        return duration_text(figure)
    if figure is None:
        text = str(value)
    else:
        text = str(int(figure)) if figure.is_integer() else f"{figure:.3g}"
    return f"{text} {unit}" if unit else text
