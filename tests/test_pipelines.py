"""Workflows, the restart policy, right-sizing and verify --rerun on localhost (direct)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.engine.workflow.workchain import WorkChain
from veglia.entry_points import CalculationFactory, WorkflowFactory
from veglia.manage import get_storage
from veglia_fixtures.profiles import wait_for

ShellJob = CalculationFactory("core.shell")
RestartWorkChain = WorkflowFactory("core.restart")
TESTS = Path(__file__).parent


def test_a_workflow_runs_its_outline_and_links_its_steps(profile, workflows, run_cli):
    outputs, node = engine.run_get_node(
        workflows.CountedShell,
        command=orm.Str("echo hi"),
        times=orm.Int(2),
        extra=orm.Bool(True),
        metadata={"label": "counted"},
    )
    assert node.is_finished_ok, node.exit_message
    assert outputs["last"].get_content() == b"hi\nrun 3\n"
    children = node.called
    assert len(children) == 3 and all(c.caller == node for c in children)
    assert node.outputs.last == children[-1].outputs.stdout

    listed = run_cli("-p", "test", "process", "list", "-a").stdout.splitlines()
    at = next(i for i, line in enumerate(listed) if "CountedShell" in line)
    assert all("└─ core.shell" in line for line in listed[at + 1 : at + 4])
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    assert "3 done, 0 running, 0 failed" in shown


def test_a_step_may_not_hide_an_engine_method():
    with pytest.raises(TypeError, match="defines step, which the engine calls"):

        class Clash(WorkChain):
            def step(self):
                pass


def test_a_failing_step_ends_the_workflow_with_its_exit_code(profile, workflows):
    _, node = engine.run_get_node(
        workflows.CountedShell, command=orm.Str("exit 2"), times=orm.Int(1)
    )
    assert node.exit_status == 401 and node.exit_message == "A job failed."


def test_a_workflow_survives_a_killed_worker(profile, workflows, daemon):
    from veglia.engine.daemon import DaemonFiles

    daemon(1)
    node = engine.submit(workflows.CountedShell, command=orm.Str("sleep 1"), times=orm.Int(3))
    wait_for([node], lambda n: len(n.called) >= 1, timeout=60)
    os.kill(DaemonFiles(profile).read_status()["workers"][0]["pid"], signal.SIGKILL)
    wait_for([node], lambda n: n.is_terminated, timeout=120)
    assert node.is_finished_ok, node.exit_message
    children = node.called
    assert len(children) == 3 and all(c.is_finished_ok for c in children)


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_a_step_repeated_after_its_worker_died_reuses_the_job_it_submitted(
    with_broker, request, workflows, daemon, tmp_path
):
    request.getfixturevalue("broker_profile" if with_broker else "profile")
    daemon(1)
    tokens, died = tmp_path / "tokens", tmp_path / "died"
    node = engine.submit(
        workflows.DiesAfterSubmit,
        command=orm.Str(f"echo ran >> {tokens}"),
        marker=orm.Str(str(died)),
    )
    wait_for([node], lambda n: n.is_terminated, timeout=120)
    assert died.exists(), "the worker was to die in the step"
    assert node.is_finished_ok, node.exit_message
    assert len(node.called) == 1
    assert tokens.read_text() == "ran\n"


def test_workers_share_pipelines_and_a_kill_reaches_the_steps(
    broker_profile, workflows, daemon, run_cli
):
    daemon(2)
    slow = engine.submit(workflows.CountedShell, command=orm.Str("sleep 60"), times=orm.Int(1))
    wait_for([slow], lambda n: len(n.called) == 1, timeout=60)
    fast = engine.submit(workflows.CountedShell, command=orm.Str("echo"), times=orm.Int(3))
    wait_for([fast], lambda n: n.is_terminated, timeout=60)
    assert fast.is_finished_ok and not slow.refresh().is_terminated
    shown = run_cli("-p", "test", "process", "show", str(slow.pk)).stdout
    assert "0 done, 1 running, 0 failed" in shown
    # The fast pipeline and its steps are the history the estimate rests on.
    assert re.search(r"estimated time left .*(similar finished runs|finished steps like)", shown)
    listed = run_cli("-p", "test", "process", "list").stdout
    assert f"waiting for {slow.called[0].pk}" in listed

    result = run_cli("-p", "test", "process", "kill", str(slow.pk))
    assert result.exit_code == 0, result.output
    step = slow.called[0]
    wait_for([slow, step], lambda n: n.is_terminated, timeout=60)
    assert slow.is_killed and step.is_killed
    # The kill does not wait for the computer: the job's cancel follows at once, beside it.
    wait_for([step], lambda n: n.get_attribute("job_cancelled") is True, timeout=30)
    assert step.get_attribute("cancel_pending") is None


def _flaky(marker: Path) -> orm.Str:
    return orm.Str(f"if [ -e {marker} ]; then echo ok; else touch {marker}; exit 1; fi")


def test_the_restart_policy_resubmits_a_failed_job_once_unchanged(profile, tmp_path, run_cli):
    builder = ShellJob.get_builder()
    builder.command = _flaky(tmp_path / "marker")
    builder.metadata.options.max_wallclock_seconds = 30
    outputs, node = engine.run_get_node(RestartWorkChain.wrap(builder))

    assert node.is_finished_ok, node.exit_message
    assert outputs["stdout"].get_content() == b"ok\n"
    first, second = node.get_attribute("attempts")
    assert first["exit_status"] == 400 and "resubmitting unchanged" in first["reason"]
    assert second["max_wallclock_seconds"] == first["max_wallclock_seconds"] == 30
    shown = run_cli("-p", "test", "process", "show", str(second["pk"])).stdout
    assert f"attempt 2, after process {first['pk']} failed (The command exited" in shown
    report = run_cli("-p", "test", "process", "report", str(node.pk)).stdout
    assert "attempt 1 failed (The command exited with status 1.)" in report
    assert "attempt 2 finished" in report


def test_a_job_failing_twice_stops_or_is_ignored_as_declared(profile):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("exit 5")
    _, stopped = engine.run_get_node(RestartWorkChain.wrap(builder))
    assert stopped.exit_status == 403
    assert "The command exited with status 5." in stopped.exit_message
    assert len(stopped.called) == 2

    _, ignored = engine.run_get_node(RestartWorkChain.wrap(builder, failure_behaviour="ignore"))
    assert ignored.is_finished_ok and len(ignored.called) == 2
    assert "failure_behaviour is 'ignore'" in ignored.get_attribute("attempts")[-1]["reason"]

    _, limited = engine.run_get_node(RestartWorkChain.wrap(builder, max_attempts=1))
    assert limited.exit_status == 401 and len(limited.called) == 1
    last = limited.get_attribute("attempts")[-1]
    assert last["decision"] == "stop" and last["reason"].endswith("; no attempts left")
    assert any("; no attempts left" in log.message for log in limited.logs)
    assert any("failed again" in log.message and "stopping" in log.message for log in stopped.logs)


def test_bad_restart_inputs_are_refused_before_anything_runs(profile):
    from veglia.engine import InputValidationError

    builder = ShellJob.get_builder()
    builder.command = orm.Str("true")
    with pytest.raises(Exception, match="failure_behaviour must be one of stop, ignore"):
        engine.run(RestartWorkChain.wrap(builder, failure_behaviour="retry"))
    with pytest.raises(Exception, match="job: .*no_such_input"):
        engine.run(RestartWorkChain, process=orm.Str("core.shell"), job={"no_such_input": 1})
    with pytest.raises(InputValidationError):
        RestartWorkChain.get_builder().max_attempts = orm.Str("three")


def test_requests_are_right_sized_from_similar_jobs(no_trace_sampler, profile, run_cli):
    # Right-sizing lowers the request to ~3 MB, which the direct scheduler enforces with
    # `ulimit -v`: the job's shell barely starts there, with no room for the trace sampler.
    orm.Code("bash", orm.load_computer("localhost"), "/bin/bash", "core.shell").store()
    code = orm.load_code("bash@localhost")

    def job(memory_kb: int):
        builder = code.get_builder()
        builder.arguments = orm.List(["-c", "head -c 3000000 /dev/zero | tail -c 1 > /dev/null"])
        builder.metadata.options.max_memory_kb = memory_kb
        return engine.run_get_node(builder)[1]

    history = [job(1024 * 1024) for _ in range(3)]
    usage = [n.get_attribute("usage") for n in history]
    assert all(u["source"] == "time" and u["peak_memory_kb"] > 1000 for u in usage)

    warned = job(64 * 1024 * 1024)
    assert warned.options["max_memory_kb"] == 64 * 1024 * 1024
    assert any("over twice what 3 similar jobs needed" in log.message for log in warned.logs)

    run_cli("-p", "test", "config", "set", "resources.right_size", "lower")
    profile.options["resources.right_size"] = "lower"
    lowered = job(64 * 1024 * 1024)
    changed = lowered.get_attribute("right_sized")["max_memory_kb"]
    assert changed["from"] == 64 * 1024 * 1024 and changed["to"] < 64 * 1024
    assert lowered.options["max_memory_kb"] == changed["to"]
    shown = run_cli("-p", "test", "process", "show", str(lowered.pk)).stdout
    assert "MB peak memory" in shown and "(from time)" in shown
    assert f"max_memory_kb {64 * 1024 * 1024} -> {changed['to']}" in shown

    stats = run_cli("-p", "test", "code", "stats", "bash@localhost")
    assert stats.exit_code == 0, stats.output
    assert "peak memory (MB)" in stats.stdout and "core.shell" in stats.stdout
    none = run_cli("-p", "test", "code", "stats", "nosuch")
    assert none.exit_code != 0 and "No code is called 'nosuch'" in none.stderr


def test_right_sizing_says_what_similar_jobs_measured_not_its_floor(profile, run_cli):
    orm.Code("bash", orm.load_computer("localhost"), "/bin/bash", "core.shell").store()
    code = orm.load_code("bash@localhost")

    def job(seconds: int):
        builder = code.get_builder()
        builder.arguments = orm.List(["-c", "sleep 1"])
        builder.metadata.options.max_wallclock_seconds = seconds
        return engine.run_get_node(builder)[1]

    history = [job(600) for _ in range(3)]
    assert all(1 <= n.get_attribute("usage")["runtime_seconds"] < 5 for n in history)
    warned = job(3600)
    [message] = [log.message for log in warned.logs if "over twice" in log.message]
    assert re.search(r"3 similar jobs needed: [1-5] s \(mean \+ 1 SD", message), message
    assert "never sets less than 60 s" in message and "60 s that" not in message

    profile.options["resources.right_size"] = "lower"
    lowered = job(3600)
    assert lowered.options["max_wallclock_seconds"] == 60
    [message] = [log.message for log in lowered.logs if "right-sized" in log.message]
    assert re.search(r"from 3600 to 60: 4 similar jobs needed: [1-5] s", message), message


def test_shell_commands_are_similar_only_to_the_same_command(profile):
    def job(command: str) -> orm.CalcJobNode:
        builder = ShellJob.get_builder()
        builder.command = orm.Str(command)
        builder.metadata.options.max_memory_kb = 64 * 1024 * 1024  # far more than echo needs
        return engine.run_get_node(builder)[1]

    for _ in range(3):
        job("echo short")
    other = job("echo a different program")
    assert not [log.message for log in other.logs if "similar jobs" in log.message]
    again = job("echo short")
    assert any("over twice what 3 similar jobs needed" in log.message for log in again.logs)


def test_verify_reruns_only_the_step_behind_a_damaged_file(profile, workflows, run_cli):
    _, node = engine.run_get_node(
        workflows.CountedShell, command=orm.Str("echo data"), times=orm.Int(2)
    )
    _, second = node.called
    damaged = second.outputs.stdout
    record = damaged.list_objects()[0]
    blob = get_storage().repository.objects / record.sha256[:2] / record.sha256[2:]
    blob.write_bytes(b"tampered\n")

    refused = run_cli("-p", "test", "verify", str(node.pk), "--no-rerun")
    assert refused.exit_code == 1
    assert f"node {damaged.pk}: stdout now hashes to" in refused.stdout
    assert f"They were made by process {second.pk}." in refused.stdout

    fixed = run_cli("-p", "test", "verify", str(node.pk), "--rerun")
    assert fixed.exit_code == 0, fixed.output
    assert f"process {second.pk} ran again as process" in fixed.stdout
    assert damaged.get_content() == b"data\nrun 2\n"
    reruns = [n for n in _calcjobs() if n.get_attribute("rerun_of")]
    assert [n.get_attribute("rerun_of") for n in reruns] == [second.pk]
    assert run_cli("-p", "test", "verify", str(node.pk)).exit_code == 0


def _calcjobs():
    import sqlalchemy as sa

    from veglia.storage.models import Node

    with get_storage().session() as session:
        pks = session.scalars(sa.select(Node.id).where(Node.node_type == "process.calcjob"))
        return [orm.load_node(pk) for pk in pks.all()]


def test_unblock_says_what_is_wrong(profile, run_cli):
    _, node = engine.run_get_node(ShellJob, command=orm.Str("true"))
    result = run_cli("-p", "test", "process", "unblock", str(node.pk))
    assert result.exit_code == 1 and f"Process {node.pk} is not blocked" in result.output
    bad = run_cli("-p", "test", "process", "unblock", "--all", "--option", "colour=red")
    assert bad.exit_code == 2 and "NAME one of" in bad.output
    nothing = run_cli("-p", "test", "process", "unblock", "--all")
    assert nothing.exit_code == 0 and "No process is blocked" in nothing.output


def test_pending_monitor_reports_long_waits_and_stops_hopeless_jobs(slurm_profile_node):
    from veglia.monitors.pending import pending_too_long

    node = slurm_profile_node
    node.set_attributes(
        {
            "last_job_info": {"state": "queued", "reason": "Priority", "queue": "short"},
            "submitted_at": 0.0,
        }
    )
    state: dict = {}
    assert pending_too_long(node, None, min_wait=1, state=state) is None
    assert state == {"reported": True}
    assert any("the scheduler says: Priority" in log.message for log in node.logs)
    node.set_attribute("last_job_info", {"state": "queued", "reason": "PartitionTimeLimit"})
    result = pending_too_long(node, None, state=state)
    assert result is not None and "PartitionTimeLimit" in result.message


@pytest.fixture
def slurm_profile_node(profile):
    """A stored calc job node on a SLURM computer (which is never contacted)."""
    orm.Computer("cluster", "nowhere.invalid", "core.ssh", "core.slurm").store()
    node = orm.CalcJobNode(process_type="core.shell")
    node.store()
    node.set_attributes({"computer": "cluster", "similarity_key": "x"})
    return node


def test_a_restart_that_gives_up_tells_the_user_once(veglia_home, smtp_server):
    from veglia.engine.runner import set_runner
    from veglia_fixtures.profiles import make_profile

    make_profile(
        **{
            "notify.email": "ada@example.org",
            "notify.smtp_host": "127.0.0.1",
            "notify.smtp_port": str(smtp_server.port),
            "notify.from": "veglia@example.org",
        }
    )
    try:
        builder = ShellJob.get_builder()
        builder.command = orm.Str("exit 7")
        _, node = engine.run_get_node(RestartWorkChain.wrap(builder))
    finally:
        set_runner(None)
    assert node.exit_status == 403
    deadline = time.monotonic() + 10
    while not smtp_server.messages and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # time for a second message, which must not come
    subjects = sorted(  # long subjects are folded onto two header lines
        re.sub(r"\r?\n", "", message["Subject"]) for _, message in smtp_server.messages
    )
    assert subjects == [  # and no "pipeline finished": it wraps a single job
        f"[veglia] process {node.pk} gave up: The job failed on its own again: The command "
        "exited with status 7.",
    ], subjects
