"""The view models (veglia.views) the CLI, the web pages and /api share: each view's facts
for real jobs and a real workflow, and the CLI saying the same as the view."""

from __future__ import annotations

import time
from itertools import pairwise

import pytest

from veglia import engine, orm, plugin_manager
from veglia.entry_points import CalculationFactory
from veglia.exceptions import NotExistent
from veglia.hookspecs import hookimpl
from veglia.orm.attributes import (
    BLOCKED,
    CANCEL_PENDING,
    PAUSED,
    PAUSED_REASON,
    SCHEDULER_STATE,
    STOPPED_BY_MONITOR,
    UNREACHABLE,
)
from veglia.plugin_api import Panel
from veglia.views import (
    job_view,
    node_view,
    overview_view,
    process_rows,
    processes_view,
    workflow_view,
)
from veglia.views import node as node_module
from veglia.views.rows import format_state
from veglia_fixtures.profiles import EVIL_LABEL, make_profile, stored_process

ShellJob = CalculationFactory("core.shell")
EVIL = EVIL_LABEL


@pytest.fixture
def ran(evil_workflow):
    """A finished workflow (label EVIL) that ran two shell jobs, and a failed shell job."""
    _, failed = engine.run_get_node(
        ShellJob, command=orm.Str("echo oops >&2; exit 3"), metadata={"label": "fails"}
    )
    assert failed.exit_status not in (0, None)
    return evil_workflow, failed


def test_the_workflow_view_has_its_steps_health_and_timeline(ran):
    flow, _ = ran
    view = workflow_view(flow.pk)
    assert view["process"]["label"] == EVIL and view["process"]["kind"] == "workflow"
    assert view["process"]["url"] == f"/workflow/{flow.pk}"
    steps = [step["row"] for step in view["steps"]]
    assert [row["pk"] for row in steps] == [child.pk for child in flow.called]
    assert all(
        step["depth"] == 0 and step["row"]["url"].startswith("/job/") for step in view["steps"]
    )
    assert view["health"] == {"succeeded": 2, "failed": 0, "running": 0, "waiting": 0}
    assert view["problems"] == [] and view["estimated_end"] is None
    assert view["started"] and view["ended"] and view["started"] <= view["ended"]
    assert [span["pk"] for span in view["timeline"]] == [row["pk"] for row in steps]
    for span in view["timeline"]:
        assert span["submitted"] <= span["ended"] and span["state"] == "finished"
    assert ["steps", "2 done, 0 running, 0 failed"] in view["facts"]
    # The page asks for the latest steps only; health, totals and pks stay of them all.
    latest = workflow_view(flow.pk, latest=1)
    assert [step["row"]["pk"] for step in latest["steps"]] == [steps[-1]["pk"]]
    assert [span["pk"] for span in latest["timeline"]] == [steps[-1]["pk"]]
    assert latest["steps_total"] == 2 and latest["step_pks"] == [row["pk"] for row in steps]
    assert latest["health"] == view["health"]


def test_a_workflow_view_names_a_failed_step_and_what_to_do(profile, workflows):
    _, flow = engine.run_get_node(
        workflows.CountedShell, command=orm.Str("exit 2"), times=orm.Int(1)
    )
    view = workflow_view(flow.pk)
    assert view["health"]["failed"] == 1
    (problem,) = view["problems"]
    step = flow.called[0]
    assert problem["pk"] == step.pk and problem["url"] == f"/job/{step.pk}"
    assert problem["problem"].startswith(f"failed [{step.exit_status}]")
    assert problem["what_to_do"] == f"veglia process report {step.pk}"


