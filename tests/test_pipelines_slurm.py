"""The restart policy, blocks and pipelines on the real single-node SLURM, over SSH."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory, WorkflowFactory
from veglia_fixtures.profiles import make_profile, wait_for
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")
RestartWorkChain = WorkflowFactory("core.restart")
TESTS = Path(__file__).parent


@pytest.fixture
def slurm_computer(profile, services_env, ssh_params, slurm):
    return ssh_computer("slurm", services_env, ssh_params, "core.slurm")


def _job(command: str, **options):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(command)
    builder.metadata.computer = "slurm"
    for name, value in options.items():
        builder.metadata.options[name] = value
    return builder


def test_a_memory_kill_is_resubmitted_with_more_memory_until_it_fits(slurm_computer, run_cli):
    # Held for 3 s: SLURM samples the job's memory every second.
    needs_280_mb = (
        "python3 -c 'import time; x = bytearray(280 * 1024**2); time.sleep(3); print(\"fits\")'"
    )
    builder = _job(needs_280_mb, max_memory_kb=100 * 1024, max_wallclock_seconds=60)
    outputs, node = engine.run_get_node(RestartWorkChain.wrap(builder))

    assert node.is_finished_ok, node.exit_message
    assert outputs["stdout"].get_content() == b"fits\n"
    attempts = node.get_attribute("attempts")
    assert [a["max_memory_kb"] // 1024 for a in attempts] == [100, 150, 225, 338]
    assert [a["exit_status"] for a in attempts] == [110, 110, 110, 0]
    assert len({a["job_id"] for a in attempts}) == 4
    report = run_cli("-p", "test", "process", "report", str(node.pk)).stdout
    assert report.count("was killed by the scheduler for memory") == 3
    assert "resubmitting with 150 MB (×1.5)" in report and "attempt 4 finished" in report
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    assert "Attempt" in shown and "338 MB" in shown
    # The finished job measured its own peak memory, for right-sizing later jobs.
    last = orm.load_node(attempts[-1]["pk"])
    assert 280 * 1024 < last.get_attribute("usage")["peak_memory_kb"] < 338 * 1024

    # The next such job asks at once for what this one finally needed.
    _, again = engine.run_get_node(RestartWorkChain.wrap(builder))
    assert again.is_finished_ok, again.exit_message
    assert [a["max_memory_kb"] // 1024 for a in again.get_attribute("attempts")] == [100, 338]
    assert "(the mean similar jobs needed)" in again.get_attribute("attempts")[0]["reason"]


def test_a_job_too_long_for_the_short_queue_runs_in_the_long_one(slurm_computer):
    # The first attempt outlives the short queue's minute and is killed for it; the attempt
    # in the long queue only has to finish (a second 95 s wait would prove nothing more).
    marker = f"$HOME/veglia-long-{uuid.uuid4().hex}"
    command = f"if [ -e {marker} ]; then rm {marker}; else touch {marker}; sleep 95; fi; echo done"
    builder = _job(command, queue_name="short", max_wallclock_seconds=60)
    outputs, node = engine.run_get_node(RestartWorkChain.wrap(builder))

    assert node.is_finished_ok, node.exit_message
    first, second = node.get_attribute("attempts")
    assert (first["queue"], first["exit_status"]) == ("short", 120)
    assert (second["queue"], second["max_wallclock_seconds"]) == ("long", 120)
    assert "moving from queue short to long" in first["reason"]
    assert outputs["stdout"].get_content() == b"done\n"


def test_a_job_that_cannot_start_in_its_queue_is_moved(slurm_computer):
    builder = _job("echo ran in $SLURM_JOB_PARTITION", queue_name="offline")
    outputs, node = engine.run_get_node(RestartWorkChain.wrap(builder))

    assert node.is_finished_ok, node.exit_message
    first, second = node.get_attribute("attempts")
    assert "PartitionDown" in first["reason"] and "moving it to queue short" in first["reason"]
    assert second["queue"] == "short"
    assert outputs["stdout"].get_content() == b"ran in short\n"


def test_a_job_that_stopped_itself_is_cancelled_and_resubmitted_once(
    profile, services_env, ssh_params, slurm
):
    """SLURM says it runs; it stopped itself with SIGSTOP (UC2 12g). core.unresponsive sees
    no CPU and no output in its live trace, the job is cancelled, and the restart policy
    submits it once more."""
    import subprocess

    ssh_computer("slurm", services_env, ssh_params, "core.slurm", trace_interval=1)
    marker = f"$HOME/veglia-hung-{uuid.uuid4().hex}"
    command = (
        f"if [ -e {marker} ]; then rm {marker}; echo done; exit 0; fi; touch {marker}; "
        "echo started; kill -STOP $$; echo resumed"
    )
    builder = _job(command, queue_name="long", max_wallclock_seconds=300)
    builder.monitors = {"hung": {"entry_point": "core.unresponsive", "kwargs": {"seconds": 4}}}
    outputs, node = engine.run_get_node(RestartWorkChain.wrap(builder))

    assert node.is_finished_ok, node.exit_message
    assert outputs["stdout"].get_content() == b"done\n"
    first, second = node.get_attribute("attempts")
    assert "stopped responding (not responding" in first["reason"]
    assert first["exit_status"] == 150 and second["decision"] == "done"
    # The stopped job is gone from SLURM, not left holding its CPU.
    listed = subprocess.run(
        ["squeue", "-h", "-j", str(first["job_id"])], capture_output=True, text=True
    )
    assert listed.stdout.strip() == ""


@pytest.fixture
def mailed_profile(veglia_home, smtp_server, services_env, ssh_params, slurm, monkeypatch):
    from veglia.engine.runner import set_runner

    monkeypatch.setenv("PYTHONPATH", str(TESTS))  # the daemon imports pipeline_workflows
    profile = make_profile(
        **{
            "notify.email": "ada@example.org",
            "notify.smtp_host": "127.0.0.1",
            "notify.smtp_port": str(smtp_server.port),
            "notify.from": "veglia@example.org",
        }
    )
    ssh_computer("slurm", services_env, ssh_params, "core.slurm")
    yield profile
    set_runner(None)


def _subjects(inbox, settle: float = 2.0) -> list[str]:
    time.sleep(settle)
    return [message["Subject"] for _, message in inbox.messages]


def test_a_three_step_pipeline_recovers_from_a_failure_and_mails_once(
    mailed_profile, smtp_server, daemon, run_cli
):
    from pipeline_workflows import ThreeSteps

    marker = f"$HOME/veglia-once-{uuid.uuid4().hex}"
    commands = [
        "echo one",
        f"if [ -e {marker} ]; then cat in.txt; echo two; else touch {marker}; exit 3; fi",
        "cat in.txt; echo three",
    ]
    daemon(1)
    node = engine.submit(
        ThreeSteps,
        commands=orm.List(commands),
        computer=orm.Str("slurm"),
        metadata={"label": "three steps"},
    )
    wait_for([node], lambda n: n.is_terminated, timeout=240)

    assert node.is_finished_ok, node.exit_message
    assert node.outputs.result.get_content() == b"one\ntwo\nthree\n"
    steps = node.called
    assert [s.label for s in steps] == ["step 1", "step 2", "step 3"]
    assert [len(s.called) for s in steps] == [1, 2, 1]  # step 2 ran twice
    assert steps[1].get_attribute("attempts")[0]["exit_status"] == 400
    listed = run_cli("-p", "test", "process", "list", "-a").stdout
    assert "└─ core.restart" in listed and "   └─ core.shell" in listed
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    assert "4 done, 0 running, 0 failed" not in shown  # steps are the 3 restart workflows
    assert "3 done, 0 running, 0 failed" in shown
    subjects = _subjects(smtp_server)
    assert subjects == [f"[veglia] pipeline three steps (process {node.pk}) finished"], subjects


def test_blocked_jobs_wait_for_the_fix_and_the_user_is_told_once(
    mailed_profile, smtp_server, daemon, run_cli
):
    daemon(1)
    nodes = [
        engine.submit(_job(f"echo {i}", queue_name="nosuch", max_wallclock_seconds=60))
        for i in range(2)
    ]
    wait_for(nodes, lambda n: bool(n.get_attribute("blocked")) and n.paused, timeout=60)
    assert "Invalid partition name" in nodes[0].get_attribute("blocked")["reason"]
    listed = run_cli("-p", "test", "process", "list").stdout
    assert listed.count("blocked: sbatch refused the job") == 2
    subjects = _subjects(smtp_server)
    assert len(subjects) == 1 and "jobs on slurm are blocked" in subjects[0], subjects

    result = run_cli("-p", "test", "process", "unblock", "--all", "--option", "queue_name=short")
    assert result.exit_code == 0, result.output
    wait_for(nodes, lambda n: n.is_terminated, timeout=120)
    assert all(n.is_finished_ok for n in nodes), [n.exit_message for n in nodes]
    assert all(n.get_attribute("blocked") is None for n in nodes)
    assert nodes[0].outputs.stdout.get_content() == b"0\n"
