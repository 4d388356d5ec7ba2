"""``veglia.orm.queries`` and the node properties, on SQLite and PostgreSQL: what the CLI and
the daemon ask of the stored nodes."""

from __future__ import annotations

import pytest

from veglia import orm
from veglia.orm import queries
from veglia.orm.attributes import (
    BLOCKED,
    CACHED_FROM,
    COMPUTER,
    CONTROL_REQUEST,
    DAEMON,
    JOB_ID,
    LAST_JOB_INFO,
    PAUSED,
    PAUSED_REASON,
    SCHEDULER_STATE,
    STOPPED_BY_MONITOR,
    UNREACHABLE,
    WAITING_FOR,
)


def _process(node_class, state, incoming=(), exit_status=None, **attributes):
    node = node_class(process_type="core.shell" if node_class is orm.CalcJobNode else "wf")
    node.label = attributes.pop("label", "")
    node.process_state = state
    node.computer_pk = orm.load_computer("localhost").pk if node_class is orm.CalcJobNode else None
    node.store(incoming)
    if attributes:
        node.set_attributes(attributes)
    if exit_status is not None:
        node.set_exit(exit_status, None)
    return node


@pytest.fixture
def graph(any_profile):
    """A waiting workflow that called two finished jobs (one failed); a paused, blocked job
    in the daemon; an input and a created output of the first job."""
    workflow = _process(orm.WorkflowNode, "waiting", label="pipeline")
    given = orm.Int(1).store()
    ok = _process(
        orm.CalcJobNode,
        "finished",
        [(workflow, "call", "CALL"), (given, "input", "x")],
        0,
        label="a",
    )
    failed = _process(orm.CalcJobNode, "finished", [(workflow, "call", "CALL")], 1)
    held = _process(
        orm.CalcJobNode,
        "waiting",
        **{PAUSED: True, PAUSED_REASON: "blocked", BLOCKED: {"reason": "no"}, DAEMON: True},
    )
    made = orm.FolderData()
    made.put_object_from_bytes("out.txt", b"result")
    made.store([(ok, "create", "retrieved")])
    return workflow, given, ok, failed, held, made


def test_active_processes_by_paused_blocked_and_daemon(graph):
    workflow, _, _, _, held, _ = graph
    assert queries.active_process_pks() == [workflow.pk, held.pk]
    assert queries.active_process_pks(paused=True) == [held.pk]
    assert queries.active_process_pks(paused=False) == [workflow.pk]
    assert queries.active_process_pks(blocked=True) == [held.pk]
    assert queries.active_process_pks(blocked=False) == [workflow.pk]
    assert queries.active_process_pks(daemon=True) == [held.pk]
    assert queries.active_process_pks(daemon=False, paused=False) == [workflow.pk]


def test_a_missing_attribute_is_not_set_on_either_database(graph):
    """SQLite's JSON_QUOTE makes a missing key 'null', not NULL: ``isnot(None)`` was true
    for every node there."""
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.storage.models import Node

    workflow, given, _, _, held, _ = graph
    given_pks = [workflow.pk, given.pk, held.pk]
    with get_storage().session() as session:
        found = session.scalars(
            sa.select(Node.id).where(Node.id.in_(given_pks), queries.has_attribute(BLOCKED))
        ).all()
    assert found == [held.pk]


def test_the_daemon_touches_only_the_nodes_with_a_control_request(graph):
    from veglia.engine.daemon.control import apply_database_requests

    workflow, _, _, _, held, _ = graph
    done = []
    mine = {workflow.pk, held.pk}

    held.set_attribute(CONTROL_REQUEST, {"action": "pause", "message": "hold on"})
    before = queries.node_mtime(workflow.pk)
    # The live processes' requests; then every active process's (sleeping ones included).
    for live in (sorted(mine), None):
        apply_database_requests(live, mine.__contains__, lambda *request: done.append(request))
    assert done == [(held.pk, "pause", "hold on")]
    assert orm.load_node(held.pk).get_attribute(CONTROL_REQUEST) is None
    assert queries.node_mtime(workflow.pk) == before  # not rewritten twice a second


