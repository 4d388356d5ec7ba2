"""The services `scripts/services` starts are real: SLURM runs a job submitted over SSH."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# sinfo %T states of a node slurmd serves (a "*" suffix would mean it does not answer).
SERVED_NODE_STATES = {"idle", "mixed", "allocated", "completing"}


def test_sinfo_shows_both_partitions(slurm):
    result = subprocess.run(
        ["sinfo", "-h", "-o", "%P %a %l"], capture_output=True, text=True, check=True
    )
    lines = result.stdout.split("\n")
    assert any(line.startswith("short* up 1:00") for line in lines), result.stdout
    assert any(line.startswith("long up 1:00:00") for line in lines), result.stdout


def test_job_submitted_over_ssh_runs_as_the_ssh_user(slurm, ssh_transport, services_env):
    workdir = f"{services_env['SSH_USER_HOME']}/slurm-{uuid.uuid4().hex[:8]}"
    ssh_transport.makedirs(workdir)
    ssh_transport.write_bytes(f"{workdir}/job.sh", b"#!/bin/bash\nid -un > who.txt\n")
    code, out, err = ssh_transport.exec_command(
        "sbatch --parsable -p short --time=1 --mem=50M -o out.txt job.sh", workdir=workdir
    )
    assert code == 0, err
    job_id = out.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _, state, _ = ssh_transport.exec_command(f"scontrol show job {job_id}")
        if "JobState=COMPLETED" in state:
            break
        assert "JobState=FAILED" not in state, state
        time.sleep(0.5)
    else:
        raise AssertionError(f"job {job_id} did not complete: {state}")
    assert (
        ssh_transport.read_bytes(f"{workdir}/who.txt").decode().strip()
        == (services_env["SSH_USER"])
    )
    ssh_transport.rmtree(workdir)


def test_services_restarts_slurmd_whose_pid_file_names_another_process(slurm):
    """A machine restarted without clearing /run keeps slurmd.pid, and the number in it
    may belong to another process by then. scripts/services once took that for a running
    slurmd and waited a minute for a node nobody served ("idle*"); it must start slurmd."""
    if os.geteuid() != 0:
        pytest.skip("scripts/services runs as root")
    pid_file = Path("/run/slurmd.pid")
    subprocess.run(["pkill", "-x", "slurmd"], check=False)
    deadline = time.monotonic() + 20
    while subprocess.run(["pgrep", "-x", "slurmd"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "slurmd did not stop on SIGTERM"
        time.sleep(0.2)
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        pid_file.write_text(f"{stranger.pid}\n")
        result = subprocess.run(
            ["bash", str(REPO / "scripts" / "services")],
            capture_output=True,
            text=True,
            env={**os.environ, "VEGLIA_SERVICES_WAIT": "30"},
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        started = next(line for line in result.stdout.splitlines() if "started:" in line)
        assert "slurmd" in started, result.stdout
        assert stranger.poll() is None, "scripts/services killed a process that is not slurmd"
        # The node is served once its state has no "*" (not responding) and is not down.
        # It may be "mixed" or "allocated": jobs of earlier tests outlive a slurmd restart,
        # since their slurmstepd keeps running.
        state = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, check=True
        ).stdout.split()[0]
        queue = subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout
        assert state in SERVED_NODE_STATES, f"node state {state!r}; queue:\n{queue}"
    finally:
        stranger.kill()
        stranger.wait()
