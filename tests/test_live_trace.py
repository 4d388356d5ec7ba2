"""The live trace of running jobs: read at each poll with every other job's reads, kept on
the node, and judged by monitors (``core.gpu_idle``, ``core.memory_ceiling``).

The jobs here write the sampler's two files themselves (a shell loop standing in for it), with
the computer's clock replaced by made-up times one second apart.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from veglia import engine, orm
from veglia.engine.calcjob.job_script import JobScriptWrap
from veglia.engine.calcjob.live_trace import (
    MAX_POINTS,
    SERIES_FILE,
    SERIES_HEADER,
    JobLiveTrace,
    LiveTrace,
    TraceSample,
    downsample,
    parse_series,
)
from veglia.engine.calcjob.monitor_runner import MonitorRunner
from veglia.engine.metrics import METRICS
from veglia.engine.runner import get_runner
from veglia.entry_points import CalculationFactory, WorkflowFactory
from veglia.hookspecs import hookimpl
from veglia.monitors.gpu import gpu_idle
from veglia.monitors.memory import memory_ceiling
from veglia.orm import attributes as attr
from veglia.orm.loading import load_node
from veglia.plugin_manager import get_plugin_manager
from veglia.testing import FakeNode, FakeTransport

ShellJob = CalculationFactory("core.shell")
START = 1_700_000_000_000
WRAPS = [{"name": "test.sampler", "live_trace": True}]


def _line(i: int, gpu: float, rss: int) -> str:
    return f"{START + i * 1000} 1000 {rss} - {gpu} 2000 {gpu}"


def _sampler(gpu: list[float], rss: list[int], then: str = "sleep 60") -> str:
    """A command writing the sampler's files as it would, a sample every 0.15 s, then
    ``then``. The json's gpu.pct is the average since the start, as Fusion's."""
    steps = [f"echo '{SERIES_HEADER}' > {SERIES_FILE}"]
    for i, (g, r) in enumerate(zip(gpu, rss, strict=True)):
        blocks = {
            "proc": {"rss": r, "peak_rss": max(rss[: i + 1])},
            "gpu": {"name": "Tesla T4", "pct": sum(gpu[: i + 1]) / (i + 1)},
            "sampler": {"version": 1, "samples": i + 1, "updated": START + i * 1000},
        }
        steps += [
            f"echo '{_line(i, g, r)}' >> {SERIES_FILE}",
            f"echo '{json.dumps(blocks)}' > _veglia_trace.json.tmp",
            "mv -f _veglia_trace.json.tmp _veglia_trace.json",
            "sleep 0.15",
        ]
    return "; ".join([*steps, then])


class _Sampler:
    """A plugin whose wrap declares a live trace (the job's command writes it here)."""

    @hookimpl
    def job_script_wrap(self, node, computer):
        return JobScriptWrap(name="test.sampler", live_trace=True)


@pytest.fixture
def sampled(no_trace_sampler):
    """Every job is wrapped by a plugin that writes a live trace."""
    manager = get_plugin_manager()
    plugin = manager.register(_Sampler())
    yield
    manager.unregister(name=plugin)


def _run(command: str, monitors: dict, **options) -> orm.ProcessNode:
    """Run a job in this process until it ends."""
    builder = ShellJob.get_builder()
    builder.command = orm.Str(command)
    builder.monitors = monitors
    for key, value in options.items():
        setattr(builder.metadata.options, key, value)
    _, node = engine.run_get_node(builder)
    assert WRAPS[0] in node.get_attribute(attr.JOB_SCRIPT_WRAPS)
    return node


@pytest.fixture
def import_paths(sampled, monitor_import_paths):
    """Monitors by import path allowed, with tests/monitor_helpers importable."""


def test_a_running_job_s_trace_is_on_its_node_and_seen_by_its_monitors(import_paths):
    command = _sampler([50] * 12, [1000 + i for i in range(12)], then="sleep 10")
    monitors = {"seen": {"entry_point": "monitor_helpers:trace_seen", "kwargs": {"samples": 4}}}
    node = _run(command, monitors)
    assert node.exit_status == 150
    assert node.exit_message.startswith("Monitor seen stopped the job: saw samples at rss 1000")
    stored = load_node(node.pk).get_attribute(attr.TRACE_LIVE)  # written when it stopped
    series = stored["series"]
    assert len(series) >= 4
    assert [p[2] for p in series] == list(range(1000, 1000 + len(series)))  # none lost or twice
    assert stored["latest"]["gpu"]["name"] == "Tesla T4"
    assert stored["updated"] == series[-1][0]


def test_gpu_idle_stops_a_job_idle_for_the_last_samples_whatever_its_average(sampled):
    busy_then_idle = [100] * 12 + [0] * 3
    monitors = {"idle": {"entry_point": "core.gpu_idle", "kwargs": {"seconds": 2}}}
    node = _run(_sampler(busy_then_idle, [1000] * 15), monitors)
    assert node.exit_status == 150
    assert node.exit_message == (
        "Monitor idle stopped the job: GPU Tesla T4 idle: under 5% in all 3 samples of the "
        "last 2 s (at most 0%)"
    )
    # Fusion's figure, the average since the start, was still far above the threshold.
    assert load_node(node.pk).get_attribute(attr.TRACE_LIVE)["latest"]["gpu"]["pct"] == 80


def test_gpu_idle_leaves_a_busy_job_alone(sampled):
    monitors = {"idle": {"entry_point": "core.gpu_idle", "kwargs": {"seconds": 2}}}
    node = _run(_sampler([100, 0, 0, 90, 0, 0, 100, 0, 0, 80], [1000] * 10, "true"), monitors)
    assert node.is_finished_ok


def test_memory_ceiling_stops_a_job_near_its_memory_request_and_says_so(sampled):
    monitors = {"memory": {"entry_point": "core.memory_ceiling"}}
    rss = [100_000, 200_000, 300_000, 390_000]  # kB; 390 000 is 97.5 % of 400 000
    node = _run(_sampler([0] * 4, rss), monitors, max_memory_kb=400_000)
    assert node.exit_status == 150
    assert node.exit_message == (
        "Monitor memory stopped the job: the job's processes' rss reached 381 MiB, 98% of "
        "max_memory_kb (391 MiB; stopped at 95%)"
    )
    assert node.stopped_by_monitor["retrieve"] is True


def test_memory_ceiling_judges_the_job_cgroup_against_its_own_limit():
    def trace(scope: str) -> LiveTrace:
        cgroup = {"scope": scope, "memory_rss": 1000 << 20, "memory_limit": 1 << 30}
        return LiveTrace({"cgroup": cgroup, "proc": {"rss": 10}}, [TraceSample(START)])

    node = FakeNode(options={"max_memory_kb": 100})
    stop = memory_ceiling(node, None, trace=trace("job"))
    assert stop.message == (
        "the job's cgroup rss reached 1000 MiB, 98% of its cgroup's memory limit (1024 MiB; "
        "stopped at 95%)"
    )
    assert memory_ceiling(node, None, fraction=0.99, trace=trace("job")) is None
    # A shared cgroup (the direct scheduler's) is not the job's: its processes' rss counts.
    assert memory_ceiling(node, None, trace=trace("shared")) is None
    assert memory_ceiling(FakeNode(), None, trace=trace("shared")) is None  # no limit known


def test_called_directly_a_monitor_reads_the_trace_through_its_transport(tmp_path):
    lines = [_line(i, 0, 1000) for i in range(4)]
    (tmp_path / SERIES_FILE).write_text("\n".join([SERIES_HEADER, *lines]) + "\n")
    (tmp_path / "_veglia_trace.json").write_text(json.dumps({"gpu": {"name": "A100"}}))
    node = FakeNode({attr.JOB_SCRIPT_WRAPS: WRAPS}, remote_workdir=str(tmp_path))
    with FakeTransport(root=str(tmp_path)) as transport:
        stop = gpu_idle(node, transport, seconds=3)
        assert stop.message == (
            "GPU A100 idle: under 5% in all 4 samples of the last 3 s (at most 0%)"
        )
        assert gpu_idle(node, transport, seconds=4) is None  # the series reaches back 3 s


def test_many_jobs_one_read_per_cycle(profile, tmp_path):
    """Jobs with monitors and jobs without share one transport call for their traces and
    the watch_files monitors' files."""
    runner = get_runner()
    computer = runner.computers.by_label("localhost").computer
    watched = {
        "pattern": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.log", "pattern": "X"},
        },
        "idle": {"entry_point": "core.gpu_idle", "kwargs": {"seconds": 600}},
    }
    processes = []
    for i in range(12):
        inputs = {"command": orm.Str("true"), "metadata": {"computer": "localhost"}}
        if i % 2:
            inputs["monitors"] = watched
        process = runner.instantiate(ShellJob, inputs)
        workdir = tmp_path / f"job{i}"
        workdir.mkdir()
        (workdir / SERIES_FILE).write_text(f"{SERIES_HEADER}\n{_line(0, i, i)}\n")
        (workdir / "out.log").write_text("fine\n")
        process.node.set_attributes(
            {attr.REMOTE_WORKDIR: str(workdir), attr.JOB_SCRIPT_WRAPS: WRAPS}
        )
        processes.append(process)

    async def cycle():
        async def one(process):
            reads = process.runtime.live_trace.requests()
            if process.node.get_attribute(attr.MONITORS):
                async with runner.lease_transport(computer) as lease:
                    return await MonitorRunner(process).run_cycle(lease, reads)
            return await process.runtime.live_trace.refresh(reads)

        return await asyncio.gather(*(one(p) for p in processes))

    before = METRICS.file_reads
    assert runner.loop.run_until_complete(cycle()) == [None] * 12
    assert METRICS.file_reads == before + 1
    for i, process in enumerate(processes):
        assert process.runtime.live_trace.current().series == [
            TraceSample(START, 1000, i, None, i, 2000, i)
        ]