def test_listed_processes_with_filters(graph):
    workflow, _, ok, failed, held, _ = graph

    def pks(*args, **kwargs):
        return [row.pk for row in queries.list_processes(*args, **kwargs)]

    assert pks() == [workflow.pk, ok.pk, failed.pk, held.pk]  # oldest first
    assert pks(queries.ACTIVE_STATES) == [workflow.pk, held.pk]
    assert pks(["finished"]) == [ok.pk, failed.pk]
    assert pks(failed=True) == [failed.pk]
    assert pks(limit=2) == [failed.pk, held.pk]  # the most recent, still oldest first
    assert pks(past_days=1) == pks()
    assert pks(process_type="core.shell") == [ok.pk, failed.pk, held.pk]
    assert pks(label="a") == [ok.pk]
    assert ok.pk in pks(caller=workflow.pk) and held.pk not in pks(caller=workflow.pk)
    assert pks(caller=ok.pk) == []
    rows = {row.pk: row for row in queries.list_processes()}
    assert rows[ok.pk].caller_pk == workflow.pk and rows[held.pk].caller_pk is None
    assert rows[ok.pk].computer == "localhost" and rows[workflow.pk].computer is None
    assert rows[held.pk].attributes[BLOCKED] == {"reason": "no"}
    assert rows[failed.pk].exit_status == 1 and rows[ok.pk].node_type == "process.calcjob"


def test_listed_processes_bring_only_the_attributes_asked_for(graph):
    """``process list`` reads the few attributes its columns show, not a job's whole record."""
    _, _, ok, _, held, _ = graph
    ok.set_attributes({JOB_ID: "12", SCHEDULER_STATE: "done"})
    rows = {row.pk: row for row in queries.list_processes(attribute_keys=[BLOCKED, JOB_ID])}
    assert rows[held.pk].attributes == {BLOCKED: {"reason": "no"}}
    assert rows[ok.pk].attributes == {JOB_ID: "12"}
    assert queries.list_processes(attribute_keys=[])[0].attributes == {}
    every = {row.pk: row for row in queries.list_processes()}
    assert every[ok.pk].attributes[SCHEDULER_STATE] == "done"


def test_links_and_the_provenance_around_a_node(graph):
    workflow, given, ok, _, _, made = graph
    assert queries.links_of(ok.pk, incoming=True) == [
        ("CALL", "call", workflow.pk, "process.workflow"),
        ("x", "input", given.pk, "data.int"),
    ]
    assert queries.links_of(ok.pk, incoming=False) == [
        ("retrieved", "create", made.pk, "data.folder")
    ]
    nodes, edges = queries.provenance_around(ok.pk, 1)
    assert [row.id for row in nodes] == sorted([workflow.pk, given.pk, ok.pk, made.pk])
    assert edges == [
        (workflow.pk, ok.pk, "CALL", "call"),
        (given.pk, ok.pk, "x", "input"),
        (ok.pk, made.pk, "retrieved", "create"),
    ]
    assert len(queries.provenance_around(ok.pk, 2)[0]) == 5  # and the workflow's other job
    assert queries.provenance_around(ok.pk, 0) == ([nodes[[r.id for r in nodes].index(ok.pk)]], [])


def test_what_verify_asks(graph):
    workflow, given, ok, failed, _, made = graph
    assert queries.node_pks() == sorted(n.pk for n in graph)
    assert queries.node_pks([given.pk, 10**9]) == [given.pk]
    assert queries.process_tree({workflow.pk}) == {workflow.pk, ok.pk, failed.pk}
    assert queries.created_or_returned({ok.pk, failed.pk}) == {made.pk}
    assert queries.creating_calcjobs({made.pk, given.pk}) == {ok.pk: [made.pk]}
    [(pk, path, sha256)] = queries.repository_files({made.pk, given.pk})
    assert (pk, path) == (made.pk, "out.txt") and len(sha256) == 64


def test_logs_mtime_and_configured_computers(graph):
    _, _, ok, _, _, _ = graph
    ok.add_log("REPORT", "first")
    ok.add_log("REPORT", "second")
    first, second = queries.logs_after(ok.pk)
    assert (first.message, second.message) == ("first", "second")
    assert [log.message for log in queries.logs_after(ok.pk, first.id)] == ["second"]
    assert queries.node_mtime(ok.pk) == ok.refresh().mtime
    assert queries.node_mtime(10**9) is None
    orm.Computer("cluster", "nowhere.invalid", "core.ssh", "core.slurm").store()
    assert queries.configured_computer_pks() == {orm.load_computer("localhost").pk}


