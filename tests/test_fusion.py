"""Fusion GPU metrics on trace records, from the spec's example trace and broken ones."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.engine.calcjob.trace import TraceRecord
from veglia.entry_points import CalculationFactory
from veglia.plugins.fusion.hooks import collect_trace
from veglia.plugins.transports.local import LocalTransport

ShellJob = CalculationFactory("core.shell")
EXAMPLE = json.loads((Path(__file__).parent / "data" / "fusion" / "trace.json").read_text())


def _job_writing(trace: bytes | None, *, fusion: bool = True, fail: bool = False):
    """A job that leaves ``trace`` as its .fusion/trace.json, as the Fusion client would."""
    builder = ShellJob.get_builder()
    files = {}
    command = "echo work"
    if trace is not None:
        files["trace.json"] = orm.SinglefileData(trace, "trace.json")
        command = "mkdir -p .fusion && mv trace.json .fusion/trace.json; echo work"
    builder.command = orm.Str(command + ("; exit 1" if fail else ""))
    if files:
        builder.files = files
    builder.metadata.options.fusion = fusion
    return builder


def test_gpu_block_is_carried_verbatim_with_unknown_fields(profile):
    trace = json.loads(json.dumps(EXAMPLE))
    trace["gpu"]["future_field"] = {"nested": [1, 2]}
    _, node = engine.run_get_node(_job_writing(json.dumps(trace).encode()))
    assert node.is_finished_ok
    record = node.get_attribute("trace_record")
    assert record["gpu_metrics"] == trace["gpu"]
    assert record["extras"]["fusion"] == {"proc": trace["proc"], "cgroup": trace["cgroup"]}
    assert node.get_attribute("gpu_metrics") == trace["gpu"]
    assert record["status"] == "COMPLETED" and record["exit"] == 0


def test_failed_job_still_carries_its_gpu_block(profile):
    _, node = engine.run_get_node(_job_writing(json.dumps(EXAMPLE).encode(), fail=True))
    assert node.exit_status == 400
    record = node.get_attribute("trace_record")
    assert record["status"] == "FAILED" and record["gpu_metrics"] == EXAMPLE["gpu"]


@pytest.mark.parametrize(
    ("trace", "log"),
    [
        (json.dumps({k: v for k, v in EXAMPLE.items() if k != "gpu"}).encode(), "no gpu block"),
        (json.dumps({**EXAMPLE, "gpu": None}).encode(), "no gpu block"),
        (b'{"gpu": {"name": "Tesla', "not valid JSON"),
        (None, "does not exist"),
    ],
    ids=["cpu-only", "gpu-null", "malformed", "missing"],
)
def test_no_gpu_block_means_no_gpu_metrics_and_no_error(profile, trace, log):
    _, node = engine.run_get_node(_job_writing(trace))
    assert node.is_finished_ok
    assert node.get_attribute("trace_record")["gpu_metrics"] is None
    assert node.get_attribute("gpu_metrics") is None
    assert any(entry.levelname == "DEBUG" and log in entry.message for entry in node.logs)


def test_with_fusion_off_the_trace_file_is_never_read(profile, monkeypatch):
    touched = []
    for name in ("stat", "read_bytes", "getfile", "exists", "isfile"):
        original = getattr(LocalTransport, name)

        def spy(self, path, *args, _original=original, **kwargs):
            touched.append(str(path))
            return _original(self, path, *args, **kwargs)

        monkeypatch.setattr(LocalTransport, name, spy)
    _, node = engine.run_get_node(_job_writing(json.dumps(EXAMPLE).encode(), fusion=False))
    assert node.is_finished_ok
    assert touched, "the spy saw no transport call at all"
    assert not [path for path in touched if ".fusion" in path]
    assert node.get_attribute("trace_record")["gpu_metrics"] is None


def test_fusion_defaults_to_the_computer_setting(profile):
    from veglia.manage import get_storage
    from veglia.storage.models import Computer

    with get_storage().session() as session:
        row = session.query(Computer).filter_by(label="localhost").one()
        row.properties = {**row.properties, "fusion": True}
    builder = _job_writing(json.dumps(EXAMPLE).encode())
    del builder.metadata.options["fusion"]
    _, node = engine.run_get_node(builder)
    assert node.get_attribute("gpu_metrics") == EXAMPLE["gpu"]


def test_process_show_prints_a_gpu_table_and_list_gpu_columns(profile, run_cli):
    _, node = engine.run_get_node(_job_writing(json.dumps(EXAMPLE).encode()))
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    assert "GPU (Fusion)" in shown and "Tesla T4" in shown and "580.126.09" in shown
    listing = run_cli(
        "-p", "test", "process", "list", "-a", "--raw", "-P", "pk,gpu_pct,gpu_peak_mem"
    )
    assert f"{node.pk}\t75\t74.140625" in listing.stdout.splitlines()


def _mutations(rng: random.Random) -> bytes:
    text = json.dumps(EXAMPLE)
    kind = rng.randrange(9)
    if kind == 0:
        return text[: rng.randrange(len(text))].encode()  # truncated
    if kind == 1:
        return json.dumps({**EXAMPLE, "gpu": rng.choice([1, "x", [1], True, 1e308])}).encode()
    if kind == 2:
        depth = rng.randrange(100, 5000)
        return ("[" * depth + "]" * depth).encode()  # deep nesting
    if kind == 3:
        return json.dumps({"gpu": {"pct": 10 ** rng.randrange(20, 400)}}).encode()
    if kind == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))  # invalid UTF-8
    if kind == 5:
        return b"\xff\xfe" + text.encode("utf-16-le")
    if kind == 6:
        return rng.choice([b"", b"null", b"[]", b'"gpu"', b"NaN"])
    if kind == 7:
        return ('{"gpu": {"a": ' * 300 + "1" + "}" * 600).encode()
    raw = bytearray(text.encode())
    for _ in range(rng.randrange(1, 10)):
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


class _Node:
    """What the hook reads of a job node, and where its debug lines go."""

    def __init__(self) -> None:
        self.options = {"fusion": True}
        self.logs: list[str] = []

    def get_attribute(self, key, default=None):
        return default

    def add_log(self, level, message, **details):
        self.logs.append(f"{level} {message}")


def test_thousands_of_malformed_trace_files_never_break_reporting(tmp_path):
    rng = random.Random(20261202)
    (tmp_path / ".fusion").mkdir()
    node = _Node()
    with LocalTransport() as transport:
        transport.cwd = str(tmp_path)
        for _ in range(3000):
            (tmp_path / ".fusion" / "trace.json").write_bytes(_mutations(rng))
            record = TraceRecord(task_id=1, name="t", process="p")
            collect_trace(node=node, transport=transport, record=record, computer=None)
            assert record.gpu_metrics is None or isinstance(record.gpu_metrics, dict)
            json.dumps(record.to_dict())  # whatever came in, the record can be sent
    assert node.logs  # the broken ones were each noted


def test_oversized_trace_is_not_read(tmp_path):
    (tmp_path / ".fusion").mkdir()
    (tmp_path / ".fusion" / "trace.json").write_bytes(b" " * (2 * 1024 * 1024) + b"{}")
    node = _Node()
    record = TraceRecord(task_id=1, name="t", process="p")
    with LocalTransport() as transport:
        transport.cwd = str(tmp_path)
        collect_trace(node=node, transport=transport, record=record, computer=None)
    assert record.gpu_metrics is None and "byte cap" in node.logs[-1]


def test_gpu_idle_monitor_stops_an_idle_gpu_job(no_trace_sampler):
    idle = json.loads(json.dumps(EXAMPLE))
    idle["gpu"]["pct"] = 0
    builder = _job_writing(json.dumps(idle).encode())
    builder.command = orm.Str("mkdir -p .fusion && mv trace.json .fusion/trace.json; sleep 60")
    builder.monitors = {
        "idle": {"entry_point": "core.gpu_idle", "kwargs": {"threshold": 5, "seconds": 0.5}}
    }
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 150
    assert "GPU Tesla T4 idle (0% < 5%)" in node.exit_message
