"""Sending a workflow run back to a step (``veglia process rerun PK --from STEP``) and a
step's failure behaviour (``spec.on_failure(..., go_back_to=...)``), on localhost (direct),
in the foreground."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.engine.workflow.workchain import WorkChain
from veglia_fixtures.profiles import wait_for


def _first_run(workflows, tmp_path: Path, x: int = 1):
    tokens = tmp_path / "tokens"
    outputs, node = engine.run_get_node(
        workflows.PrepareComputeSummarize,
        x=orm.Int(x),
        tokens=orm.Str(str(tokens)),
        metadata={"label": "three steps"},
    )
    assert node.is_finished_ok, node.exit_message
    assert outputs["result"].get_content() == f"base\nx={x}\ndone\n".encode()
    return node, tokens


def _rerun_pk(stdout: str) -> int:
    found = re.search(r"ran again as process (\d+)", stdout)
    assert found, stdout
    return int(found.group(1))


def test_a_rerun_from_a_step_runs_only_that_step_and_the_ones_after(
    any_profile, workflows, run_cli, tmp_path
):
    first, tokens = _first_run(workflows, tmp_path)
    prepare, compute, summarize = first.called

    result = run_cli(
        "-p", "test", "process", "rerun", str(first.pk), "--from", "compute", "--set", "x=5"
    )
    assert result.exit_code == 0, result.output
    second = orm.load_node(_rerun_pk(result.stdout))

    # The new output has the value set; prepare did not run again (its job is the same).
    assert second.is_finished_ok, second.exit_message
    assert second.outputs.result.get_content() == b"base\nx=5\ndone\n"
    assert tokens.read_text() == "prepared\n"
    new_compute, new_summarize = second.called
    assert {new_compute.pk, new_summarize.pk}.isdisjoint({compute.pk, summarize.pk})
    assert second.get_attribute("reused_calls") == {"0.0": prepare.pk}
    assert new_compute.inputs["files__in.txt"] == prepare.outputs.stdout
    assert prepare.caller == first  # still one call link: from the run that launched it
    assert second.get_attribute("rerun_of") == first.pk
    assert second.get_attribute("rerun_from") == "compute"
    assert second.inputs.x.value == 5 and second.inputs.tokens == first.inputs.tokens
    assert second.label == first.label

    # The first try is untouched, and both are in the provenance graph of the new run.
    assert first.outputs.result.get_content() == b"base\nx=1\ndone\n"
    graph = run_cli("-p", "test", "node", "graph", str(second.pk), "--depth", "1").stdout
    for node in (first, prepare, second, new_compute, new_summarize):
        assert f"N{node.pk} [" in graph, node
    assert f'N{second.pk} -> N{first.pk} [label="RERUN\\nrerun of"' in graph
    assert f'N{second.pk} -> N{prepare.pk} [label="0.0\\nreused"' in graph
    deeper = run_cli("-p", "test", "node", "graph", str(second.pk), "--depth", "2").stdout
    assert f"N{first.pk} -> N{prepare.pk}" in deeper  # the first try called it
    shown = run_cli("-p", "test", "process", "show", str(second.pk)).stdout
    assert f"process {first.pk}, from step compute" in shown
    assert f"process {prepare.pk}" in shown
    report = run_cli("-p", "test", "process", "report", str(second.pk)).stdout
    assert f"step prepare: reusing process {prepare.pk} of process {first.pk}" in report


def test_a_rerun_of_a_rerun_reuses_what_the_first_one_reused(profile, workflows, tmp_path):
    from veglia.engine.rerun import rerun_workflow

    first, tokens = _first_run(workflows, tmp_path)
    second = rerun_workflow(first.pk, "summarize", {"x": 7})
    # compute ran again too: the rerun went back to summarize only, and x changed compute's
    # input; what a reused step would have made with it does not matter.
    assert second.outputs.result.get_content() == b"base\nx=1\ndone\n"
    third = rerun_workflow(second.pk, "summarize")
    reused = third.get_attribute("reused_calls")
    assert reused == {"0.0": first.called[0].pk, "1.0": first.called[1].pk}
    assert len(third.called) == 1 and tokens.read_text() == "prepared\n"


def test_a_rerun_submitted_to_the_daemon_reuses_the_same_steps(
    profile, workflows, daemon, run_cli, tmp_path
):
    first, tokens = _first_run(workflows, tmp_path)
    daemon(1)
    result = run_cli(
        "-p", "test", "process", "rerun", str(first.pk), "--from", "summarize", "--submit"
    )
    assert result.exit_code == 0, result.output
    found = re.search(r"Submitted process (\d+)", result.stdout)
    assert found, result.stdout
    second = orm.load_node(int(found.group(1)))
    wait_for([second], lambda n: n.is_terminated, timeout=120)
    assert second.is_finished_ok, second.exit_message
    prepare, compute, _ = first.called
    assert second.get_attribute("reused_calls") == {"0.0": prepare.pk, "1.0": compute.pk}
    assert len(second.called) == 1 and tokens.read_text() == "prepared\n"


def test_a_wrong_step_or_input_is_refused_in_one_line(profile, workflows, run_cli, tmp_path):
    first, _ = _first_run(workflows, tmp_path)
    wrong = run_cli("-p", "test", "process", "rerun", str(first.pk), "--from", "align")
    assert wrong.exit_code != 0
    assert wrong.stderr.strip().splitlines() == [
        "Error: pipeline_workflows:PrepareComputeSummarize has no step 'align'; its steps: "
        "prepare, compute, summarize, results."
    ], wrong.stderr
    bad = run_cli(
        "-p", "test", "process", "rerun", str(first.pk), "--from", "compute", "--set", "y=2"
    )
    assert bad.exit_code != 0 and len(bad.stderr.strip().splitlines()) == 1
    assert "Unknown input 'y'" in bad.stderr
    job = first.called[0]
    calc = run_cli("-p", "test", "process", "rerun", str(job.pk), "--from", "compute")
    assert calc.exit_code != 0 and "is no workflow run" in calc.stderr
    assert len(orm.load_node(first.pk).called) == 3  # nothing ran


def test_a_failing_step_goes_back_to_the_step_it_declares(profile, workflows, tmp_path):
    tokens, marker = tmp_path / "tokens", tmp_path / "marker"
    # compute fails the first time only: the workflow goes back to prepare, once.
    flaky = f"if [ ! -e {marker} ]; then touch {marker}; exit 3; fi"
    outputs, node = engine.run_get_node(
        workflows.GoesBackToPrepare,
        x=orm.Int(2),
        tokens=orm.Str(str(tokens)),
        guard=orm.Str(flaky),
    )
    assert node.is_finished_ok, node.exit_message
    assert outputs["result"].get_content() == b"base\nx=2\ndone\n"
    assert tokens.read_text() == "prepared\nprepared\n"
    prepare1, compute1, prepare2, compute2, _ = node.called
    assert compute1.exit_status != 0 and compute2.is_finished_ok
    assert compute2.inputs["files__in.txt"] == prepare2.outputs.stdout != prepare1.outputs.stdout
    assert node.get_attribute("went_back") == [
        {"step": "compute", "failed": compute1.pk, "to": "prepare", "attempt": 1}
    ]
    assert any(
        f"step compute: process {compute1.pk} failed" in log.message
        and "going back to step prepare (attempt 1 of 1)" in log.message
        for log in node.logs
    )


def test_a_step_failing_again_fails_the_workflow_as_without(profile, workflows, tmp_path):
    tokens = tmp_path / "tokens"
    _, node = engine.run_get_node(
        workflows.GoesBackToPrepare,
        x=orm.Int(2),
        tokens=orm.Str(str(tokens)),
        guard=orm.Str("exit 3"),
    )
    assert node.exit_status == 401 and node.exit_message == "Step compute failed."
    assert tokens.read_text() == "prepared\nprepared\n" and len(node.called) == 4
    assert any("no attempts left to go back to step prepare" in log.message for log in node.logs)


def test_a_failure_behaviour_names_steps_of_the_outline():
    with pytest.raises(ValueError, match="'finish' is no step of the outline"):

        class Wrong(WorkChain):
            @classmethod
            def define(cls, spec):
                super().define(spec)
                spec.outline(cls.first, cls.second)
                spec.on_failure(cls.second, go_back_to="finish")

            def first(self):
                pass

            def second(self):
                pass

        Wrong.spec()

    with pytest.raises(ValueError, match="must be a step before 'first'"):

        class Forward(WorkChain):
            @classmethod
            def define(cls, spec):
                super().define(spec)
                spec.outline(cls.first, cls.second)
                spec.on_failure(cls.first, go_back_to=cls.second)

            def first(self):
                pass

            def second(self):
                pass

        Forward.spec()
