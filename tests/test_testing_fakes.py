"""veglia.testing's doubles do what docs/plugins.md ("Testing your plugin") promises: a
monitor runs against FakeTransport and FakeNode, and FakeScheduler's jobs are driven by the
test. tests/test_fake_computer.py runs a whole calc job on them through the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from veglia import MonitorFactory
from veglia.engine.calcjob.monitors import MonitorResult
from veglia.exceptions import (
    SchedulerSubmitError,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
)
from veglia.schedulers import JobFailure, JobState
from veglia.testing import Call, FakeCluster, FakeNode, FakeScheduler, FakeTransport

ROOT = Path(__file__).resolve().parent.parent


# -- FakeTransport --------------------------------------------------------------------------
def test_a_closed_fake_transport_refuses_calls_as_a_real_connection_does():
    transport = FakeTransport()
    with pytest.raises(TransportConnectionError, match="not open"):
        transport.listdir(".")
    with transport:
        assert transport.listdir(".") == []


def test_calls_are_recorded_outermost_only():
    with FakeTransport() as transport:
        (transport.root / "out").mkdir()
        (transport.root / "out" / "a.txt").write_text("a")
        transport.get_regular("out", transport.root / "copy")  # calls lstat, getfile...
        transport.exec_command("true", workdir="out")
    assert transport.calls == [
        Call("get_regular", ("out", transport.root / "copy")),
        Call("exec_command", ("true",), {"workdir": "out"}),
    ]
    assert transport.commands == ["true"]
    assert (transport.root / "copy" / "a.txt").read_text() == "a"


def test_commands_are_answered_or_run_in_the_sandbox():
    with FakeTransport() as transport:
        transport.respond(r"^squeue", (0, "42|RUNNING\n", ""))
        transport.respond(r"^echo", lambda command, workdir, stdin: (7, command[5:], "x"))
        assert transport.exec_command("squeue --me") == (0, "42|RUNNING\n", "")
        assert transport.exec_command("echo hi") == (7, "hi", "x")
        code, out, _ = transport.exec_command('pwd; printf "%s" "$HOME"')
        assert code == 0 and out == f"{transport.home()}\n{transport.home()}"
        with pytest.raises(TransportTimeoutError, match="timeout of 0.5"):
            transport.exec_command("sleep 10", timeout=0.5)
    with FakeTransport(shell=False) as strict, pytest.raises(TransportError, match="no answer"):
        strict.exec_command("rm -rf ~")


def test_file_methods_stay_in_the_sandbox():
    with FakeTransport() as transport:
        for call in (
            lambda: transport.read_bytes("/etc/hostname"),
            lambda: transport.write_bytes("../escape.txt", b"x"),
            lambda: transport.rmtree(str(transport.root)),
        ):
            with pytest.raises(TransportError):
                call()
        assert not (transport.root.parent / "escape.txt").exists()


def test_a_test_can_make_any_call_fail(tmp_path):
    with FakeTransport(root=str(tmp_path)) as transport:
        transport.write_bytes("in.txt", b"x")
        transport.fail("stat", times=2)
        assert not transport.exists("in.txt")  # exists calls stat: the failure reaches it
        with pytest.raises(TransportConnectionError, match="stat failed"):
            transport.stat("in.txt")
        assert transport.stat("in.txt").size == 1  # only twice
        transport.fail("read_bytes", TransportError("disk gone"))
        with pytest.raises(TransportError, match="disk gone"):
            transport.read_bytes("in.txt")
        with pytest.raises(ValueError, match="cannot fail 'teleport'"):
            transport.fail("teleport")


# -- monitors against the fakes -------------------------------------------------------------
def test_a_monitor_runs_against_the_fake_transport_and_node():
    monitor = MonitorFactory("core.file_pattern")
    node = FakeNode(options={"max_wallclock_seconds": 60})
    state: dict = {}
    with FakeTransport() as transport:
        log = transport.root / "out.log"
        assert monitor(node, transport, path="out.log", pattern="DIVERGED", state=state) is None
        log.write_text("step 1 ok\n")
        assert monitor(node, transport, path="out.log", pattern="DIVERGED", state=state) is None
        log.write_text("step 1 ok\nstep 2 DIVERGED\n")
        result = monitor(node, transport, path="out.log", pattern="DIVERGED", state=state)
    assert isinstance(result, MonitorResult) and "step 2 DIVERGED" in result.message
    # Only the new bytes are read, never the whole file again.
    reads = [call.args for call in transport.calls if call.name == "read_bytes"]
    assert reads == [(str(log), 0, 10), (str(log), 10, 16)]


def test_a_monitor_reads_the_nodes_job_info():
    monitor = MonitorFactory("core.walltime_guard")
    node = FakeNode(
        {"last_job_info": {"state": "running", "wallclock_seconds": 55}},
        options={"max_wallclock_seconds": 60},
    )
    with FakeTransport() as transport:
        result = monitor(node, transport)
    assert isinstance(result, MonitorResult) and result.retrieve and result.parse
    assert transport.calls == []  # it needs no file


# -- FakeScheduler --------------------------------------------------------------------------
def _submit(scheduler, transport, workdir, script):
    """Submitted as the engine submits: the scheduler's command, run in the work dir."""
    command = scheduler.submit_command(script)
    return scheduler.parse_submit_output(*transport.exec_command(command, workdir=workdir))


