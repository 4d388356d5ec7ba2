from veglia import engine, orm
from veglia.entry_points import CalculationFactory, WorkflowFactory

ShellJob = CalculationFactory("core.shell")
Restart = WorkflowFactory("core.restart")


def test_restart_own_failure(profile, tmp_path):
    marker = tmp_path / "marker"
    builder = ShellJob.get_builder()
    builder.command = orm.Str(f"if [ -e {marker} ]; then echo ok; else touch {marker}; exit 1; fi")
    wf = Restart.wrap(builder)
    out, node = engine.run_get_node(wf)
    print(node.exit_status, node.exit_message, node.get_attribute("attempts"))
    for log in node.logs:
        print(log.message)
    assert node.is_finished_ok
    assert out["stdout"].get_content() == b"ok\n"
