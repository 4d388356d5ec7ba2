"""Request bodies against the contract: each limit, each required field, Nextflow's summaries.

The limits below are written from Nextflow's ``tower-schema.properties`` and the Platform's
OpenAPI spec, not read from veglia's schema module, and every body goes to the validating
loopback Platform through veglia's own client.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from veglia.plugins.tower import payload, schema
from veglia.plugins.tower.client import TowerClient, check_endpoint
from veglia.plugins.tower.exceptions import RecordError, SettingsRejected, TowerRefused
from veglia_fixtures.seqera_platform import BEGIN_REQUIRED, TOKEN

TASK_LIMITS = {
    "hash": 34,
    "name": 255,
    "process": 255,
    "workdir": 512,
    "queue": 100,
    "nativeId": 100,
    "executor": 25,
}
WORKFLOW_LIMITS = {
    "runName": 80,
    "projectName": 100,
    "userName": 40,
    "commandLine": 8096,
    "workDir": 255,
    "scriptName": 100,
    "scriptFile": 255,
    "projectDir": 255,
    "homeDir": 255,
    "launchDir": 255,
    "profile": 100,
}
RECORD = {
    "task_id": 7,
    "name": "job (7)",
    "process": "core.shell",
    "status": "COMPLETED",
    "hash": "ab" * 32,
    "exit": 0,
    "submit": 1_764_000_000_000,
    "start": 1_764_000_001_000,
    "complete": 1_764_000_011_000,
    "duration": 11_000,
    "realtime": 10_000,
    "workdir": "/scratch/ab/cd/ef",
    "executor": "core.slurm",
    "native_id": "1234",
    "queue": "short",
    "cpus": 2,
    "memory": 1 << 30,
    "time": 60_000,
    "attempt": 1,
    "pcpu": 150.0,
    "peak_rss": 1 << 28,
}
META = {
    "projectName": "core.shell",
    "userName": "ada",
    "commandLine": "veglia shell 'echo hi'",
    "workDir": "/scratch",
    "scriptName": "shell.py",
    "scriptFile": "/opt/veglia/shell.py",
    "projectDir": "/opt/veglia",
    "homeDir": "/home/ada",
    "launchDir": "/home/ada",
    "profile": "default",
    "submit": 1_764_000_000_000,
}


@pytest.fixture
def client(platform):
    client = TowerClient(platform.url, TOKEN, "42")
    yield client
    client.close()


def _deliver(client, meta, tasks, run_name="run"):
    """create, begin, progress and complete, as the sender does for one run."""
    workflow_id = client.create({"sessionId": str(uuid.uuid4()), "runName": run_name})
    common = {"workflow_id": workflow_id, "run_name": run_name, "session_id": str(uuid.uuid4())}
    begun = payload.workflow(meta, tasks, completed=False, **common)
    client.begin(workflow_id, {"workflow": begun, "processNames": ["p"], "towerLaunch": False})
    client.progress(workflow_id, {"tasks": tasks, "progress": payload.progress(tasks)})
    done = payload.workflow(meta, tasks, completed=True, **common)
    client.complete(
        workflow_id,
        {"workflow": done, "metrics": payload.metrics(tasks), "progress": payload.progress(tasks)},
    )
    return workflow_id


def test_a_full_run_is_taken_whole(platform, client):
    workflow_id = _deliver(client, META, [payload.task(RECORD)])
    assert platform.refusals == [] and platform.ignored == [] and platform.dropped == []
    saved = platform.workflows[workflow_id]
    assert saved["state"] == "completed" and saved["success"] is True
    assert saved["tasks"][7]["submit"] == "2025-11-24T16:00:00.000+00:00"
    assert saved["metrics"][0]["mem"]["mean"] == 1 << 28
    assert saved["metrics"][0]["cpuUsage"]["mean"] == 75.0  # 150 % over 2 cpus


@pytest.mark.parametrize(("field", "limit"), sorted(TASK_LIMITS.items()))
def test_task_string_limit(platform, client, field, limit):
    record = {**RECORD, _record_key(field): "x" * (limit + 50)}
    task = payload.task(record)
    assert len(task[field]) == limit
    workflow_id = _deliver(client, META, [task])
    assert platform.dropped == [] and platform.refusals == []
    assert platform.workflows[workflow_id]["tasks"][7][field] == "x" * limit


@pytest.mark.parametrize(("field", "limit"), sorted(WORKFLOW_LIMITS.items()))
def test_workflow_string_limit(platform, client, field, limit):
    meta = {**META, field: "y" * (limit + 50)}
    run_name = meta["runName"] if field == "runName" else "run"
    workflow_id = _deliver(client, meta, [payload.task(RECORD)], run_name=run_name)
    assert platform.refusals == []
    assert platform.workflows[workflow_id].get(field, "y" * limit) == "y" * limit


def test_a_workflow_id_longer_than_16_would_be_cut_so_ours_fit():
    body = payload.workflow(
        META, [], workflow_id="w" * 20, run_name="r", session_id="s", completed=False
    )
    assert body["id"] == "w" * 16 and len(body["sessionId"]) <= 36


def _record_key(field):
    return {"nativeId": "native_id"}.get(field, field)


@pytest.mark.parametrize("field", ["task_id", "status", "name"])
def test_a_task_without_a_required_field_is_never_queued(field):
    with pytest.raises(RecordError, match="lacks the required"):
        payload.task({k: v for k, v in RECORD.items() if k != field})


@pytest.mark.parametrize("field", [f for f, spec in schema.WORKFLOW.items() if spec.required])
def test_a_workflow_without_a_required_field_is_never_sent(field):
    data = {**META, "submit": None} if field == "submit" else {k: v for k, v in META.items()}
    data.pop(field, None)
    body = payload.workflow(
        data, [], workflow_id="w", run_name="r", session_id="s", completed=False
    )
    assert body.get(field)  # filled from the launch, or with a default that the API takes
    with pytest.raises(RecordError, match=field):
        schema.conform(schema.WORKFLOW, {k: v for k, v in body.items() if k != field})


@pytest.mark.parametrize("field", BEGIN_REQUIRED)
def test_the_loopback_platform_refuses_a_begin_without(platform, client, field):
    """It validates: what veglia 0.x sent, or a missing launch field, is refused there."""
    workflow_id = client.create({"runName": "r"})
    workflow = payload.workflow(
        META, [], workflow_id=workflow_id, run_name="r", session_id="s", completed=False
    )
    workflow.pop(field)
    with pytest.raises(TowerRefused, match=f"Missing field '{field}'|Failed to convert"):
        client.begin(workflow_id, {"workflow": workflow, "processNames": []})


def test_the_loopback_platform_refuses_what_veglia_0x_sent(platform, client):
    workflow_id = client.create({"runName": "old"})
    old = {"id": workflow_id, "runName": "old", "projectName": "veglia", "processNames": []}
    with pytest.raises(TowerRefused, match="begin: HTTP 400"):
        client.begin(workflow_id, {"workflow": old, "processNames": []})
    with pytest.raises(TowerRefused, match="Workflow status should be complete"):
        begun = payload.workflow(
            META, [], workflow_id=workflow_id, run_name="r", session_id="s", completed=False
        )
        client.complete(workflow_id, {"workflow": begun, "metrics": [], "progress": {}})
    with pytest.raises(TowerRefused, match="Unknown workflow Id=nope"):
        client.progress("nope", {"tasks": [], "progress": {}})


def test_a_sha256_hash_or_an_unknown_key_does_not_reach_the_platform(platform):
    """The two ways veglia 0.x lost data silently: the loopback server sees them too."""
    with httpx.Client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        workflow_id = http.post(f"{platform.url}/trace/create", json={}).json()["workflowId"]
        task = {**payload.task(RECORD), "hash": "ab" * 32}
        body = {"tasks": [task], "progress": {}, "metrics": [{"gpu": {"pct": 1}}]}
        answer = http.put(f"{platform.url}/trace/{workflow_id}/progress", json=body)
    assert answer.status_code == 200
    assert platform.dropped == ["task 7: hash too long"]
    assert platform.ignored == ["progress.metrics"]


def test_more_than_100_tasks_are_refused_so_the_sender_never_sends_them(platform, client):
    workflow_id = client.create({"runName": "big"})
    tasks = [payload.task({**RECORD, "task_id": i}) for i in range(101)]
    with pytest.raises(TowerRefused, match="Workflow trace request too big"):
        client.progress(workflow_id, {"tasks": tasks, "progress": {}})
    from veglia.plugins.tower.sender import BATCH

    assert BATCH == 100


def test_summaries_match_nextflows():
    """nf-tower's recorded complete request (8_workflow_succeeded.json) has this cpu entry
    for four tasks; the same values give the same summary here."""
    values = [29.6, 34.8, 53.3, 61.5]
    summary = payload.summary([(f"sayHello ({i + 1})", v) for i, v in enumerate(values)])
    assert summary == {
        "mean": 44.8,
        "min": 29.6,
        "q1": 33.5,
        "q2": 44.05,
        "q3": 55.35,
        "max": 61.5,
        "minLabel": "sayHello (1)",
        "maxLabel": "sayHello (4)",
        "q1Label": "sayHello (1)",
        "q2Label": "sayHello (2)",
        "q3Label": "sayHello (3)",
    }
    assert payload.summary([("a", 0), ("b", 0)]) is None and payload.summary([]) is None


def test_progress_counts_each_state():
    tasks = [
        payload.task({**RECORD, "task_id": i, "status": status})
        for i, status in enumerate(["SUBMITTED", "RUNNING", "RUNNING", "COMPLETED", "CACHED"])
    ]
    tasks.append(payload.task({**RECORD, "task_id": 9, "status": "FAILED", "attempt": 2}))
    progress = payload.progress(tasks, pending=3)
    expected = {"pending": 3, "submitted": 1, "running": 2, "succeeded": 1, "cached": 1}
    assert {k: progress[k] for k in expected} == expected
    assert progress["failed"] == 1 and progress["retries"] == 1
    assert progress["loadCpus"] == 4 and progress["loadMemory"] == 2 << 30
    assert progress["peakRunning"] == 2 and progress["processes"][0]["name"] == "core.shell"


def test_numbers_are_finite_and_in_range_before_they_are_queued():
    record = {**RECORD, "pcpu": float("nan"), "memory": 10**40, "cpus": 2**40, "exit": 2.0}
    record["gpu_metrics"] = {"pct": float("inf"), "mem": int("9" * 4000), "name": "T4"}
    task = payload.task(record)
    assert "pcpu" not in task and "memory" not in task and "cpus" not in task
    assert task["exit"] == 2 and task["gpuMetrics"] == {"name": "T4"}
    json.dumps(task, allow_nan=False)


def test_an_endpoint_in_clear_is_refused_unless_it_stays_here():
    for url in ("https://api.cloud.seqera.io", "http://127.0.0.1:8000", "http://localhost"):
        check_endpoint(url)
    check_endpoint("http://platform.internal", allow_http=True)
    with pytest.raises(SettingsRejected, match="not https://"):
        check_endpoint("http://platform.internal")


def test_the_workspace_and_workflow_id_are_encoded(platform):
    client = TowerClient(platform.url, TOKEN, "42&evil=1")
    with pytest.raises(TowerRefused, match="Invalid workspaceId: 42&evil=1"):
        client.create({})
    client.close()
    client = TowerClient(platform.url, TOKEN, "42")
    with pytest.raises(TowerRefused, match="Unknown workflow Id=a/b"):
        client.progress("a/b", {"tasks": [], "progress": {}})
    client.close()


def test_an_answer_is_read_up_to_a_mebibyte(platform, client):
    platform.padding = 2 << 20
    with pytest.raises(TowerRefused, match="create: HTTP 200: the answer was over 1048576 bytes"):
        client.create({"runName": "r"})
    platform.padding = 1000
    assert client.create({"runName": "r"})
