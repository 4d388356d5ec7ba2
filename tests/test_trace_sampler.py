"""The ``core.trace`` sampler, run as a job script would run it: under bash, beside its
commands, with a recorded ``nvidia-smi`` on PATH (tests/data/nvidia-smi). No engine needed."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from veglia.engine.calcjob.job_script import wrap_commands
from veglia.plugins.trace.hooks import SAMPLER_FILE, job_script_wrap, parse_interval, sampler_text

DATA = Path(__file__).parent / "data" / "nvidia-smi"
#: The weights of the first samples at a 0.5 s interval: 0.25, 0.25 s, then 0.5 s each.
WEIGHTS = (250, 250, 500)


class Computer:
    """The two properties the wrap reads."""

    def __init__(self, **properties: Any) -> None:
        self.properties = {"trace": True, "trace_interval": 0.5, **properties}

    def get_property(self, name: str) -> Any:
        return self.properties[name]


def half_up(value: float) -> int:
    return math.floor(value + 0.5)


def job_script(commands: list[str], prepend: str = "", **properties: Any) -> str:
    wrap = job_script_wrap(node=None, computer=Computer(**properties))
    return "\n".join(["#!/bin/bash", prepend, *wrap_commands(commands, [wrap]), ""])


def write_job(folder: Path, script: str) -> None:
    """The job script and, beside it, the sampler it sources (as the upload puts it)."""
    (folder / "job.sh").write_text(script)
    (folder / SAMPLER_FILE).write_text(sampler_text())


def job_env(tmp_path: Path, scenario: str | None = None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "CUDA_", "PBS_", "LSB_", "GPU_DEVICE")) and k != "JOB_ID"
    }
    if scenario:
        env["PATH"] = f"{DATA}:{env['PATH']}"
        env["VEGLIA_FAKE_NVSMI_SCENARIO"] = str(DATA / scenario)
        env["VEGLIA_FAKE_NVSMI_STATE"] = str(tmp_path / "nvsmi-calls")
    return {**env, **extra}


def run_job(tmp_path: Path, script: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    write_job(tmp_path, script)
    subprocess.run(
        ["bash", "job.sh"], cwd=tmp_path, env=env or job_env(tmp_path), check=True, timeout=60
    )
    return json.loads((tmp_path / "_veglia_trace.json").read_text())


def wait_for_calls(count: int) -> str:
    """A job command that ends once nvidia-smi was called ``count`` times."""
    return (
        'bash -c \'for i in $(seq 400); do read -r n < "$VEGLIA_FAKE_NVSMI_STATE" && '
        f"((n >= {count})) && exit 0; sleep 0.05; done; exit 1' 2>/dev/null"
    )


def gpu_of(tmp_path: Path, scenario: str, calls: int, **env: str) -> dict[str, Any]:
    trace = run_job(
        tmp_path, job_script([wait_for_calls(calls)]), job_env(tmp_path, scenario, **env)
    )
    assert trace["sampler"]["final"] is True
    shown = json.dumps(trace.get("gpu", {}))
    assert "N/A" not in shown and "Supported" not in shown and "Error" not in shown
    return trace["gpu"]


def weighted(values: list[float], weights: tuple[int, ...] = WEIGHTS) -> float:
    return sum(v * w for v, w in zip(values, weights, strict=False)) / sum(weights[: len(values)])


def test_gpu_block_of_a_t4(tmp_path: Path) -> None:
    gpu = gpu_of(tmp_path, "t4", 3)
    # Recorded: util 0, 75, 100; memory.used 2, 6161, 11388 MiB; bandwidth 0, 43, 83.
    avg_mem = weighted([2, 6161, 11388])  # (500 + 1540250 + 5694000) / 1000 = 7234.75
    assert gpu == {
        "name": "Tesla T4",
        "mem": 15360,
        "driver": "580.126.09",
        "active_time": 250 + 500,  # the samples with util > 0
        "pct": half_up(weighted([0, 75, 100])),  # 68.75 -> 69
        "peak": 100,
        "pct_mem": pytest.approx(avg_mem / 15360 * 100, abs=1e-3),
        "peak_mem": pytest.approx(11388 / 15360 * 100, abs=1e-4),
        "avg_mem": half_up(avg_mem),
        "peak_mem_used": 11388,
        "avg_mem_bw_util": half_up(weighted([0, 43, 83])),  # 52.25 -> 52
        "peak_mem_bw_util": 83,
        "scope": "node",
    }


def test_gpu_block_of_two_a100s_is_their_mean_and_sum(tmp_path: Path) -> None:
    gpu = gpu_of(tmp_path, "a100x2", 3, CUDA_VISIBLE_DEVICES="0,1")
    # Per sample: util the mean of the devices, memory the sum.
    util = [(0 + 0) / 2, (90 + 60) / 2, (100 + 0) / 2]
    used = [4 + 4, 30000 + 20000, 38000 + 20000]
    bw = [(0 + 0) / 2, (40 + 20) / 2, (70 + 0) / 2]
    devices = gpu.pop("devices")
    assert gpu == {
        "name": "NVIDIA A100-SXM4-40GB",
        "mem": 2 * 40960,
        "driver": "535.183.01",
        "active_time": 750,
        "pct": half_up(weighted(util)),  # 43.75 -> 44
        "peak": 75,
        "pct_mem": pytest.approx(weighted(used) / 81920 * 100, abs=1e-3),
        "peak_mem": pytest.approx(58000 / 81920 * 100, abs=1e-4),
        "avg_mem": half_up(weighted(used)),
        "peak_mem_used": 58000,
        "avg_mem_bw_util": half_up(weighted(bw)),
        "peak_mem_bw_util": 35,
        "scope": "job",  # from CUDA_VISIBLE_DEVICES
    }
    assert [(d["index"], d["uuid"][:12]) for d in devices] == [
        (0, "GPU-6a3b1c2d"),
        (1, "GPU-7b4c2d3e"),
    ]
    assert devices[0]["pct"] == half_up(weighted([0, 90, 100]))  # 72.5 -> 73
    assert devices[1]["pct"] == half_up(weighted([0, 60, 0])) == 15
    assert devices[1]["active_time"] == 250
    assert devices[1]["avg_mem"] == 15001  # (4*250 + 20000*250 + 20000*500) / 1000


def test_gpu_block_of_an_h100_on_the_devices_slurm_gave(tmp_path: Path) -> None:
    gpu = gpu_of(tmp_path, "h100", 3, SLURM_JOB_GPUS="0")
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["pct"] == half_up(weighted([35, 99, 98])) == 83  # 82.5 rounds up
    assert gpu["avg_mem"] == half_up(weighted([20480, 70001, 69999]))  # 57619.75
    assert gpu["peak_mem_used"] == 70001
    assert gpu["avg_mem_bw_util"] == half_up(weighted([12, 61, 58])) == 47
    assert gpu["scope"] == "job"


def test_unknown_gpu_values_are_left_out_never_zero(tmp_path: Path) -> None:
    gpu = gpu_of(tmp_path, "na", 2)
    gb10, gtx650 = gpu.pop("devices")
    # The GB10 reports no memory ([N/A]): no memory figure for the pair either.
    assert gpu == {
        "name": "NVIDIA GB10, NVIDIA GeForce GTX 650",
        "driver": "580.95.05",
        "active_time": 500,
        "pct": 60,  # the GB10's 40 and 80; the GTX 650's utilisation is [Not Supported]
        "peak": 80,
        "scope": "node",
    }
    assert set(gb10) == {"index", "uuid", "name", "active_time", "pct", "peak"}
    assert gtx650 == {
        "index": 1,
        "uuid": "GPU-be7f5061-5555-4c93-adef-4a5b6c7d8e9f",
        "name": "NVIDIA GeForce GTX 650",
        "mem": 1024,
        "pct_mem": pytest.approx(400 / 1024 * 100, abs=1e-3),
        "peak_mem": pytest.approx(500 / 1024 * 100, abs=1e-4),
        "avg_mem": 400,
        "peak_mem_used": 500,
    }


def test_a_driver_error_keeps_what_was_gathered(tmp_path: Path) -> None:
    gpu = gpu_of(tmp_path, "driver-error", 4)
    # Calls 3 and 4 print the driver's error and exit 9: only the first two count.
    assert gpu["pct"] == 60 and gpu["peak"] == 70 and gpu["active_time"] == 500
    assert gpu["avg_mem"] == 5000 and gpu["peak_mem_used"] == 6000
    assert gpu["avg_mem_bw_util"] == 25
    series = (tmp_path / "_veglia_trace.series").read_text().splitlines()
    assert [line.split()[4] for line in series[1:5]] == ["50", "70", "-", "-"]


def test_no_gpu_block_when_the_job_has_no_gpu(tmp_path: Path) -> None:
    trace = run_job(
        tmp_path,
        job_script([wait_for_calls(1) + " || true", "sleep 0.6"]),
        job_env(tmp_path, "t4", CUDA_VISIBLE_DEVICES=""),
    )
    assert "gpu" not in trace
    assert not (tmp_path / "nvsmi-calls").exists()


def test_peak_rss_of_a_300_mb_allocation(tmp_path: Path) -> None:
    allocate = (
        "python3 -c 'import time; b = bytearray(300 * 1024 * 1024); "
        'b[::4096] = b"x" * len(b[::4096]); time.sleep(2)\''
    )
    proc = run_job(tmp_path, job_script([allocate]))["proc"]
    assert proc["peak_rss"] == pytest.approx(300 * 1024, rel=0.10)
    # The last reading while it ran: 300 MB, or what a sample caught as Python let it go
    # (the 2 s sleep ends on a sample's tick), never more than the peak.
    assert 0 < proc["rss"] <= proc["peak_rss"]
    assert proc["peak_vmem"] >= proc["peak_rss"]


def test_cpu_of_a_busy_loop_is_one_core(tmp_path: Path) -> None:
    spin = "python3 -c 'import time\nwhile time.process_time() < 2: pass'"
    proc = run_job(tmp_path, job_script([spin]))["proc"]
    # Percent of one core x10 over the run: 2 s of CPU in the run's time (near 1000 on an
    # idle machine; a busy one stretches the run, not the CPU time).
    assert proc["realtime"] >= 2000
    assert proc["pct_cpu"] == pytest.approx(2000 * 1000 / proc["realtime"], rel=0.1)
    assert proc["arch"].startswith("linux/") and proc["cpu_name"]
    assert proc["vol_ctxt"] + proc["inv_ctxt"] > 0


def test_series_lines_parse(tmp_path: Path) -> None:
    trace = run_job(tmp_path, job_script(["sleep 1.2"]), job_env(tmp_path, "t4"))
    header, *lines = (tmp_path / "_veglia_trace.series").read_text().splitlines()
    assert header == "#veglia-trace-series 1 t cpu rss mem gpu gpu_mem gpu_bw"
    # 0.25, 0.5, 1.0 s, then the final one.
    assert len(lines) >= 4 and len(lines) == trace["sampler"]["samples"]
    times = []
    for line in lines:
        fields = line.split()
        assert len(fields) == 7 and all(re.fullmatch(r"\d+|-", f) for f in fields), line
        times.append(int(fields[0]))
        assert fields[3] == "-"  # no job cgroup: its memory is not the job's
    assert times == sorted(times) and times[-1] == trace["sampler"]["updated"]
    assert lines[-1].split()[4:] == ["-", "-", "-"]  # the final sample reads no GPU


def start_job(tmp_path: Path, script: str) -> subprocess.Popen[bytes]:
    write_job(tmp_path, script)
    return subprocess.Popen(
        ["bash", "job.sh"], cwd=tmp_path, env=job_env(tmp_path), start_new_session=True
    )


def wait_for_samples(tmp_path: Path, count: int) -> None:
    trace = tmp_path / "_veglia_trace.json"
    for _ in range(400):
        # Renamed into place whole: never half written.
        if trace.exists() and json.loads(trace.read_text())["sampler"]["samples"] >= count:
            return
        subprocess.run(["sleep", "0.05"], check=True)
    raise AssertionError("the sampler wrote no samples")


def test_a_job_killed_with_sigkill_keeps_its_last_periodic_trace(tmp_path: Path) -> None:
    job = start_job(tmp_path, job_script(["sleep 30"]))
    wait_for_samples(tmp_path, 2)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=10)
    trace = json.loads((tmp_path / "_veglia_trace.json").read_text())
    assert trace["sampler"]["final"] is False and trace["sampler"]["samples"] >= 2
    assert trace["proc"]["realtime"] > 0


def test_term_makes_a_final_write(tmp_path: Path) -> None:
    job = start_job(tmp_path, job_script(["sleep 30"]))
    wait_for_samples(tmp_path, 2)
    # As a scheduler's cancel does: TERM to every process of the job.
    os.killpg(job.pid, signal.SIGTERM)
    assert job.wait(timeout=10) == 143
    trace = json.loads((tmp_path / "_veglia_trace.json").read_text())
    assert trace["sampler"]["final"] is True


def test_a_short_job_starts_no_program_for_its_trace(tmp_path: Path) -> None:
    if shutil.which("strace") is None:
        pytest.skip("no strace")
    write_job(tmp_path, job_script(["/bin/true"]))
    subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=execve", "-o", "execs", "bash", "job.sh"],
        cwd=tmp_path,
        env=job_env(tmp_path, "t4"),  # nvidia-smi on PATH: the final sample must not run it
        check=True,
        timeout=60,
    )
    programs = re.findall(r'execve\("([^"]+)".* = 0$', (tmp_path / "execs").read_text(), re.M)
    assert sorted(Path(p).name for p in programs) == ["bash", "true"]
    trace = json.loads((tmp_path / "_veglia_trace.json").read_text())
    assert trace["sampler"] == {**trace["sampler"], "final": True, "samples": 1}
    assert not (tmp_path / "_veglia_trace.series").exists()


def test_the_jobs_commands_do_not_hold_the_samplers_pipe(tmp_path: Path) -> None:
    # A daemon the job leaves behind (with /usr/bin/time in front of it, as core.time does)
    # must not keep the sampler waiting: the job ends when its commands do.
    script = job_script(["/usr/bin/time -o /dev/null sh -c 'sleep 30 & echo $! > daemon'"])
    trace = run_job(tmp_path, script)
    os.kill(int((tmp_path / "daemon").read_text()), signal.SIGKILL)
    assert trace["sampler"]["final"] is True
    assert trace["proc"]["realtime"] < 10000


def test_a_job_that_removes_the_sampler_file_keeps_its_periodic_trace(tmp_path: Path) -> None:
    # What periodic samples need (the series, cgroups, GPUs) is read at the first of them,
    # from the file opened at the start: a job that cleans its folder first keeps it all.
    trace = run_job(tmp_path, job_script(["rm -f _veglia_trace.sh", "sleep 0.6"]))
    assert not (tmp_path / SAMPLER_FILE).exists()
    assert trace["sampler"]["final"] is True and trace["sampler"]["samples"] >= 3
    series = (tmp_path / "_veglia_trace.series").read_text().splitlines()
    assert len(series) == 1 + trace["sampler"]["samples"]


def test_cgroup_of_a_plain_job_is_shared(tmp_path: Path) -> None:
    # Past its first sample (0.25 s): a job that ends before it reads no shared cgroup.
    trace = run_job(tmp_path, job_script(["sleep 0.6"]))
    if "cgroup" not in trace:
        pytest.skip("no cgroup readable here")
    assert trace["cgroup"]["scope"] == "shared"
    assert trace["cgroup"]["version"] in ("v1", "v2")
    short = tmp_path / "short"
    short.mkdir()
    assert "cgroup" not in run_job(short, job_script(["true"]))  # the session's, not the job's


@pytest.fixture
def job_memory_cgroup() -> Any:
    """A v1 memory cgroup laid out as SLURM's: .../job_4242/step_batch/task_0, 1 GiB limit."""
    root = Path("/sys/fs/cgroup/memory")
    if not os.access(root, os.W_OK):
        pytest.skip("no writable v1 memory cgroup here")
    top = root / f"veglia-test-{uuid.uuid4().hex[:8]}"
    task = top / "job_4242" / "step_batch" / "task_0"
    task.mkdir(parents=True)
    (top / "job_4242" / "memory.limit_in_bytes").write_text(str(1 << 30))
    try:
        yield task
    finally:
        for folder in (task, task.parent, task.parent.parent, top):
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except OSError:  # its last process is still leaving
                    subprocess.run(["sleep", "0.05"], check=True)