def test_the_test_drives_the_fake_schedulers_jobs():
    cluster = FakeCluster()
    scheduler = FakeScheduler(cluster)
    with FakeTransport() as transport:
        transport.makedirs("job")
        transport.write_bytes("job/run.sh", b"echo ran > out.txt; exit 3\n")
        workdir = transport.path("job")
        job_id = _submit(scheduler, transport, workdir, "run.sh")
        assert _submit(scheduler, transport, workdir, "run.sh") == job_id  # a replayed submit
        assert cluster.submitted == [job_id]
        assert scheduler.get_jobs(transport, [job_id])[job_id].state is JobState.QUEUED
        cluster.set_state(job_id, JobState.QUEUED_HELD, reason="JobHeldUser")
        info = scheduler.get_jobs(transport, [job_id])[job_id]
        assert (info.state, info.reason) == (JobState.QUEUED_HELD, "JobHeldUser")
        cluster.set_state(job_id, JobState.RUNNING, wallclock_seconds=30)
        assert scheduler.get_jobs(transport, [job_id])[job_id].wallclock_seconds == 30
        assert cluster.run(job_id, transport) == 3  # the script, for real
        assert transport.read_bytes("job/out.txt") == b"ran\n"
        info = scheduler.get_jobs(transport, [job_id])[job_id]
        assert (info.state, info.exit_code, info.failure) == (JobState.DONE, 3, None)
        cluster.forget(job_id)
        assert scheduler.get_jobs(transport, [job_id]) == {}

        second = _submit(scheduler, transport, transport.path("."), "other.sh")
        assert scheduler.kill(transport, second)
        info = scheduler.get_jobs(transport, [second])[second]
        assert (info.state, info.failure) == (JobState.DONE, JobFailure.CANCELLED)
        third = _submit(scheduler, transport, transport.path("job"), "third.sh")
        cluster.finish(third, exit_code=137, failure=JobFailure.OUT_OF_MEMORY)
        assert scheduler.get_jobs(transport, [third])[third].failure is JobFailure.OUT_OF_MEMORY

        cluster.refuse_next_submission("invalid partition", permanent=True)
        with pytest.raises(SchedulerSubmitError, match="invalid partition") as caught:
            _submit(scheduler, transport, transport.path("."), "x.sh")
        assert caught.value.permanent
    assert all(command.startswith("printf ") for command in transport.commands[:4])


def test_fake_schedulers_share_the_class_cluster_unless_given_one():
    assert FakeScheduler().cluster is FakeScheduler().cluster is FakeScheduler.cluster
    own = FakeCluster()
    assert FakeScheduler(own).cluster is own


def test_a_fake_node_gives_copies_as_a_stored_node_does_and_keeps_logs():
    node = FakeNode({"last_job_info": {"state": "queued"}}, job_id="7")
    node.get_attribute("last_job_info")["state"] = "done"  # a copy: the node is unchanged
    assert node.get_attribute("last_job_info") == {"state": "queued"}
    node.add_log("REPORT", "queued for long")
    assert node.logs == [("REPORT", "queued for long")]
    assert (node.job_id, node.options, node.remote_workdir) == ("7", {}, None)


def test_the_fake_node_reads_what_the_built_in_monitors_read():
    """Every ``node.<name>`` a built-in monitor uses is there on FakeNode, as on the node."""
    import re

    from veglia.orm.process_nodes import CalcJobNode

    used = set()
    for folder in ("monitors", "plugins/fusion"):
        for path in (ROOT / folder).rglob("*.py"):
            used |= set(re.findall(r"\bnode\.([a-z_]+)", path.read_text()))
    for name in sorted(used):
        assert hasattr(CalcJobNode, name), name
        assert hasattr(FakeNode, name), f"FakeNode lacks {name}, which monitors read"
