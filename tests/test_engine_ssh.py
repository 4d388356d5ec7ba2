"""Calc jobs on the loopback SSH computer: through real SLURM, and through an sshd outage."""

from __future__ import annotations

import subprocess
import time

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import wait_for
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")


@pytest.fixture
def slurm_computer(broker_profile, services_env, ssh_params, slurm):
    return ssh_computer("slurm", services_env, ssh_params, "core.slurm")


def _squeue_lists(job_id: str) -> bool:
    result = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True)
    return job_id in result.stdout


def test_shell_job_through_ssh_and_slurm_with_the_daemon(slurm_computer, daemon):
    daemon(1)
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo $SLURM_JOB_ID > id.txt; hostname; echo done")
    builder.outputs = orm.List(["id.txt"])
    builder.metadata.computer = "slurm"
    builder.metadata.options.max_wallclock_seconds = 60
    builder.metadata.options.max_memory_kb = 100 * 1024
    node = engine.submit(builder)
    wait_for([node], lambda n: n.is_terminated, timeout=120)

    assert node.is_finished_ok, node.exit_message
    assert node.outputs.files__id_txt.get_content().decode().strip() == node.job_id
    assert node.outputs.stdout.get_content().decode().endswith("done\n")
    assert node.remote_workdir.startswith("/home/vegliatest/veglia-work/")
    assert not _squeue_lists(node.job_id)
    shown = subprocess.run(
        ["scontrol", "show", "job", node.job_id], capture_output=True, text=True
    ).stdout
    assert "JobState=COMPLETED" in shown and f"WorkDir={node.remote_workdir}" in shown


def test_slurm_memory_kill_is_reported(slurm_computer):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(
        "python3 -c 'import time; x = bytearray(300 * 1024**2); time.sleep(20)'"
    )
    builder.metadata.computer = "slurm"
    builder.metadata.options.max_memory_kb = 50 * 1024
    builder.metadata.options.max_wallclock_seconds = 60
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 110, node.exit_message
    assert node.get_attribute("job_outcome")["failure"] == "out_of_memory"


def test_rejected_submission_fails_the_job_with_sbatch_s_reason(slurm_computer):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("true")
    builder.metadata.computer = "slurm"
    builder.metadata.options.queue_name = "short"
    builder.metadata.options.max_wallclock_seconds = 600  # short allows 1 minute
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 140
    assert "time limit" in node.exit_message.lower()


def test_sshd_outage_pauses_jobs_and_they_go_on_by_themselves_when_it_is_back(
    broker_profile, private_sshd, daemon, run_cli
):
    private_sshd["computer"]("flaky")
    daemon(1)
    nodes = []
    for i in range(4):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"sleep 6; echo {i}")
        builder.metadata.computer = "flaky"
        nodes.append(engine.submit(builder))
    wait_for(nodes, lambda n: n.job_id is not None, timeout=60)

    private_sshd["stop"]()
    wait_for(nodes, lambda n: n.paused, timeout=90)
    for node in nodes:
        assert "failed on every attempt" in node.get_attribute("paused_reason")
        assert any("attempt 1/3 failed" in log.message for log in node.logs)
    listing = run_cli("-p", "test", "process", "list", "--raw")
    assert listing.exit_code == 0
    # A person pauses the last one too: it is theirs now, and stays paused.
    held = run_cli("-p", "test", "process", "pause", str(nodes[3].pk))
    assert held.exit_code == 0 and "now waits for `veglia process play`" in held.output

    time.sleep(7)  # the outage goes on: probes fail, nothing changes
    assert all(n.refresh().paused and not n.is_terminated for n in nodes)
    shown = run_cli("-p", "test", "process", "show", str(nodes[0].pk)).stdout
    assert "computer flaky unreachable since" in shown and "next probe at" in shown
    private_sshd["start"]()  # and no `veglia process play`
    wait_for(nodes[:3], lambda n: n.is_terminated, timeout=120)
    assert all(n.is_finished_ok for n in nodes[:3]), [n.exit_message for n in nodes]
    assert [n.outputs.stdout.get_content() for n in nodes[:3]] == [b"0\n", b"1\n", b"2\n"]
    assert nodes[3].refresh().paused and not nodes[3].is_terminated
    played = run_cli("-p", "test", "process", "play", str(nodes[3].pk))
    assert played.exit_code == 0, played.output
    wait_for(nodes[3:], lambda n: n.is_finished_ok, timeout=120)
