"""`veglia process show` shows a job's trace (GPU / CPU / memory), finished, cached or running.

The plugins load as a user's would, through ``veglia.plugins`` entry points: a package on
PYTHONPATH (here and in the CLI's process) declares the table's module and a
``collect_trace`` plugin that puts a recorded sampler trace on each job's record, as the
sampler's plugin does once a job has ended.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import wait_for

#: What the sampler of a job on two A100s left, as the trace plugin keeps it on the record.
RECORDED_TRACE = {
    "proc": {
        "realtime": 480_000, "pct_cpu": 3875, "cpu_name": "AMD EPYC 7763", "arch": "x86_64",
        "rss": 1_258_291, "peak_rss": 2_097_152, "vmem": 9_437_184, "peak_vmem": 10_485_760,
    },
    "cgroup": {
        "version": "v2", "scope": "job", "memory_peak": 3 * 2**30, "memory_limit": 8 * 2**30,
        "memory_oom_kills": 0, "cpu_usage_usec": 1_860_000_000,
    },
    "sampler": {
        "version": 1, "interval": 10, "samples": 53, "start": 1_760_000_000_000,
        "updated": 1_760_000_480_000, "final": True,
    },
    "sources": {"gpu": "trace"},
    "series": [
        [1_760_000_000_000 + 10_000 * i, 3900 if i > 3 else 400 * i, 1_000_000 + 20_000 * i,
         None, 90 if i % 8 else 10, 30_000 + 500 * i, 40]
        for i in range(48)
    ],
}  # fmt: skip
RECORDED_GPU = {
    "name": "NVIDIA A100-SXM4-80GB", "mem": 163_840, "driver": "535.104.05",
    "active_time": 430_000, "pct": 81, "peak": 100, "pct_mem": 33.2, "peak_mem": 33.5,
    "avg_mem": 54_400, "peak_mem_used": 54_900, "avg_mem_bw_util": 40, "peak_mem_bw_util": 62,
    "scope": "job",
    "devices": [
        {"index": 0, "uuid": "GPU-1", "name": "NVIDIA A100-SXM4-80GB"},
        {"index": 1, "uuid": "GPU-2", "name": "NVIDIA A100-SXM4-80GB"},
    ],
}  # fmt: skip

RECORDER = f"""
from veglia.hookspecs import hookimpl

TRACE = {RECORDED_TRACE!r}
GPU = {RECORDED_GPU!r}


@hookimpl
def collect_trace(node, transport, record):
    if transport is not None:  # the job ran (a cached job's work dir is not read)
        record.extras["trace"] = TRACE
        record.gpu_metrics = GPU
"""

ENTRY_POINTS = """[veglia.plugins]
test.recorded_trace = trace_recorder
test.trace_show = veglia.plugins.trace.show
"""

ENGINE_SCRIPT = """
import sys
import veglia
from veglia import engine, orm
from veglia.entry_points import CalculationFactory

veglia.load_profile("test")
builder = CalculationFactory("core.shell").get_builder()
builder.command = orm.Str("sleep 600")
builder.metadata.label = "held"
engine.run_get_node(builder)
"""


@pytest.fixture
def trace_plugins(tmp_path, monkeypatch, no_trace_sampler):
    """The table's plugin and a recorded trace's, installed for this test and its CLI."""
    from veglia.plugin_manager import reset_plugin_manager

    folder = tmp_path / "plugins"
    info = folder / "veglia_test_trace_show-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: veglia-test-trace-show\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (folder / "trace_recorder.py").write_text(RECORDER)
    monkeypatch.syspath_prepend(str(folder))
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    reset_plugin_manager()
    yield
    reset_plugin_manager()


def _shell_job(cache: bool = False):
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("echo traced")
    builder.metadata.cache = cache
    return engine.run_get_node(builder)[1]


def _table(run_cli, pk: int) -> dict[str, str]:
    """The trace table's rows by name (name, then the rest of the line), and its title."""
    result = run_cli("-p", "test", "process", "show", str(pk))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if "GPU / CPU / memory" in line), None)
    if start is None:
        return {}
    rows = {"": lines[start]}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        name, _, rest = line.partition("  ")
        rows[name.strip()] = rest.strip()
    return rows


def test_a_finished_job_shows_its_trace_in_human_units(profile, trace_plugins, run_cli):
    node = _shell_job()
    assert node.is_finished_ok
    rows = _table(run_cli, node.pk)
    assert rows, "no trace table"
    assert rows["trace"].startswith("final, 53 samples, every 10 s")
    # 387.5% of one core for 8 minutes: 31 min of CPU time.
    assert re.match(r"388% of one core on average, 31 min 0 s cpu time in 8 min 0 s", rows["CPU"])
    assert "AMD EPYC 7763" in rows["CPU"] and rows["CPU"].endswith("trace")
    assert re.match(
        r"peak RSS 2\.0 GiB, last RSS 1\.2 GiB\s+[▁▂▃▄▅▆▇█]{32}\s+trace", rows["memory"]
    )
    assert rows["cgroup"].startswith("the job's own cgroup v2: memory peak 3.0 GiB of 8.0 GiB")
    assert rows["GPU"].startswith("NVIDIA A100-SXM4-80GB x 2, driver 535.104.05")
    assert re.match(
        r"avg 81%, peak 100%, active 7 min 10 s\s+[▁▂▃▄▅▆▇█]{32}\s+trace", rows["GPU use"]
    )
    assert rows["GPU memory"].startswith("avg 53.1 GiB (33%), peak 53.6 GiB (34%) of 160.0 GiB")
    # The CPU's sparkline climbs over the first samples, then stays at the top.
    spark = re.search(r"[▁▂▃▄▅▆▇█]{32}", rows["CPU"])
    assert spark and spark.group()[0] == "▁" and spark.group()[-1] == "█"


