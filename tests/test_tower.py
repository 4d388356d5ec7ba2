"""The Tower reporter against a loopback Seqera Platform that validates like the real one."""

from __future__ import annotations

import json
import time

import pytest

from test_fusion import EXAMPLE, _job_writing
from veglia import engine, orm
from veglia.config import Config
from veglia.entry_points import CalculationFactory, WorkflowFactory
from veglia.plugins.tower import outbox
from veglia.plugins.tower.sender import TowerSender
from veglia_fixtures.fake_gpu import FAKE_NVSMI, replay_gpu
from veglia_fixtures.profiles import make_profile, wait_for
from veglia_fixtures.seqera_platform import TOKEN

ShellJob = CalculationFactory("core.shell")


@pytest.fixture
def tower_profile(request, veglia_home, platform):
    """A profile reporting to the loopback Platform; on SQLite, or as the test asks."""
    from veglia.engine.runner import set_runner

    database = {}
    if getattr(request, "param", "sqlite") == "postgresql":
        database["storage.url"] = request.getfixturevalue("postgres_database")
    profile = make_profile(
        **database,
        **{
            "tower.enabled": "yes",
            "tower.endpoint": platform.url,
            "tower.access_token": TOKEN,
            "tower.workspace_id": "42",
        },
    )
    yield profile
    set_runner(None)


def _flush(profile, timeout=60.0):
    sender = TowerSender(profile)
    deadline = time.monotonic() + timeout
    while outbox.status_counts()["pending"]:
        assert time.monotonic() < deadline, outbox.status_counts()
        sender.send_pending()
        time.sleep(0.2)
    return sender


def _assert_all_taken(platform):
    """Nothing refused, no key dropped as unknown, no task left unsaved."""
    assert platform.refusals == []
    assert platform.ignored == []
    assert platform.dropped == []


def _run(name, builder):
    builder.metadata.label = name
    return engine.run_get_node(builder)[1]


@pytest.mark.parametrize("tower_profile", ["sqlite", "postgresql"], indirect=True)
def test_every_kind_of_job_is_taken_as_the_platform_takes_it(tower_profile, platform):
    gpu_trace = json.loads(json.dumps(EXAMPLE))
    gpu_trace["gpu"]["unknown_new_field"] = "kept"
    nodes = {
        "gpu": _run("gpu", _job_writing(json.dumps(gpu_trace).encode())),
        "cpu": _run("cpu", _job_writing(json.dumps({"proc": EXAMPLE["proc"]}).encode())),
        "failed": _run("failed", _job_writing(json.dumps(EXAMPLE).encode(), fail=True)),
    }
    cached = _job_writing(json.dumps(gpu_trace).encode())
    cached.metadata.cache = True
    nodes["cached"] = _run("cached", cached)
    assert nodes["cached"].get_attribute("cached_from")["pk"] == nodes["gpu"].pk
    for i in range(2):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"echo {i}")
        builder.metadata.options.tower_run = "two-jobs"
        nodes[f"pair{i}"] = _run(f"pair{i}", builder)
    _flush(tower_profile)
    _assert_all_taken(platform)

    tasks = platform.tasks()
    gpu = tasks[nodes["gpu"].pk]
    assert gpu["gpuMetrics"] == gpu_trace["gpu"]
    assert gpu["status"] == "COMPLETED" and gpu["exit"] == 0
    assert gpu["nativeId"] == nodes["gpu"].job_id and gpu["executor"] == "core.direct"
    assert gpu["workdir"] == nodes["gpu"].remote_workdir and len(gpu["hash"]) <= 34
    assert gpu["start"] and gpu["submit"] <= gpu["start"] <= gpu["complete"]
    # Measured, not requested: Fusion's proc block (kB and %cpu x 10 in the file).
    assert gpu["peakRss"] == EXAMPLE["proc"]["peak_rss"] * 1024
    assert gpu["pcpu"] == pytest.approx(104.5) and gpu["realtime"] == 660541
    assert "gpuMetrics" not in tasks[nodes["cpu"].pk]
    assert tasks[nodes["failed"].pk]["status"] == "FAILED"
    assert tasks[nodes["failed"].pk]["gpuMetrics"] == EXAMPLE["gpu"]
    assert tasks[nodes["cached"].pk]["status"] == "CACHED"
    assert tasks[nodes["cached"].pk]["gpuMetrics"] == gpu_trace["gpu"]

    gpu_run = platform.workflow_named(f"veglia-process-{nodes['gpu'].pk}")
    assert gpu_run["state"] == "completed" and gpu_run["success"] is True
    assert gpu_run["projectName"] == "core.shell" and gpu_run["userName"]
    assert gpu_run["commandLine"] and gpu_run["launchDir"] and gpu_run["scriptName"] == "shell.py"
    metrics = gpu_run["metrics"][0]
    assert metrics["gpuUsage"]["mean"] == 75 and metrics["gpuUsage"]["maxLabel"] == "gpu"
    assert metrics["gpuMemPeak"]["max"] == 11388 and metrics["gpuMemAvg"]["mean"] == 6161
    assert metrics["mem"]["max"] == EXAMPLE["proc"]["peak_rss"] * 1024
    assert "gpu" not in metrics and "realtime" not in metrics

    failed_run = platform.workflow_named(f"veglia-process-{nodes['failed'].pk}")
    assert failed_run["success"] is False and failed_run["exitStatus"] == 1
    assert failed_run["progress"]["failed"] == 1 and failed_run["progress"]["succeeded"] == 0
    cached_run = platform.workflow_named(f"veglia-process-{nodes['cached'].pk}")
    assert cached_run["success"] is True
    assert cached_run["progress"]["cached"] == 1 and cached_run["progress"]["succeeded"] == 0
    assert cached_run["metrics"][0]["gpuUsage"]["mean"] == 75

    pair = platform.workflow_named("two-jobs")
    assert sorted(pair["tasks"]) == sorted([nodes["pair0"].pk, nodes["pair1"].pk])
    assert pair["progress"]["succeeded"] == 2 and pair["state"] == "completed"
    assert len(platform.calls("create")) == 5 == len(platform.calls("complete"))