def test_downsampling_keeps_at_most_240_points_the_peaks_and_the_whole_run():
    samples = [TraceSample(START + i * 1000, 100, 1000, None, 50, 10, 5) for i in range(5000)]
    samples[17] = samples[17]._replace(rss=99_999, gpu_mem=4242, cpu=800)
    kept = downsample(samples)
    assert len(kept) <= MAX_POINTS
    assert kept[0].t == START and kept[-1] == samples[-1]  # the whole run, the last as is
    assert max(p.rss for p in kept) == 99_999 and max(p.gpu_mem for p in kept) == 4242
    assert max(p.cpu for p in kept) < 800  # rates are averaged
    assert kept[-MAX_POINTS // 4 :] == samples[-MAX_POINTS // 4 :]  # recent ones untouched


def test_bad_lines_are_dropped_and_counted():
    text = "\n".join(
        [SERIES_HEADER, _line(0, 1, 2), "12 x 3 4 5 6 7", "1 2 3", _line(1, 2, 3), "5 -1 - - - - -"]
    )
    samples, dropped = parse_series(text, at_start=True)
    assert [s.t for s in samples] == [START, START + 1000] and dropped == 3
    assert samples[0].mem is None
    assert parse_series("#veglia-trace-series 2 t a b\n1 2 3\n", at_start=True) == ([], 2)


def test_a_worker_restart_mid_job_loses_no_sample_and_repeats_none(profile, tmp_path):
    node = get_runner().instantiate(ShellJob, {"command": orm.Str("true")}).node
    node.set_attributes({attr.REMOTE_WORKDIR: str(tmp_path), attr.JOB_SCRIPT_WRAPS: WRAPS})
    series = tmp_path / SERIES_FILE
    series.write_text(SERIES_HEADER + "\n" + "".join(_line(i, 0, i) + "\n" for i in range(10)))

    def poll(trace):
        get_runner().loop.run_until_complete(trace.refresh(trace.requests()))

    computer = get_runner().computers.by_label("localhost").computer
    worker = JobLiveTrace(SimpleNamespace(node=node, computer=computer))
    poll(worker)  # the first poll writes at once
    with series.open("a") as out:
        out.write("".join(_line(i, 0, i) + "\n" for i in range(10, 15)) + _line(15, 0, 15)[:9])
    poll(worker)  # kept in this process only: written a minute later
    assert len(worker.current().series) == 15
    assert len(LiveTrace.of(load_node(node.pk)).series) == 10

    # The worker dies; another loads the job as the database has it, and polls.
    restarted = JobLiveTrace(SimpleNamespace(node=load_node(node.pk), computer=computer))
    with series.open("a") as out:
        out.write(_line(15, 0, 15)[9:] + "\n" + _line(16, 0, 16) + "\n")
    poll(restarted)
    assert [s.rss for s in LiveTrace.of(restarted.job.node).series] == list(range(17))


def test_the_restart_policy_gives_a_job_stopped_near_its_memory_limit_more(sampled, tmp_path):
    marker = tmp_path / "marker"
    sampler = _sampler([0] * 3, [100_000, 200_000, 390_000])
    builder = ShellJob.get_builder()
    builder.command = orm.Str(
        f"if [ -e {marker} ]; then echo ok; else touch {marker}; {sampler}; fi"
    )
    builder.metadata.options.max_memory_kb = 400_000
    builder.monitors = {"memory": {"entry_point": "core.memory_ceiling"}}
    _, node = engine.run_get_node(WorkflowFactory("core.restart").wrap(builder))
    assert node.is_finished_ok
    first, second = node.get_attribute(attr.ATTEMPTS)
    assert (
        first["reason"]
        == "was stopped near its memory limit (391 MB): resubmitting with 586 MB (×1.5)"
    )
    assert second["max_memory_kb"] == 600_064 and second["decision"] == "done"
