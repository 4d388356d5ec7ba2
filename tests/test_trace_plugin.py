"""``core.trace`` on a job's trace record: what the sampler wrote, where Fusion wrote nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from veglia import engine, orm
from veglia.engine.calcjob.trace import TraceRecord
from veglia.entry_points import CalculationFactory
from veglia.plugin_manager import _single_callers, get_plugin_manager
from veglia.plugins.trace.hooks import collect_trace
from veglia.plugins.transports.local import LocalTransport

ShellJob = CalculationFactory("core.shell")
SAMPLED = {
    "proc": {"realtime": 1500, "pct_cpu": 987, "rss": 2048, "peak_rss": 4096, "rchar": 7},
    "cgroup": {"version": "v1", "scope": "shared", "memory_current": 1},
    "gpu": {"name": "Tesla T4", "pct": 69, "scope": "node"},
    "sampler": {"version": 1, "interval": 10, "samples": 3, "final": True},
}


class _Node:
    def __init__(self) -> None:
        self.logs: list[str] = []

    def add_log(self, level: str, message: str) -> None:
        self.logs.append(f"{level} {message}")


def _collect(tmp_path: Path, record: TraceRecord, trace: Any = SAMPLED) -> _Node:
    (tmp_path / "_veglia_trace.json").write_text(json.dumps(trace))
    node = _Node()
    with LocalTransport() as transport:
        transport.cwd = str(tmp_path)
        collect_trace(node=node, transport=transport, record=record, computer=None)
    return node


def test_sampled_blocks_go_on_the_record(tmp_path: Path) -> None:
    record = TraceRecord(task_id=1, name="t", process="p")
    _collect(tmp_path, record)
    assert record.gpu_metrics == SAMPLED["gpu"]
    assert record.measured_by == "trace"
    assert (record.peak_rss, record.rss, record.pcpu) == (4096 * 1024, 2048 * 1024, 98.7)
    assert record.realtime == 1500 and record.rchar == 7
    assert record.extras["trace"] == {
        "proc": SAMPLED["proc"],
        "cgroup": SAMPLED["cgroup"],
        "sampler": SAMPLED["sampler"],
        "sources": {"gpu": "trace", "proc": "trace", "cgroup": "trace"},
        "series": [],  # no series file laid out here
    }


def test_a_job_over_before_its_first_sample_costs_no_look_for_its_series(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Its one sample was the final one: the sampler wrote no series, and the computer is not
    # asked for one (a round trip over SSH). With periodic samples, it is.
    asked: list[str] = []
    lstat = LocalTransport.lstat

    def counted(self: LocalTransport, path: str) -> Any:
        asked.append(Path(path).name)
        return lstat(self, path)

    monkeypatch.setattr(LocalTransport, "lstat", counted)
    short = {**SAMPLED, "sampler": {**SAMPLED["sampler"], "samples": 1}}
    record = TraceRecord(task_id=1, name="t", process="p")
    _collect(tmp_path, record, short)
    assert "_veglia_trace.json" in asked and "_veglia_trace.series" not in asked
    assert record.extras["trace"]["series"] == []
    _collect(tmp_path, TraceRecord(task_id=2, name="t", process="p"))
    assert "_veglia_trace.series" in asked


def test_fusions_blocks_win(tmp_path: Path) -> None:
    record = TraceRecord(task_id=1, name="t", process="p", peak_rss=1, measured_by="fusion")
    record.gpu_metrics = {"name": "from fusion"}
    _collect(tmp_path, record)
    assert record.gpu_metrics == {"name": "from fusion"} and record.peak_rss == 1
    assert record.extras["trace"]["sources"] == {
        "gpu": "fusion",
        "proc": "fusion",
        "cgroup": "trace",
    }


def test_a_broken_trace_costs_a_debug_line(tmp_path: Path) -> None:
    (tmp_path / "_veglia_trace.json").write_text('{"proc": {"rss"')
    record = TraceRecord(task_id=1, name="t", process="p")
    node = _Node()
    with LocalTransport() as transport:
        transport.cwd = str(tmp_path)
        collect_trace(node=node, transport=transport, record=record, computer=None)
    assert record.extras == {} and node.logs[-1].startswith("DEBUG trace:")


def test_a_job_run_by_the_engine_carries_its_sampled_trace(profile: Any) -> None:
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo work")
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok
    wrap = {"name": "core.trace", "live_trace": True, "sample_interval": 10.0}
    assert wrap in node.get_attribute("job_script_wraps")
    trace = node.get_attribute("trace_record")["extras"]["trace"]
    assert trace["sampler"]["final"] is True and trace["sampler"]["version"] == 1
    assert trace["proc"]["realtime"] >= 0 and trace["sources"]["proc"] in ("trace", "time")


def test_a_sleeping_job_reads_its_trace_no_more_often_than_its_sampler_writes(
    profile: Any,
) -> None:
    from veglia.engine.calcjob.live_trace import WRITE_INTERVAL, LiveTrace
    from veglia.orm.computers import load_computer

    computer = load_computer("localhost")
    ran = {}
    for interval in (10, 300):
        computer.properties["trace_interval"] = interval
        computer.save()
        _, ran[interval] = engine.run_get_node(ShellJob, command=orm.Str("true"))
    # Every minute (the live trace's writes); every 300 s when its sampler samples so seldom.
    assert LiveTrace.read_interval(ran[10]) == WRITE_INTERVAL == 60.0
    assert LiveTrace.read_interval(ran[300]) == 300.0


def test_fusion_reads_first_and_the_sampled_trace_last() -> None:
    # Fusion's blocks win over /usr/bin/time's figures and the sampler's; the sampler fills
    # only what nothing before it measured.
    order = [name for name, _ in _single_callers(get_plugin_manager(), "collect_trace")]
    assert order.index("core.fusion") < order.index("core.time") < order.index("core.trace")
    assert order[0] == "core.fusion" and order[-1] == "core.trace"