def test_the_job_view_has_its_history_scheduler_files_and_log(ran):
    flow, failed = ran
    job = flow.called[0]
    view = job_view(job.pk)
    assert view["process"]["pk"] == job.pk and view["process"]["state_text"] == "✔ Finished [0]"
    assert view["process"]["parent_pk"] == flow.pk
    assert [step["state"] for step in view["history"]] == ["created", "submitted", "finished"] or [
        step["state"] for step in view["history"]
    ] == ["created", "submitted", "running", "finished"]
    assert view["scheduler"]["computer"] == "localhost" and view["scheduler"]["job_id"]
    assert view["script"] and "echo hi" in view["script"]
    assert view["command_line"] == "bash -c 'echo hi; echo run 1' > stdout 2> stderr"
    command = next(link for link in view["inputs"] if link["link_label"] == "command")
    assert command["value"] == "echo hi; echo run 1" and command["url"] == f"/node/{command['pk']}"
    stdout = next(link for link in view["outputs"] if link["link_label"] == "stdout")
    assert stdout["type"] == "SinglefileData" and stdout["size"] == len(b"hi\nrun 1\n")
    assert {r["name"] for r in view["resources"]} >= {"memory", "wall time"}
    assert failed.pk != job.pk
    failed_view = job_view(failed.pk)
    assert failed_view["process"]["state_text"] == f"⨯ Finished [{failed.exit_status}]"
    assert failed_view["process"]["exit_message"] == failed.exit_message


def test_the_job_view_has_the_trace_of_what_it_used(profile):
    command = "python3 -c 'x = bytearray(50_000_000); import time; time.sleep(2.5)'"
    _, job = engine.run_get_node(ShellJob, command=orm.Str(command))
    view = job_view(job.pk)
    assert view["trace"]["measured_by"] == "trace"
    points = view["trace"]["points"]
    assert len(points) >= 2 and all(a["t"] < b["t"] for a, b in pairwise(points))
    assert max(point["rss"] for point in points) > 50_000_000  # bytes
    memory = next(r for r in view["resources"] if r["name"] == "memory")
    assert memory["used"] > 50_000_000 and memory["unit"] == "bytes"


def test_a_missing_or_wrong_pk_is_not_existent(ran):
    flow, failed = ran
    with pytest.raises(NotExistent):
        job_view(999999)
    with pytest.raises(NotExistent):
        workflow_view(failed.pk)
    with pytest.raises(NotExistent):
        job_view(flow.pk)
    with pytest.raises(NotExistent):
        node_view(999999)


def test_the_node_view_draws_the_provenance(ran):
    flow, _ = ran
    view = node_view(flow.pk)
    pks = {row["pk"] for row in view["nodes"]}
    assert flow.pk in pks and {child.pk for child in flow.called} <= pks
    assert any(e["link_type"] == "call" and e["source"] == flow.pk for e in view["edges"])
    assert f"N{flow.pk} " in view["dot"]
    if view["svg"] is not None:  # Graphviz installed
        assert view["svg"].startswith("<svg") and "<script>" not in view["svg"]
        assert f'href="/workflow/{flow.pk}"' in view["svg"]


def test_the_node_view_gives_the_dot_text_of_a_graph_too_big_to_draw(ran, monkeypatch):
    flow, _ = ran
    drawn = node_view(flow.pk)
    monkeypatch.setattr(node_module, "DRAWN_NODES", len(drawn["nodes"]) - 1)
    view = node_view(flow.pk)
    assert view["svg"] is None and view["dot"] == drawn["dot"]
    assert (
        view["svg_note"] == f"{len(drawn['nodes'])} nodes are too many to draw (at most "
        f"{len(drawn['nodes']) - 1})"
    )
    assert drawn["svg_note"] is None


def test_process_list_says_what_the_view_rows_say(ran, run_cli):
    flow, failed = ran
    paused = stored_process(
        orm.CalcJobNode, "waiting", "held", **{PAUSED: True, PAUSED_REASON: "by me"}
    )
    listed = run_cli("-p", "test", "process", "list", "-a", "-P", "pk,state,status", "--raw")
    cli_rows = {}
    for line in listed.stdout.splitlines():
        pk, state, status = [*line.split("\t"), "", ""][:3]
        if pk.isdigit():
            cli_rows[int(pk)] = (state, status)
    rows = {row["pk"]: row for row in process_rows(None)}
    assert set(rows) == set(cli_rows) >= {flow.pk, failed.pk, paused.pk}
    for pk, row in rows.items():
        assert cli_rows[pk] == (row["state_text"], row["status"])
    assert rows[paused.pk]["status"] == "by me" and rows[paused.pk]["state_text"] == "⏸ Paused"
    shown = run_cli("-p", "test", "process", "show", str(paused.pk)).stdout
    assert "by me" in shown and "⏸ Paused" in shown
    for pk, view in ((failed.pk, job_view(failed.pk)), (flow.pk, workflow_view(flow.pk))):
        shown = run_cli("-p", "test", "process", "show", str(pk)).stdout
        for name, value in view["facts"]:
            if name not in ("created", "modified") and len(str(value)) < 30:  # not wrapped
                assert name in shown and str(value) in shown, (name, value)