@pytest.mark.parametrize("tower_profile", ["sqlite", "postgresql"], indirect=True)
def test_a_refused_run_is_marked_and_holds_up_no_other(tower_profile, platform, run_cli):
    first = engine.run_get_node(ShellJob, command=orm.Str("echo first"))[1]
    platform.refuse_begin[f"veglia-process-{first.pk}"] = "Missing field 'start' for workflow"
    sender = _flush(tower_profile)
    second = engine.run_get_node(ShellJob, command=orm.Str("echo second"))[1]
    for _ in range(5):  # more passes: the refused begin is not sent again
        sender.send_pending()
    begins = [r for r in platform.refusals if r["kind"] == "begin"]
    assert len(begins) == 1 and begins[0]["code"] == 400

    delivered = platform.workflow_named(f"veglia-process-{second.pk}")
    assert delivered["state"] == "completed" and second.pk in delivered["tasks"]
    status = run_cli("-p", "test", "tower", "status")
    assert f"veglia-process-{first.pk}: begin refused (HTTP 400)" in status.stdout
    assert "Missing field 'start' for workflow" in status.stdout
    assert "1 refused" in status.stdout and "pending:   0" in status.stdout

    del platform.refuse_begin[f"veglia-process-{first.pk}"]
    retried = run_cli("-p", "test", "tower", "retry", f"veglia-process-{first.pk}")
    assert retried.exit_code == 0, retried.output
    _flush(tower_profile)
    assert platform.workflow_named(f"veglia-process-{first.pk}")["state"] == "completed"
    unknown = run_cli("-p", "test", "tower", "retry", "no-such-run")
    assert unknown.exit_code != 0 and "no refused run 'no-such-run'" in unknown.output