def test_the_change_stamp_moves_with_every_write_the_views_show(graph):
    """The web view reloads a watched page only when this stamp moved."""
    from veglia.orm.deletion import delete_nodes, plan_deletion

    _, _, ok, _, _, _ = graph
    alone = orm.Int(2)
    stamps = [queries.change_stamp()]
    assert queries.change_stamp() == stamps[0]  # nothing changed, nor does the stamp
    for write in (
        lambda: ok.set_attribute(SCHEDULER_STATE, "R"),
        lambda: ok.add_log("REPORT", "a line"),
        alone.store,
        lambda: orm.Computer("cluster", "nowhere.invalid", "core.ssh", "core.slurm").store(),
        lambda: delete_nodes(plan_deletion([alone.pk])),
    ):
        write()
        stamps.append(queries.change_stamp())
        assert stamps[-1] != stamps[-2], write


def test_node_properties_read_the_named_attributes(graph):
    workflow, _, ok, _, held, _ = graph
    ok.set_attributes(
        {
            COMPUTER: "localhost",
            JOB_ID: "42",
            SCHEDULER_STATE: "done",
            LAST_JOB_INFO: {"queue": "short"},
            STOPPED_BY_MONITOR: {"name": "m"},
            CACHED_FROM: {"pk": 1},
            UNREACHABLE: {"computer": "localhost"},
        }
    )
    node = orm.load_node(ok.pk)
    assert (node.computer_label, node.job_id, node.scheduler_state) == ("localhost", "42", "done")
    assert node.last_job_info == {"queue": "short"} and node.stopped_by_monitor == {"name": "m"}
    assert node.cached_from == {"pk": 1} and node.unreachable == {"computer": "localhost"}
    assert node.job_outcome == {} and node.retrieve_list == [] and node.usage is None
    held = orm.load_node(held.pk)
    assert held.paused and held.paused_reason == "blocked" and held.blocked == {"reason": "no"}
    assert orm.load_node(workflow.pk).waiting_for == []
    workflow.set_attribute(WAITING_FOR, [ok.pk])
    assert orm.load_node(workflow.pk).waiting_for == [ok.pk]


def test_a_workflow_s_progress_asks_the_history_of_all_its_kinds_of_step_at_once(
    any_profile, monkeypatch
):
    """``process show`` of a workflow with many running steps: one history query for every
    kind of step (process type and similarity key), not one per step or per kind; and the
    answer of each kind is what asking for it alone gives."""
    from veglia.engine import progress
    from veglia.engine.calcjob.history import similar_durations, similar_durations_of
    from veglia.orm.attributes import SIMILARITY_KEY

    asked = []

    def counted(kinds, limit=500):
        asked.append(sorted(set(kinds), key=str))
        return similar_durations_of(kinds, limit)

    monkeypatch.setattr(progress, "similar_durations_of", counted)
    workflow = _process(orm.WorkflowNode, "waiting")
    for key in ("small", "small", "small", "big"):
        _process(orm.CalcJobNode, "running", [(workflow, "call", "CALL")], **{SIMILARITY_KEY: key})
    for key in ("small", "small", "big", None):
        _process(
            orm.CalcJobNode, "finished", [(workflow, "call", "CALL")], 0, **{SIMILARITY_KEY: key}
        )
    shown = progress.workflow_progress(orm.load_node(workflow.pk))
    assert (shown.done, shown.running) == (4, 4)
    assert asked == [[("core.shell", "big"), ("core.shell", "small")]]
    kinds = [("core.shell", "small"), ("core.shell", "big"), ("core.shell", None), ("wf", "x")]
    together = similar_durations_of(kinds, limit=2)
    assert together == {kind: similar_durations(*kind, limit=2) for kind in kinds}
    assert together[("core.shell", None)].count == 2 and together[("wf", "x")] is None


def _plan(connection, statement, parameters) -> str:
    """The plan of a statement as it was sent, on one line. On PostgreSQL, the generic plan
    of the statement prepared, as it is after a few runs (the daemon's, the web view's): it
    knows the values written in the SQL, not the bound ones."""
    import re

    if connection.dialect.name != "postgresql":
        rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
        return " ".join(str(row[3]) for row in rows)
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", statement)
    connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
    connection.exec_driver_sql("DEALLOCATE ALL")
    connection.exec_driver_sql(f"PREPARE looked_up AS {numbered}".replace("%%", "%"))
    values = ", ".join(
        f"'{value}'" if isinstance(value, str) else str(value)
        for value in (parameters[name] for name in names)
    )
    rows = connection.exec_driver_sql(f"EXPLAIN EXECUTE looked_up({values})").all()
    return " ".join(str(row[0]) for row in rows)


