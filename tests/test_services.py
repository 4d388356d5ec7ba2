"""The services `scripts/services` starts are real: SLURM runs a job submitted over SSH."""

from __future__ import annotations

import subprocess
import time
import uuid


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