def test_cgroup_of_a_job_in_its_own_cgroup(tmp_path: Path, job_memory_cgroup: Path) -> None:
    allocate = (
        "python3 -c 'import time; b = bytearray(200 * 1024 * 1024); "
        'b[::4096] = b"x" * len(b[::4096]); time.sleep(1.5)\''
    )
    script = job_script([allocate], prepend=f"echo $$ > {job_memory_cgroup}/cgroup.procs")
    trace = run_job(tmp_path, script, job_env(tmp_path, SLURM_JOB_ID="4242"))
    cgroup = trace["cgroup"]
    series = (tmp_path / "_veglia_trace.series").read_text()
    assert cgroup["version"] == "v1" and cgroup["scope"] == "job", series
    assert cgroup["memory_limit"] == 1 << 30  # set on job_4242, the job's own cgroup
    assert cgroup["memory_peak"] >= 200 * 1024 * 1024
    # memory.stat's figures lag (the kernel flushes them every 2 s or so): sampled, they
    # show some of the 200 MB, usage_in_bytes' peak all of it.
    assert 0 < cgroup["memory_peak_rss"] <= cgroup["memory_peak"], series
    # cpuacct is the machine's here ("/"), not the job's: left out.
    assert "cpu_usage_usec" not in cgroup
    lines = series.splitlines()[1:]
    assert max(int(line.split()[3]) for line in lines) == cgroup["memory_peak_rss"]


