"""The ``core.trace`` sampler on real jobs: the direct scheduler here, the real SLURM (each job
in its own memory cgroup) over SSH; what it measured reaches the node, right-sizing and Tower."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.engine.calcjob.history import similar_usage
from veglia.entry_points import CalculationFactory
from veglia.orm.attributes import SIMILARITY_KEY
from veglia_fixtures.fake_gpu import FAKE_NVSMI, replay_gpu
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")
MIB = 1024 * 1024
# 300 MiB, every page written (bytearray zero-fills what it allocates), held for 3 s.
HOLDS_300_MB = "python3 -c 'import time; x = bytearray(300 * 1024**2); time.sleep(3)'"
# Two seconds of one core's CPU time, however long a loaded machine takes to give them.
BUSY_2_S = "python3 -c 'import time\nwhile time.process_time() < 2: pass'"


def _trace(node) -> dict:
    extras = node.get_attribute("trace_record")["extras"]
    assert "trace" in extras, [log.message for log in node.logs]
    return extras["trace"]


def _within(value: float, target: float, share: float = 0.10) -> bool:
    return abs(value - target) <= share * target


def _run(command: str, computer: str, **options):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(command)
    builder.metadata.computer = computer
    for name, value in options.items():
        setattr(builder.metadata.options, name, value)
    return engine.run_get_node(builder)[1]


@pytest.fixture
def fast_localhost(profile):
    """The profile's localhost, sampling every half second."""
    computer = orm.load_computer("localhost")
    computer.properties["trace_interval"] = 0.5
    return computer.save()


# -- the direct scheduler: the job shares its cgroup with the user's session ----------------
def test_a_300_mb_job_on_the_direct_scheduler_shows_its_peak_and_a_shared_cgroup(
    fast_localhost,
):
    node = _run(HOLDS_300_MB, "localhost")
    assert node.is_finished_ok, node.exit_message
    trace = _trace(node)
    assert _within(trace["proc"]["peak_rss"] * 1024, 300 * MIB), trace["proc"]
    assert trace["sampler"]["final"] is True and trace["sampler"]["samples"] >= 3
    # The run's series, for plots: the 300 MB held shows in it.
    series = trace["series"]
    assert 3 <= len(series) <= 240 and series == sorted(series)
    assert _within(max(point[2] for point in series) * 1024, 300 * MIB), series
    cgroup = trace["cgroup"]
    # The direct scheduler makes no cgroup: the session's figures are never the job's.
    assert cgroup["scope"] == "shared", cgroup
    record = node.get_attribute("trace_record")
    assert record["measured_by"] == "time"  # /usr/bin/time's exact %M stands first
    assert trace["sources"]["proc"] == "trace"


def _one_busy_core(proc: dict) -> None:
    """pct_cpu (percent of one core x10 over the run) times the run: the job's 2 s of CPU,
    near 1000 on an idle machine, less on a loaded one, never more than one core."""
    assert proc["pct_cpu"] <= 1100, proc
    assert _within(proc["pct_cpu"] * proc["realtime"] / 1000, 2000, 0.15), proc


def test_a_cpu_bound_job_shows_one_busy_core(fast_localhost):
    node = _run(BUSY_2_S, "localhost")
    assert node.is_finished_ok, node.exit_message
    _one_busy_core(_trace(node)["proc"])


def test_without_usr_bin_time_right_sizing_takes_the_trace_s_peak(fast_localhost):
    fast_localhost.properties["measure_usage"] = False
    fast_localhost.save()
    node = _run(HOLDS_300_MB, "localhost")
    assert node.is_finished_ok, node.exit_message
    usage = node.get_attribute("usage")
    assert usage["source"] == "trace", usage
    assert _within(usage["peak_memory_kb"] * 1024, 300 * MIB), usage
    key = node.get_attribute(SIMILARITY_KEY)
    if key:  # what right-sizing reads for the next similar job
        assert any(u["source"] == "trace" for u in similar_usage(key))