def test_a_running_job_shows_as_running_before_it_ends(tower_profile, platform, daemon):
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 6; echo done"))
    deadline = time.monotonic() + 60
    while platform.tasks().get(node.pk, {}).get("status") != "RUNNING":
        assert time.monotonic() < deadline, (platform.requests, platform.refusals)
        time.sleep(0.2)
    assert not node.refresh().is_terminated
    seen = platform.workflow_named(f"veglia-process-{node.pk}")
    assert seen["progress"]["running"] == 1 and seen["state"] == "running"
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    while platform.tasks()[node.pk]["status"] != "COMPLETED":
        assert time.monotonic() < deadline, platform.requests
        time.sleep(0.2)
    statuses = [t["status"] for r in platform.calls("progress") for t in r["body"]["tasks"]]
    # Only a task's latest event goes in a request (SUBMITTED may be overtaken by RUNNING).
    order = ["SUBMITTED", "RUNNING", "COMPLETED"]
    assert statuses == sorted(statuses, key=order.index) and statuses[-1] == "COMPLETED"
    assert "RUNNING" in statuses
    _assert_all_taken(platform)


def test_a_minute_of_503_loses_nothing_and_slows_no_job(tower_profile, platform, daemon):
    daemon(1)
    platform.fail_until = time.monotonic() + 60
    start = time.monotonic()
    nodes = [engine.submit(ShellJob, command=orm.Str(f"echo {i}")) for i in range(4)]
    wait_for(nodes, lambda n: n.is_terminated, timeout=50)
    assert time.monotonic() - start < 30  # the jobs did not wait for the Platform
    deadline = time.monotonic() + 120
    while not platform.refusals:  # the daemon's sender tries, and is turned away
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert not platform.requests
    while len(platform.calls("complete")) < 4:
        assert time.monotonic() < deadline, platform.refusals[-3:]
        time.sleep(0.5)
    finals = [
        t["taskId"]
        for r in platform.calls("progress")
        for t in r["body"]["tasks"]
        if t["status"] == "COMPLETED"
    ]
    assert sorted(finals) == sorted(n.pk for n in nodes)  # each exactly once
    assert {r["code"] for r in platform.refusals} == {503}
    assert len(platform.refusals) < 80  # Retry-After was honoured, not hammered
    assert outbox.status_counts()["pending"] == 0 and outbox.status_counts()["held"] == 0


def test_bad_token_pauses_reporting_until_it_is_fixed(tower_profile, platform, run_cli):
    platform.token = "another-token"
    engine.run_get_node(ShellJob, command=orm.Str("true"))
    report = TowerSender(tower_profile).send_pending()
    assert "refused the access token (401" in report.paused
    again = TowerSender(tower_profile).send_pending()
    assert again.paused and not again.errors  # paused: not tried again, not re-reported
    assert len(platform.refusals) == 1
    status = run_cli("-p", "test", "tower", "status")
    assert "paused:" in status.stdout and "sent:      0" in status.stdout
    assert "pending:   0" not in status.stdout
    [last] = [line for line in status.stdout.splitlines() if line.startswith("last error:")]
    assert "refused the access token (401 on create" in last
    assert TOKEN not in status.output
    flushed = run_cli("-p", "test", "tower", "flush")
    assert flushed.exit_code == 1 and "sent nothing" in flushed.stdout
    assert "paused: Seqera Platform refused the access token (401" in flushed.stderr

    Config().set_option("test", "tower.access_token", "another-token")
    tower_profile.secrets["tower.access_token"] = "another-token"
    _flush(tower_profile)
    assert platform.calls("complete") and len(platform.refusals) == 1


def test_a_redirect_is_never_followed_nor_taken_for_delivery(tower_profile, platform):
    platform.redirect_to = "https://elsewhere.example/api"
    engine.run_get_node(ShellJob, command=orm.Str("true"))
    report = TowerSender(tower_profile).send_pending()
    assert "redirect (301 to https://elsewhere.example/api)" in report.paused
    assert outbox.status_counts()["sent"] == 0 and outbox.status_counts()["pending"] >= 2
    assert len(platform.refusals) == 1