def test_trace_interval_must_be_positive() -> None:
    assert parse_interval("10") == 10 and parse_interval("0.5") == 0.5
    for bad in ("0", "-1", "soon", "nan"):
        with pytest.raises(ValueError, match="is not a number of seconds"):
            parse_interval(bad)


def test_no_wrap_when_trace_is_off() -> None:
    assert job_script_wrap(node=None, computer=Computer(trace=False)) is None


SAMPLER = Path(__file__).parent.parent / "plugins" / "trace" / "sampler.sh"


def cgroup_block(version: str, scope: str, dirs: dict[str, Path]) -> dict[str, Any]:
    """The sampler's cgroup block read from files laid out as a cgroup's."""
    assignments = " ".join(f"[{name}]={path}" for name, path in dirs.items())
    script = f"""
_veglia_trace_all=1 # both parts of the file: the cgroup's functions are in the second
source {SAMPLER}
declare -A _veglia_trace_cgdir=({assignments}) _veglia_trace_kvs _veglia_trace_psi
_veglia_trace_cgv={version} _veglia_trace_cgscope={scope} _veglia_trace_cg_peak_rss=0
_veglia_trace_cgroup
echo "{{${{_veglia_trace_buf#,}}}}"
"""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def write_files(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_cgroup_v2_files_in_fusions_fields(tmp_path: Path) -> None:
    pressure = "some avg10=0.00 avg60=0.00 avg300=0.00 total={}\nfull avg10=0.00 total={}\n"
    job = write_files(
        tmp_path,
        {
            "memory.current": "1000\n",
            "memory.peak": "5000\n",
            "memory.stat": "anon 300\nfile 10\n",
            "memory.max": "max\n",  # no limit: left out
            "memory.events": "low 0\noom 1\noom_kill 2\n",
            "cpu.stat": "usage_usec 900\nuser_usec 600\nsystem_usec 300\nnr_periods 4\n"
            "nr_throttled 3\nthrottled_usec 77\n",
            "cpu.max": "50000 100000\n",
            "io.stat": "8:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n"
            "259:0 rbytes=5 wbytes=6 rios=3 wios=4 dbytes=0 dios=0\n",
            "cpu.pressure": pressure.format(11, 12),
            "memory.pressure": pressure.format(21, 22),
            "io.pressure": pressure.format(31, 32),
        },
    )
    assert cgroup_block("v2", "job", {"unified": job}) == {
        "version": "v2",
        "scope": "job",
        "memory_current": 1000,
        "memory_peak": 5000,
        "memory_rss": 300,
        "memory_peak_rss": 300,
        "cpu_usage_usec": 900,
        "cpu_user_usec": 600,
        "cpu_system_usec": 300,
        "io_read_bytes": 15,
        "io_write_bytes": 26,
        "io_read_ops": 4,
        "io_write_ops": 6,
        "cpu_quota": 50000,
        "cpu_period": 100000,
        "memory_oom_kills": 2,
        "cpu_nr_throttled": 3,
        "cpu_throttled_usec": 77,
        "cpu_psi_some": 11,
        "cpu_psi_full": 12,
        "memory_psi_some": 21,
        "memory_psi_full": 22,
        "io_psi_some": 31,
        "io_psi_full": 32,
    }


def test_cgroup_v1_files_in_fusions_fields(tmp_path: Path) -> None:
    memory = write_files(
        tmp_path / "memory",
        {
            "memory.usage_in_bytes": "4096\n",
            "memory.max_usage_in_bytes": "8192\n",
            "memory.stat": "cache 1\nrss 5\ntotal_cache 10\ntotal_rss 2048\n",
            "memory.limit_in_bytes": "9223372036854771712\n",  # "unlimited": left out
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        },
    )
    cpuacct = write_files(
        tmp_path / "cpuacct",
        {"cpuacct.usage": "5000000\n", "cpuacct.stat": "user 300\nsystem 200\n"},
    )
    cpu = write_files(
        tmp_path / "cpu",
        {
            "cpu.cfs_quota_us": "-1\n",  # no quota: 0, as Fusion writes it
            "cpu.cfs_period_us": "100000\n",
            "cpu.stat": "nr_periods 9\nnr_throttled 2\nthrottled_time 5000\n",
        },
    )
    blkio = write_files(
        tmp_path / "blkio",
        {
            "blkio.throttle.io_service_bytes": "8:0 Read 100\n8:0 Write 50\n8:0 Sync 150\n"
            "8:0 Async 0\n8:0 Total 150\n8:16 Read 1\n8:16 Write 2\nTotal 153\n",
            "blkio.throttle.io_serviced": "8:0 Read 7\n8:0 Write 3\n8:0 Total 10\nTotal 10\n",
        },
    )
    dirs = {"memory": memory, "cpuacct": cpuacct, "cpu": cpu, "blkio": blkio}
    assert cgroup_block("v1", "job", dirs) == {
        "version": "v1",
        "scope": "job",
        "memory_current": 4096,
        "memory_peak": 8192,
        "cpu_usage_usec": 5000,  # ns / 1000
        "cpu_user_usec": 3000000,  # ticks of 10 ms
        "cpu_system_usec": 2000000,
        "io_read_bytes": 101,
        "io_write_bytes": 52,
        "io_read_ops": 7,
        "io_write_ops": 3,
        "memory_rss": 2048,
        "memory_peak_rss": 2048,
        "cpu_quota": 0,
        "cpu_period": 100000,
        "memory_oom_kills": 1,
        "cpu_nr_throttled": 2,
        "cpu_throttled_usec": 5,
    }
    # A controller whose cgroup is not the job's is not read at all.
    assert set(cgroup_block("v1", "job", {"memory": memory})) == {
        "version", "scope", "memory_current", "memory_peak", "memory_rss",
        "memory_peak_rss", "memory_oom_kills",
    }  # fmt: skip


def test_a_strict_job_script_keeps_its_exit_status(tmp_path: Path) -> None:
    # The job's own shell options (set -euo pipefail, -x) are not the sampler's.
    write_job(tmp_path, job_script(["sleep 0.6", "sh -c 'exit 3'"], prepend="set -euxo pipefail"))
    done = subprocess.run(["bash", "job.sh"], cwd=tmp_path, env=job_env(tmp_path), timeout=60)
    assert done.returncode == 3
    # `set -e` ends the script at the failing command: the wraps' `after` runs from the EXIT
    # trap, so the sampler has written its end when the script has.
    trace = json.loads((tmp_path / "_veglia_trace.json").read_text())
    assert trace["sampler"]["final"] is True and trace["sampler"]["samples"] >= 2