def test_a_workflow_s_estimate_reads_the_latest_runs_in_the_order_of_an_index(any_profile):
    """``process show`` of a running workflow averages the latest finished runs of its type
    and of each kind of step it runs: an index gives them newest first, so the database
    reads those, not every run of the kind to sort them (with 1,000,000 nodes PostgreSQL
    read all 16,334 finished workflows of the type, 72 ms, to give the latest 100)."""
    import sqlalchemy as sa

    from veglia.engine.progress import workflow_progress
    from veglia.manage import get_storage
    from veglia.orm.attributes import SIMILARITY_KEY

    workflow = _process(orm.WorkflowNode, "waiting")
    _process(orm.WorkflowNode, "finished", exit_status=0)
    for state, exit_status in (("running", None), ("finished", 0)):
        for key in ("small", "big"):
            called = [(workflow, "call", "CALL")]
            _process(orm.CalcJobNode, state, called, exit_status, **{SIMILARITY_KEY: key})
    node = orm.load_node(workflow.pk)
    sent = []

    def seen(_connection, _cursor, statement, parameters, *_):
        sent.append((statement, parameters))

    engine = get_storage().engine
    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        workflow_progress(node)
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    history = [(s, p) for s, p in sent if "ORDER BY nodes.id DESC" in s]
    assert len(history) == 2, sent  # the workflow's type, then every kind of running step
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            # A near-empty table is cheaper to read whole: ask whether an index gives the
            # order, with sorting the last resort.
            connection.exec_driver_sql("SET enable_seqscan = off")
            connection.exec_driver_sql("SET enable_sort = off")
        plans = [_plan(connection, statement, parameters) for statement, parameters in history]
    indexes = ("ix_nodes_finished_ok_type", "ix_nodes_finished_ok_key")
    for plan, index in zip(plans, indexes, strict=True):
        # The index answers every condition (none is checked row by row), in order.
        assert index in plan, plan
        assert "Filter" not in plan, plan
        assert "Sort" not in plan and "TEMP B-TREE" not in plan, plan


def test_the_look_ups_by_similarity_key_alone_read_its_index(any_profile):
    """Right-sizing and the queue waits ask for similar jobs by key, without a type: they
    read an index that starts with the key (SQLite picks the one on state and node type,
    and reads every finished job, 0.4 s with 1,000,000 nodes, when the key's own index
    holds more columns than the key)."""
    import sqlalchemy as sa

    from veglia.engine.calcjob.history import similar_usage, similar_waits
    from veglia.manage import get_storage

    sent = []

    def seen(_connection, _cursor, statement, parameters, *_):
        sent.append((statement, parameters))

    engine = get_storage().engine
    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        similar_usage("core.shell||localhost|1")
        similar_waits("core.shell||localhost|1")
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql("SET enable_seqscan = off")
        for statement, parameters in sent:
            plan = _plan(connection, statement, parameters)
            assert "ix_nodes_similarity_key" in plan or "ix_nodes_finished_ok_key" in plan, plan


def test_file_sizes_are_whole_numbers_on_every_database(any_profile):
    """A job page's /api answer holds its files' sizes: PostgreSQL sums them as numeric."""
    import json

    stored = [orm.SinglefileData(b"x" * size, "f.txt").store() for size in (3, 5)]
    sizes = queries.file_sizes([node.pk for node in stored])
    assert sizes == {stored[0].pk: 3, stored[1].pk: 5}
    assert json.dumps(sizes)


def test_the_change_stamp_moves_with_a_plugin_s_own_tables_through_change_stamp_parts(
    any_profile, monkeypatch
):
    """Tower's outbox is its own table: its part of the stamp comes from its hook, and the
    overview's panel reloads when a record is queued."""
    from veglia.plugin_manager import reset_plugin_manager
    from veglia.plugins.tower import outbox

    before = queries.change_stamp()
    assert len(before.plugins) == 4
    outbox.enqueue("run-1", "task", 1, 1, {})
    after = queries.change_stamp()
    assert after.plugins != before.plugins
    assert (after.nodes, after.newest_log, after.pipelines) == (
        before.nodes,
        before.newest_log,
        before.pipelines,
    )
    monkeypatch.setenv("VEGLIA_PLUGINS", "core.trace")
    reset_plugin_manager()
    assert queries.change_stamp().plugins == ()