def test_a_wrong_workspace_is_a_pause_not_a_loop(tower_profile, platform):
    platform.workspace_id = "43"
    engine.run_get_node(ShellJob, command=orm.Str("true"))
    assert "403" in TowerSender(tower_profile).send_pending().paused
    TowerSender(tower_profile).send_pending()
    assert len(platform.refusals) == 1


def test_the_token_is_never_shown(tower_profile, platform, run_cli):
    engine.run_get_node(ShellJob, command=orm.Str("true"))
    platform.fail_until = time.monotonic() + 60
    TowerSender(tower_profile).send_pending()
    for command in (
        ("config", "show", "--all"),
        ("tower", "status"),
        ("status",),
        ("config", "get", "tower.access_token"),
    ):
        result = run_cli("-p", "test", *command)
        assert TOKEN not in result.output, command
    assert TOKEN not in (outbox.status_counts()["last_error"] or "")
    assert TOKEN not in repr(TowerSender(tower_profile).settings)


def test_bad_numbers_in_a_record_stop_nothing(tower_profile, platform):
    weird = json.loads(json.dumps(EXAMPLE))
    weird["gpu"]["pct"] = float("nan")
    weird["gpu"]["mem"] = int("9" * 4000)
    weird["gpu"]["deep"] = {"huge": int("7" * 30), "inf": float("inf"), "ok": 1}
    weird["proc"]["peak_rss"] = int("8" * 4000)
    odd = _run("odd", _job_writing(json.dumps(weird).encode()))
    plain = _run("plain", _plain_job())
    _flush(tower_profile)
    _assert_all_taken(platform)
    task = platform.tasks()[odd.pk]
    assert "pct" not in task["gpuMetrics"] and "mem" not in task["gpuMetrics"]
    assert task["gpuMetrics"]["deep"] == {"ok": 1} and task["gpuMetrics"]["name"] == "Tesla T4"
    assert "peakRss" not in task
    assert platform.workflow_named(f"veglia-process-{plain.pk}")["state"] == "completed"


def test_a_record_that_cannot_be_sent_marks_its_run_only(tower_profile, platform, run_cli):
    # As a release before this one queued records: a trace record, here a corrupt one.
    outbox.enqueue("broken-run", "task", 1, 1, {"task_id": "not a number", "status": "X"})
    outbox.enqueue("broken-run", "complete", 0, 1, {})
    node = engine.run_get_node(ShellJob, command=orm.Str("echo fine"))[1]
    report = _flush(tower_profile).send_pending()
    assert not report.errors
    assert platform.workflow_named(f"veglia-process-{node.pk}")["state"] == "completed"
    status = run_cli("-p", "test", "tower", "status").stdout
    assert "broken-run:" in status and "lacks the required taskId, status" in status
    assert outbox.status_counts()["held"] == 2


def _plain_job():
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo plain")
    return builder


def test_a_workspace_id_is_a_number(tower_profile, platform, run_cli, monkeypatch):
    result = run_cli("-p", "test", "config", "set", "tower.workspace_id", "my-team")
    assert result.exit_code != 0 and "'my-team' is not a workspace id" in result.output
    Config().set_option("test", "tower.workspace_id", "")
    tower_profile.options.pop("tower.workspace_id", None)
    monkeypatch.setenv("TOWER_WORKSPACE_ID", "my team")
    engine.run_get_node(ShellJob, command=orm.Str("true"))
    report = TowerSender(tower_profile).send_pending()
    assert "TOWER_WORKSPACE_ID" in report.paused and not platform.refusals


def test_an_idle_run_sends_heartbeats_and_a_refused_one_is_only_a_warning(
    tower_profile, platform, monkeypatch
):
    from veglia.plugins.tower import payload, sender

    record = {"task_id": 99, "name": "waits", "process": "core.shell", "status": "SUBMITTED"}
    outbox.enqueue("idle-run", "submitted", 99, 1, payload.task(record), {"userName": "ada"})
    tower = _flush(tower_profile)
    assert platform.tasks()[99]["status"] == "SUBMITTED" and not platform.calls("heartbeat")
    monkeypatch.setattr(sender, "HEARTBEAT_SECONDS", 0.0)
    tower.send_pending()
    beats = platform.calls("heartbeat")
    assert len(beats) == 1 and beats[0]["body"]["progress"]["submitted"] == 1
    platform.workflow_named("idle-run")["state"] = "completed"  # as if closed on the server
    tower.send_pending()
    assert platform.refusals[-1]["kind"] == "heartbeat"
    assert outbox.refused_runs() == [] and outbox.status_counts()["runs"] == {"begun": 1}


