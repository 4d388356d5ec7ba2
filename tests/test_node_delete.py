"""`veglia node delete`: what goes with a node by provenance (AiiDA's rules), shown first,
confirmed, and never an active process."""

from __future__ import annotations

import re

import pytest

from veglia.exceptions import NotExistent


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def _exists(pk: int) -> bool:
    from veglia.orm import load_node

    try:
        load_node(pk)
    except NotExistent:
        return False
    return True


def _process(cls, process_type: str, state: str = "finished", **links):
    """A process node by hand, with incoming links {label: (node, link type)}."""
    node = cls(process_type=process_type, label=process_type)
    node.process_state = state
    node.store([(source, link_type, label) for label, (source, link_type) in links.items()])
    return node


def test_deleting_data_takes_the_jobs_that_used_it_and_their_outputs(run_cli, profile):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    add = CalculationFactory("core.arithmetic.add")
    x, y, one = orm.Int(2).store(), orm.Int(3).store(), orm.Int(1).store()
    _, first = engine.run_get_node(add, x=x, y=y)
    _, second = engine.run_get_node(add, x=first.outputs.sum, y=one)
    assert first.is_finished_ok and second.is_finished_ok
    group = orm.Group(label="sums").store()
    group.add_nodes([first, y])

    doomed = {x.pk, first.pk, second.pk}
    for job in (first, second):
        doomed |= {node.pk for _, node in job.outputs.items()}
    assert len(doomed) == 9

    shown = ok(run_cli("node", "delete", str(x.pk), "--dry-run")).stdout
    assert "Deleting 9 nodes (2 calc jobs, 7 data): the 1 node asked for and 8 that go" in shown
    assert "Dry run: nothing was deleted." in shown
    table = {
        int(line.split()[0]): line.rstrip() for line in shown.splitlines() if line[:1].isdigit()
    }
    assert set(table) == doomed
    assert re.search(r"Int\s+.*asked$", table[x.pk])
    assert re.search(
        rf"CalcJobNode\s+core.arithmetic.add\s.*✔ Finished \[0\]\s+used {x.pk}$", table[first.pk]
    )
    assert table[first.outputs.sum.pk].endswith(f"created by {first.pk}")
    assert table[second.pk].endswith(f"used {first.outputs.sum.pk}")
    assert all(_exists(pk) for pk in doomed)

    refused = run_cli("node", "delete", str(x.pk), input="n\n")
    assert (
        refused.exit_code == 1 and "Delete these 9 nodes? This cannot be undone" in refused.stdout
    )
    assert "Nothing done." in refused.stdout and all(_exists(pk) for pk in doomed)
    assert "Error" not in refused.stderr

    deleted = ok(run_cli("node", "delete", str(x.pk), input="y\n"))
    assert "Deleted 9 nodes." in deleted.stdout
    assert not any(_exists(pk) for pk in doomed)
    assert _exists(y.pk) and _exists(one.pk)  # inputs of deleted jobs stay
    assert group.nodes == [y]  # the group stays, without the deleted node


def test_deleting_a_step_takes_its_workflow_and_the_other_steps(run_cli, profile):
    from veglia import orm

    data = orm.Int(1).store()
    workflow = _process(orm.WorkflowNode, "demo.workflow", x=(data, "input"))
    step = _process(orm.CalcJobNode, "core.shell", x=(data, "input"), CALL=(workflow, "call"))
    other_step = _process(orm.CalcJobNode, "core.shell", CALL=(workflow, "call"))
    made = orm.Str("made").store([(step, "create", "result")])
    returned = orm.Str("returned").store([(workflow, "output", "result")])
    unrelated = orm.Int(9).store()

    shown = ok(run_cli("node", "delete", str(step.pk), "-n")).stdout
    pks = {int(line.split()[0]) for line in shown.splitlines() if line[:1].isdigit()}
    # The caller goes (it would lack a step), with the other steps it called; the data the
    # workflow returned but did not create stays, as its input does.
    assert pks == {step.pk, workflow.pk, other_step.pk, made.pk}
    assert f"called {step.pk}" in shown and f"called by {workflow.pk}" in shown
    ok(run_cli("node", "delete", str(step.pk), "--force"))
    assert [_exists(n.pk) for n in (step, workflow, other_step, made)] == [False] * 4
    assert all(_exists(n.pk) for n in (data, returned, unrelated))

    # Deleting data a workflow returned takes the workflow.
    again = _process(orm.WorkflowNode, "demo.workflow")
    output = orm.Int(3).store([(again, "output", "result")])
    ok(run_cli("node", "delete", str(output.pk), "-f"))
    assert not _exists(again.pk) and not _exists(output.pk)


def test_an_active_process_is_never_deleted(run_cli, profile):
    from veglia import orm

    data = orm.Int(1).store()
    running = _process(orm.CalcJobNode, "core.shell", state="waiting", x=(data, "input"))
    refused = run_cli("node", "delete", str(data.pk), "--force")
    assert refused.exit_code == 1
    assert str(running.pk) in refused.stdout  # the plan is still shown
    message = refused.stderr.strip()
    assert len(message.splitlines()) == 1 and message.startswith("Error: Refusing to delete")
    assert f"process {running.pk} (core.shell, waiting) has not ended" in message
    assert f"veglia process kill {running.pk}" in message
    assert _exists(data.pk) and _exists(running.pk)

    missing = run_cli("node", "delete", "99999")
    assert missing.exit_code == 4 and "No node with pk or UUID '99999'" in missing.stderr


@pytest.mark.parametrize("storage_url", ["postgresql"], indirect=True)
def test_deletion_on_postgresql(run_cli, veglia_home, storage_url):
    from veglia import orm
    from veglia.engine.runner import set_runner
    from veglia.orm.deletion import delete_nodes, plan_deletion
    from veglia_fixtures.profiles import make_profile

    make_profile(**{"storage.url": storage_url})
    try:
        data = orm.Int(1).store()
        job = _process(orm.CalcJobNode, "core.shell", x=(data, "input"))
        made = orm.Str("out").store([(job, "create", "out")])
        plan = plan_deletion([data.pk])
        assert plan.pks == [data.pk, job.pk, made.pk] and plan.counts() == {
            "calc job": 1,
            "data": 2,
        }
        assert delete_nodes(plan) == 3 and not _exists(job.pk)
    finally:
        set_runner(None)
