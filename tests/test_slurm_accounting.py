"""SLURM's accounting (sacct) on the real single-node SLURM with slurmdbd, over SSH: jobs that
SLURM forgot while the daemon was down, and the usage SLURM measured."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import wait_for
from veglia_fixtures.services import ssh_computer

pytestmark = pytest.mark.services
ShellJob = CalculationFactory("core.shell")

# 60 MiB held for 3 s: SLURM samples the job's memory every second (JobAcctGatherFrequency).
HOLDS_60_MB = "python3 -c 'import time; x = bytearray(60 * 1024**2); time.sleep(3)'"


@pytest.fixture
def accounted_computer(profile, services_env, ssh_params, slurm_accounting):
    # No /usr/bin/time in the job script: whatever usage is recorded comes from SLURM.
    return ssh_computer("slurm", services_env, ssh_params, "core.slurm", measure_usage=False)


def _forgotten(job_id: str) -> bool:
    result = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=60
    )
    return "Invalid job id specified" in result.stdout + result.stderr


def _wait_forgotten(job_ids: list[str], min_job_age: int) -> None:
    """Until slurmctld has forgotten every job: MinJobAge after its end, plus up to a
    minute (slurmctld purges old jobs once a minute, never during a backfill cycle)."""
    deadline = time.monotonic() + min_job_age + 150
    while not all(_forgotten(job_id) for job_id in job_ids):
        assert time.monotonic() < deadline, f"scontrol still knows {job_ids}"
        time.sleep(2)


def test_jobs_that_ended_while_the_daemon_was_down_end_from_sacct(
    accounted_computer, services_env, daemon, run_cli
):
    code = orm.Code("bash", accounted_computer, "/bin/bash", "core.shell").store()

    def job(command: str):
        builder = code.get_builder()
        builder.arguments = orm.List(["-c", command])
        builder.metadata.options.max_wallclock_seconds = 60
        return builder

    # The jobs wait for this file, so that they end only once the daemon is down.
    go = Path(services_env["SSH_USER_HOME"]) / f"veglia-go-{uuid.uuid4().hex}"
    wait = f"while [ ! -e {go} ]; do sleep 0.2; done; {HOLDS_60_MB}"
    daemon(1)
    nodes = [
        engine.submit(job(f"{wait}; echo failing >&2; exit 3")),
        engine.submit(job(f"{wait}; echo fine")),
    ]
    try:
        wait_for(nodes, lambda n: n.job_id is not None, timeout=120)
        stopped = run_cli("-p", "test", "daemon", "stop")
        assert stopped.exit_code == 0, stopped.output
        go.touch()
        # The jobs end without anyone watching, and SLURM's controller forgets them.
        _wait_forgotten([n.job_id for n in nodes], int(services_env["SLURM_MIN_JOB_AGE_S"]))
    finally:
        go.unlink(missing_ok=True)
    assert not any(n.refresh().is_terminated for n in nodes)

    daemon(1)
    wait_for(nodes, lambda n: n.is_terminated, timeout=120)
    failed, fine = nodes
    assert failed.exit_status == 400, failed.exit_message  # the command's exit 3
    assert failed.exit_message == "The command exited with status 3."
    assert failed.get_attribute("job_outcome")["exit_status"] == 3
    assert failed.outputs.stderr.get_content() == b"failing\n"
    # The last word on the job came from sacct: the controller had forgotten it. (The job
    # script records the command's status in a file and itself ends COMPLETED.)
    last = failed.get_attribute("last_job_info")
    assert (last["state"], last["raw_state"], last["usage"]["source"]) == (
        "done", "COMPLETED", "sacct",
    )  # fmt: skip
    assert fine.is_finished_ok, fine.exit_message
    assert fine.outputs.stdout.get_content() == b"fine\n"
    for node in nodes:
        usage = node.get_attribute("usage")
        assert usage["source"] == "sacct", usage
        assert 60 * 1024 <= usage["peak_memory_kb"] < 200 * 1024, usage
        assert 3 <= usage["runtime_seconds"] < 60, usage
        assert "time" not in node.get_attribute("trace_record")["extras"]  # no /usr/bin/time

    stats = run_cli("-p", "test", "code", "stats", code.full_label)
    assert stats.exit_code == 0, stats.output
    memory = next(line for line in stats.stdout.splitlines() if "peak memory (MB)" in line)
    assert "sacct" in memory, stats.stdout
    peak_mb = fine.get_attribute("usage")["peak_memory_kb"] / 1024
    assert f"{peak_mb:.1f}" in memory, stats.stdout
    shown = run_cli("-p", "test", "process", "show", str(fine.pk)).stdout
    assert "MB peak memory" in shown and "(from sacct)" in shown


def test_slurm_s_measure_wins_over_usr_bin_time_and_covers_memory_kills(
    profile, services_env, ssh_params, slurm_accounting
):
    ssh_computer("slurm", services_env, ssh_params, "core.slurm")  # with /usr/bin/time
    builder = ShellJob.get_builder()
    builder.command = orm.Str(HOLDS_60_MB)
    builder.metadata.computer = "slurm"
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    usage, timed = node.get_attribute("usage"), node.get_attribute("trace_record")["extras"]["time"]
    assert (usage["source"], timed["source"]) == ("sacct", "time")
    # The whole job as SLURM counts it (bash and all) holds at least the command's peak.
    assert usage["peak_memory_kb"] >= timed["peak_memory_kb"] >= 60 * 1024

    killed = ShellJob.get_builder()
    killed.command = orm.Str(
        "python3 -c 'import time; x = bytearray(300 * 1024**2); time.sleep(20)'"
    )
    killed.metadata.computer = "slurm"
    killed.metadata.options.max_memory_kb = 50 * 1024
    _, node = engine.run_get_node(killed)
    assert node.exit_status == 110, node.exit_message  # killed for memory
    # sacct has a MaxRSS for a memory-killed step only when the gatherer sampled it before
    # the kill (on a fresh machine it often has none): when it has one, it is what was used.
    # Without it: /usr/bin/time's figure where SLURM's memory cgroup had the kernel kill only
    # the program (jobacct kills time with it), else the trace sampler's.
    usage = node.get_attribute("usage")
    if usage is not None:
        assert usage["source"] in ("sacct", "time", "trace"), usage
        assert usage["peak_memory_kb"] > 40 * 1024, usage  # what it reached, near the limit