def test_processes_view_filters_as_process_list(ran):
    flow, failed = ran
    found = processes_view({"state": "all", "label": "fail"})
    assert [row["pk"] for row in found["rows"]] == [failed.pk] and not found["errors"]
    by_type = processes_view({"state": "finished", "type": "countedshell"})
    assert [row["pk"] for row in by_type["rows"]] == [flow.pk]
    assert by_type["rows"][0]["depth"] == 0
    active = processes_view({})
    assert active["rows"] == [] and active["filters"]["state"] == "active"
    bad = processes_view({"state": "nope", "limit": "x", "past_days": "-1"})
    assert len(bad["errors"]) == 3 and bad["filters"]["state"] == "active"


def test_the_overview_counts_lists_and_asks_for_attention(ran):
    flow, failed = ran
    now = time.time()
    blocked = stored_process(
        orm.CalcJobNode, "waiting", "stuck", **{BLOCKED: {"reason": "no queue"}}
    )
    outage = stored_process(
        orm.CalcJobNode,
        "waiting",
        "away",
        **{
            PAUSED: True,
            PAUSED_REASON: "transport failed",
            UNREACHABLE: {"computer": "localhost", "since": now},
        },
    )
    stopped = stored_process(
        orm.CalcJobNode,
        "finished",
        "watched",
        0,
        **{STOPPED_BY_MONITOR: {"name": "guard", "message": "too slow", "time": now}},
    )
    cancel = stored_process(
        orm.CalcJobNode,
        "killed",
        "gone",
        **{CANCEL_PENDING: {"job_id": "42", "computer": "localhost", "since": now}},
    )
    played = stored_process(
        orm.CalcJobNode, "waiting", "played", **{PAUSED: False, PAUSED_REASON: ""}
    )
    view = overview_view()
    assert view["counts"]["finished"] == 5 and view["counts"]["waiting"] == 3
    assert {row["pk"] for row in view["active"]} == {blocked.pk, outage.pk, played.pk}
    assert played.pk not in {item["pk"] for item in view["attention"]}
    recent = [row["pk"] for row in view["recent"]]
    assert {flow.pk, failed.pk, stopped.pk, cancel.pk} <= set(recent)
    problems = {item["pk"]: item for item in view["attention"]}
    assert (
        problems[blocked.pk]["what_to_do"]
        == f"fix the cause, then veglia process unblock {blocked.pk}"
    )
    assert "localhost unreachable" in problems[outage.pk]["problem"]
    assert "monitor guard: too slow" in problems[stopped.pk]["problem"]
    assert problems[cancel.pk]["problem"] == "cancel pending: job 42 on localhost"
    (computer,) = view["computers"]
    assert computer["label"] == "localhost" and computer["reachable"] is False
    assert computer["outage_error"] == "transport failed" and computer["outage_since"]
    assert view["workers"] == []
    assert format_state("finished", 0, stopped_by="guard") in {
        row["state_text"] for row in view["recent"]
    }


class _PanelPlugin:
    @hookimpl
    def overview_panels(self):
        return [Panel("Licences", [("seats free", 3), ("note", EVIL)])]


class _BrokenPanelPlugin:
    @hookimpl
    def overview_panels(self):
        raise RuntimeError("no licence server")


@pytest.fixture
def only_plugins(monkeypatch):
    """Only these plugins are loaded, for the rest of the test."""

    def install(*plugins):
        manager = plugin_manager.build_plugin_manager(only=[])
        for plugin in plugins:
            manager.register(plugin)
        monkeypatch.setattr(plugin_manager, "_manager", manager)

    return install