def test_a_job_without_a_trace_adds_no_table(no_trace_sampler, run_cli, monkeypatch, tmp_path):
    from veglia.plugin_manager import reset_plugin_manager

    info = tmp_path / "only-show" / "veglia_test_trace_show-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: veglia-test-trace-show\n")
    (info / "entry_points.txt").write_text("[veglia.plugins]\nt = veglia.plugins.trace.show\n")
    monkeypatch.setenv("PYTHONPATH", str(info.parent))
    reset_plugin_manager()
    node = _shell_job()
    assert node.is_finished_ok
    assert _table(run_cli, node.pk) == {}


def test_a_cached_job_shows_the_original_runs_trace(profile, trace_plugins, run_cli):
    original = _shell_job()
    cached = _shell_job(cache=True)
    assert cached.get_attribute("cached_from") == {"pk": original.pk, "uuid": original.uuid}
    assert cached.job_id is None  # not run: its trace is the original's
    first, second = _table(run_cli, original.pk), _table(run_cli, cached.pk)
    assert second["GPU"] == first["GPU"] and second["GPU use"] == first["GPU use"]
    assert second["CPU"] == first["CPU"] and second["memory"] == first["memory"]
    record = cached.get_attribute("trace_record")
    assert record["status"] == "CACHED" and record["task_id"] == cached.pk


def test_a_fusion_job_shows_fusions_blocks_where_the_sampler_has_none(
    profile, trace_plugins, run_cli
):
    # What the Fusion plugin leaves of a job on a shared cgroup, and no sampler's trace.
    node = _shell_job()
    record = node.get_attribute("trace_record")
    proc = {"realtime": 60_000, "pct_cpu": 995, "peak_rss": 524_288, "rss": 400_000}
    fusion = {"proc": proc, "cgroup": {"version": "v1", "scope": "shared"}}
    record["extras"] = {"fusion": fusion}
    gpu = {"name": "NVIDIA L4", "mem": 23_034, "pct": 12.5, "peak": 60, "avg_mem": 900}
    node.set_attributes({"trace_record": record, "gpu_metrics": gpu})
    rows = _table(run_cli, node.pk)
    assert re.match(r"100% of one core on average, 1 min 0 s cpu time in 1 min 0 s", rows["CPU"])
    assert rows["CPU"].endswith("fusion") and rows["memory"].endswith("fusion")
    assert "peak RSS 512.0 MiB" in rows["memory"]
    assert rows["cgroup"].startswith("shared cgroup v1: not the job's own")
    assert "memory peak" not in rows["cgroup"]
    assert rows["GPU"].startswith("NVIDIA L4") and rows["GPU"].endswith("fusion")
    assert rows["GPU memory"].startswith("avg 900 MiB of 22.5 GiB")


def test_a_gpu_block_alone_comes_with_the_memory_time_measured(profile, trace_plugins, run_cli):
    node = _shell_job()
    record = node.get_attribute("trace_record")
    record["extras"] = {}
    node.set_attributes({"trace_record": record, "gpu_metrics": {"name": "NVIDIA L4", "pct": 3}})
    rows = _table(run_cli, node.pk)
    peak_kb = node.usage["peak_memory_kb"]
    assert re.match(rf"peak RSS {peak_kb / 1024:.1f} MiB\s+time$", rows["memory"]), rows
    assert re.match(r"NVIDIA L4\s+plugin$", rows["GPU"])  # neither the sampler's nor Fusion's


def test_a_running_job_shows_its_live_trace(profile, trace_plugins, run_cli, veglia_home):
    env = {**os.environ, "VEGLIA_HOME": str(veglia_home)}
    engine_process = subprocess.Popen([sys.executable, "-c", ENGINE_SCRIPT], env=env)
    node = None
    try:
        node = _wait_for_held_job()
        now = int(time.time() * 1000)
        latest = {
            "proc": {"realtime": 20_000, "pct_cpu": 990, "rss": 512_000, "peak_rss": 600_000},
            "cgroup": {"version": "v2", "scope": "shared"},
            "gpu": {"name": "NVIDIA H100", "pct": 55, "peak": 97, "avg_mem": 2048, "mem": 81559},
            "sampler": {"version": 1, "interval": 10, "samples": 8, "final": False},
        }
        series = [
            [now - 20_000 + 1000 * i, 990, 500_000 + i, None, 5 * i, 2048, 30] for i in range(20)
        ]
        node.set_attribute(
            "trace_live", {"latest": latest, "series": series, "offset": [0], "updated": now - 5000}
        )
        rows = _table(run_cli, node.pk)
    finally:
        if node is not None and node.job_id:
            os.killpg(int(node.job_id), signal.SIGTERM)
        engine_process.wait(timeout=60)
    assert re.match(r"live, [5-9] s ago, 8 samples, every 10 s", rows["trace"]), rows["trace"]
    assert rows["memory"].startswith("peak RSS 585.9 MiB, current RSS 500.0 MiB")
    assert rows["cgroup"].startswith("shared cgroup v2: not the job's own")
    assert re.match(r"avg 55%, peak 97%\s+[▁▂▃▄▅▆▇█]{20}\s+trace", rows["GPU use"])


def _wait_for_held_job():
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.orm.loading import load_node
    from veglia.storage import models

    deadline = time.monotonic() + 60  # a loaded machine starts Python slowly
    while time.monotonic() < deadline:
        with get_storage().session() as session:
            pk = session.scalar(sa.select(models.Node.id).where(models.Node.label == "held"))
        if pk:
            node = load_node(pk)
            wait_for([node], lambda n: bool(n.job_id), timeout=60)
            return node.refresh()
        time.sleep(0.05)
    raise AssertionError("the held job did not start")