# -- the real SLURM: each job in its own memory cgroup --------------------------------------
@pytest.fixture
def slurm_traced(profile, services_env, ssh_params, slurm_cgroup):
    return ssh_computer("slurm", services_env, ssh_params, "core.slurm", trace_interval=0.5)


@pytest.fixture
def slurm_cgroup(services_env):
    """SLURM puts each job in a memory cgroup of its own (VEGLIA_SLURM_MEM_ENFORCE=cgroup,
    what scripts/services sets where the machine allows it)."""
    if services_env.get("SLURM_MEM_ENFORCE") != "cgroup":
        message = (
            "SLURM does not put jobs in cgroups here (SLURM_MEM_ENFORCE="
            f"{services_env.get('SLURM_MEM_ENFORCE')}): run scripts/services where memory "
            "cgroups can be made"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.services
def test_a_300_mb_slurm_job_shows_its_peak_rss_and_its_own_cgroup_s_peak(slurm_traced):
    node = _run(HOLDS_300_MB, "slurm", max_memory_kb=1024 * 1024)
    assert node.is_finished_ok, node.exit_message
    trace = _trace(node)
    assert _within(trace["proc"]["peak_rss"] * 1024, 300 * MIB), trace["proc"]
    cgroup = trace["cgroup"]
    assert cgroup["scope"] == "job", cgroup
    assert cgroup["memory_limit"] == 1024 * MIB, cgroup
    assert _within(cgroup["memory_peak"], 300 * MIB), cgroup
    assert cgroup["memory_oom_kills"] == 0


@pytest.mark.services
def test_a_job_slurm_kills_for_memory_keeps_what_was_sampled(slurm_traced):
    node = _run(HOLDS_300_MB, "slurm", max_memory_kb=100 * 1024)
    assert not node.is_finished_ok
    trace = _trace(node)
    cgroup = trace["cgroup"]
    assert cgroup["scope"] == "job" and cgroup["memory_oom_kills"] >= 1, cgroup
    assert cgroup["memory_limit"] == 100 * MIB
    # The kernel killed the program at the limit: its peak is the limit, not 300 MB.
    assert _within(cgroup["memory_peak"], 100 * MIB), cgroup
    assert trace["sampler"]["final"] is True  # the job's shell outlived its program


@pytest.mark.services
def test_a_cpu_bound_slurm_job_shows_one_busy_core(slurm_traced):
    node = _run(BUSY_2_S, "slurm")
    assert node.is_finished_ok, node.exit_message
    _one_busy_core(_trace(node)["proc"])


# -- a live monitor on the real sampler --------------------------------------------------
def _t4_calls(folder: Path, utilisations: list[int]) -> Path:
    """A recorded T4 (tests/data/nvidia-smi/t4) whose utilisation goes as given, call by call."""
    line = (FAKE_NVSMI / "t4" / "2.csv").read_text().strip().split(", ")
    folder.mkdir()
    for call, pct in enumerate(utilisations, start=1):
        (folder / f"{call}.csv").write_text(", ".join([*line[:5], str(pct), *line[6:]]) + "\n")
    return folder


def test_gpu_idle_stops_a_job_whose_gpu_went_idle_though_its_average_is_high(
    fast_localhost, tmp_path
):
    # Busy at 90 % for the first eight samples, then idle: the monitor wants 3 idle samples
    # (1.5 s at 0.5 s), when the average since the start is still far above its 5 %.
    scenario = _t4_calls(tmp_path / "busy-then-idle", [90] * 8 + [0])
    replay_gpu(fast_localhost, scenario, tmp_path / "calls")
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 60")
    builder.monitors = {
        "idle": {"entry_point": "core.gpu_idle", "kwargs": {"threshold": 5, "seconds": 1.5}}
    }
    node = engine.run_get_node(builder)[1]
    stop = node.stopped_by_monitor
    assert stop and stop["name"] == "idle", node.exit_message
    assert "Tesla T4" in stop["message"], stop
    gpu = node.get_attribute("gpu_metrics")
    assert gpu["pct"] > 30, gpu  # the average since the start: still high when stopped
    assert stop["time"] - node.started_at < 40  # well before the job's own end