def test_overview_panels_of_plugins_show_and_a_broken_one_says_so(profile, only_plugins):
    only_plugins(_PanelPlugin(), _BrokenPanelPlugin())
    panels = overview_view()["panels"]
    assert {"title": "Licences", "rows": [["seats free", 3], ["note", EVIL]]} in panels
    broken = [panel for panel in panels if panel["title"] != "Licences"]
    assert len(broken) == 1 and "no licence server" in broken[0]["rows"][0][1]


def test_overview_panels_of_tower_report_its_outbox(veglia_home):
    from veglia.engine.runner import set_runner

    make_profile(**{"tower.enabled": "yes", "tower.endpoint": "http://127.0.0.1:9/api"})
    try:
        (panel,) = [p for p in overview_view()["panels"] if "Tower" in p["title"]]
    finally:
        set_runner(None)
    rows = dict(map(tuple, panel["rows"]))
    assert rows["enabled"] == "yes" and rows["pending"] == 0 and rows["refused"] == 0
    assert "token" not in str(panel).lower()


def test_overview_panels_leave_tower_out_when_it_is_off_and_idle(profile):
    assert not [p for p in overview_view()["panels"] if "Tower" in p["title"]]


def test_the_overview_and_search_queries_on_each_database(any_profile):
    now = time.time()
    flow = stored_process(orm.WorkflowNode, "waiting", "flow")
    queued = stored_process(
        orm.CalcJobNode, "waiting", "queued", caller=flow, **{SCHEDULER_STATE: "queued"}
    )
    paused = stored_process(
        orm.CalcJobNode, "waiting", "paused", **{PAUSED: True, PAUSED_REASON: "me"}
    )
    stored_process(orm.CalcJobNode, "waiting", "played", **{PAUSED: False})
    gone = stored_process(
        orm.CalcJobNode,
        "killed",
        "gone",
        **{CANCEL_PENDING: {"job_id": "7", "computer": "localhost", "since": now}},
    )
    view = overview_view()
    assert view["counts"] == {"waiting": 4, "killed": 1}
    assert {item["pk"] for item in view["attention"]} == {paused.pk, gone.pk}
    assert [row["pk"] for row in view["recent"]] == [gone.pk]
    rows = process_rows()  # the active ones, and the one whose cancel is still to do
    assert [(row["pk"], row["depth"]) for row in rows][:2] == [(flow.pk, 0), (queued.pk, 1)]
    assert rows[1]["status"] == "scheduler: queued"
    assert gone.pk in {row["pk"] for row in rows}
    assert processes_view({"type": "demo", "state": "all"})["rows"][0]["pk"] == flow.pk


def _statements(build) -> int:
    """How many SQL statements ``build()`` sends."""
    import sqlalchemy as sa

    from veglia.manage import get_storage

    engine_ = get_storage().engine
    sent = []

    def count(*args):
        sent.append(args)

    sa.event.listen(engine_, "before_cursor_execute", count)
    try:
        build()
    finally:
        sa.event.remove(engine_, "before_cursor_execute", count)
    return len(sent)


def test_lists_cost_the_same_queries_for_few_processes_or_many(profile):
    """No query per row: ten times the processes, the same statements."""
    flow = stored_process(orm.WorkflowNode, "waiting", "flow")

    def add(count: int) -> None:
        for index in range(count):
            stored_process(orm.CalcJobNode, "waiting", f"step {index}", caller=flow)
            stored_process(orm.CalcJobNode, "finished", f"done {index}", 0)
            stored_process(orm.CalcJobNode, "waiting", f"held {index}", **{PAUSED: True})

    builds = {
        "overview": overview_view,
        "processes": lambda: processes_view({"state": "all"}),
        "workflow": lambda: workflow_view(flow.pk),
    }
    add(3)
    few = {name: _statements(build) for name, build in builds.items()}
    add(27)
    many = {name: _statements(build) for name, build in builds.items()}
    assert all(few.values()) and many == few


def test_the_overview_shows_the_daemon_workers(profile, daemon):
    daemon(1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = overview_view()["workers"]
        if workers and workers[0]["alive"]:
            break
        time.sleep(0.2)
    (worker,) = workers
    assert worker["alive"] and worker["pid"] > 0 and worker["started"]
