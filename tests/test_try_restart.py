"""The restart policy's attempts, as trace records and reports show them."""

from veglia import engine, orm
from veglia.entry_points import CalculationFactory, WorkflowFactory
from veglia.orm.attributes import TRACE_RECORD

ShellJob = CalculationFactory("core.shell")
Restart = WorkflowFactory("core.restart")


def test_a_resubmitted_job_is_attempt_2_in_its_trace_record(profile, tmp_path):
    marker = tmp_path / "marker"
    builder = ShellJob.get_builder()
    builder.command = orm.Str(f"if [ -e {marker} ]; then echo ok; else touch {marker}; exit 1; fi")
    out, node = engine.run_get_node(Restart.wrap(builder))
    assert node.is_finished_ok
    assert out["stdout"].get_content() == b"ok\n"
    first, second = sorted(node.called, key=lambda child: child.pk)
    assert [first.attempt, second.attempt] == [1, 2]
    assert first.get_attribute(TRACE_RECORD)["attempt"] == 1
    assert first.get_attribute(TRACE_RECORD)["status"] == "FAILED"
    assert second.get_attribute(TRACE_RECORD)["attempt"] == 2
    assert second.get_attribute(TRACE_RECORD)["status"] == "COMPLETED"