def test_a_resubmitted_attempt_reaches_the_platform_as_attempt_2(tower_profile, platform, tmp_path):
    marker = tmp_path / "marker"
    builder = ShellJob.get_builder()
    builder.command = orm.Str(f"if [ -e {marker} ]; then echo ok; else touch {marker}; exit 1; fi")
    node = engine.run_get_node(WorkflowFactory("core.restart").wrap(builder))[1]
    first, second = sorted(node.called, key=lambda child: child.pk)
    _flush(tower_profile)
    _assert_all_taken(platform)
    tasks = platform.tasks()
    assert tasks[first.pk]["attempt"] == 1 and tasks[first.pk]["status"] == "FAILED"
    assert tasks[second.pk]["attempt"] == 2 and tasks[second.pk]["status"] == "COMPLETED"


def test_flush_counts_what_it_sent_as_status_counts_it(tower_profile, platform, run_cli):
    for i in range(3):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"echo {i}")
        builder.metadata.options.tower_run = "pair" if i else "alone"
        engine.run_get_node(builder)
    pending = outbox.status_counts()["pending"]
    flushed = run_cli("-p", "test", "tower", "flush")
    assert flushed.exit_code == 0, flushed.output
    # Each job queued its events (submitted, running when seen, its end); each run its end.
    assert pending >= 3 * 2 + 2
    assert f"sent {pending} record(s) of 2 run(s): 3 task update(s), 2 run(s) completed" in (
        flushed.stdout
    )
    status = run_cli("-p", "test", "tower", "status").stdout
    assert f"sent:      {pending}" in status and "last error: -" in status
    assert "sent nothing" in run_cli("-p", "test", "tower", "flush").stdout


def test_status_shows_the_last_error_of_a_busy_platform(tower_profile, platform, run_cli):
    engine.run_get_node(ShellJob, command=orm.Str("true"))
    platform.fail_until = time.monotonic() + 60
    flushed = run_cli("-p", "test", "tower", "flush")
    assert flushed.exit_code == 0 and "sent nothing" in flushed.stdout
    assert "not yet: create: HTTP 503" in flushed.stdout
    status = run_cli("-p", "test", "tower", "status").stdout
    [last] = [line for line in status.splitlines() if line.startswith("last error:")]
    assert last.endswith("create: HTTP 503") and "paused:" not in status


def test_a_job_without_fusion_sends_the_sampler_s_gpu_block(tower_profile, platform, tmp_path):
    """A GPU job on a computer with no Fusion: the core.trace sampler's gpu block (a recorded
    Tesla T4's nvidia-smi replayed on the job's PATH) reaches the Platform as for Fusion."""
    replay_gpu(
        orm.load_computer("localhost"), FAKE_NVSMI / "t4", tmp_path / "calls", trace_interval=0.25
    )
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 2")
    node = _run("sampled-gpu", builder)
    assert node.is_finished_ok, node.exit_message
    block = node.get_attribute("gpu_metrics")
    assert block and block["name"] == "Tesla T4", node.get_attribute("trace_record")["extras"]
    assert node.get_attribute("trace_record")["extras"]["trace"]["sources"]["gpu"] == "trace"
    _flush(tower_profile)
    _assert_all_taken(platform)
    assert platform.tasks()[node.pk]["gpuMetrics"] == block
    metrics = platform.workflow_named(f"veglia-process-{node.pk}")["metrics"][0]
    assert metrics["gpuUsage"]["mean"] == block["pct"]
    assert metrics["gpuMemPeak"]["max"] == block["peak_mem_used"]
    assert metrics["gpuMemAvg"]["mean"] == block["avg_mem"]
