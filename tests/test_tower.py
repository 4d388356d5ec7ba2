"""The Tower reporter against a local server speaking Seqera Platform's trace endpoints."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from test_fusion import EXAMPLE, _job_writing
from veglia import engine, orm
from veglia.config import Config
from veglia.entry_points import CalculationFactory
from veglia.plugins.tower import outbox
from veglia.plugins.tower.sender import TowerSender
from veglia_fixtures.profiles import make_profile, wait_for

TOKEN = "eyJ0b2tlbi10ZXN0.c2VjcmV0LXBheWxvYWQ.dG93ZXItc2lnbmF0dXJl"
ShellJob = CalculationFactory("core.shell")


class FakePlatform:
    """Records every request; can answer 503 (with Retry-After) for a while, or 401."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.fail_until = 0.0
        self.unauthorized = False
        self.count = 0
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                url = urlsplit(self.path)
                if platform.unauthorized:
                    return self._send(401, {"message": "Unauthorized"})
                if time.monotonic() < platform.fail_until:
                    return self._send(503, {"message": "busy"}, {"Retry-After": "1"})
                platform.requests.append(
                    {
                        "method": self.command,
                        "path": url.path,
                        "query": parse_qs(url.query),
                        "auth": self.headers.get("Authorization"),
                        "body": body,
                    }
                )
                if url.path == "/trace/create":
                    platform.count += 1
                    return self._send(200, {"workflowId": f"wf{platform.count}"})
                if url.path.endswith("/begin"):
                    return self._send(200, {"watchUrl": f"http://platform/watch/{url.path}"})
                return self._send(200, {})

            def _send(self, code, body, headers=None):
                data = json.dumps(body).encode()
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_PUT = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def paths(self, suffix: str) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith(suffix)]

    def tasks(self) -> list[dict]:
        return [task for r in self.paths("/progress") for task in r["body"]["tasks"]]


@pytest.fixture
def platform():
    server = FakePlatform()
    yield server
    server.server.shutdown()


@pytest.fixture
def tower_profile(veglia_home, platform):
    from veglia.engine.runner import set_runner

    profile = make_profile(
        **{
            "tower.enabled": "yes",
            "tower.endpoint": platform.url,
            "tower.access_token": TOKEN,
            "tower.workspace_id": "42",
        }
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


def test_gpu_metrics_reach_the_platform_exactly(tower_profile, platform):
    trace = json.loads(json.dumps(EXAMPLE))
    trace["gpu"]["unknown_new_field"] = "kept"
    jobs = {
        "gpu": _job_writing(json.dumps(trace).encode()),
        "cpu": _job_writing(json.dumps({"proc": EXAMPLE["proc"]}).encode()),
        "missing": _job_writing(None),
        "malformed": _job_writing(b"{not json"),
        "failed": _job_writing(json.dumps(EXAMPLE).encode(), fail=True),
    }
    nodes = {name: engine.run_get_node(builder)[1] for name, builder in jobs.items()}
    _flush(tower_profile)

    by_id = {task["taskId"]: task for task in platform.tasks()}
    assert by_id[nodes["gpu"].pk]["gpuMetrics"] == trace["gpu"]
    assert by_id[nodes["failed"].pk]["gpuMetrics"] == EXAMPLE["gpu"]
    assert by_id[nodes["failed"].pk]["status"] == "FAILED"
    for name in ("cpu", "missing", "malformed"):
        assert "gpuMetrics" not in by_id[nodes[name].pk], name
    task = by_id[nodes["gpu"].pk]
    assert task["status"] == "COMPLETED" and task["exit"] == 0
    assert task["nativeId"] == nodes["gpu"].job_id and task["executor"] == "core.direct"
    assert task["submit"].endswith("+00:00") and task["workdir"] == nodes["gpu"].remote_workdir
    assert len(platform.paths("/trace/create")) == 5 == len(platform.paths("/complete"))
    assert all(r["query"] == {"workspaceId": ["42"]} for r in platform.requests)
    assert all(r["auth"] == f"Bearer {TOKEN}" for r in platform.requests)
    creates = [r["body"]["runName"] for r in platform.paths("/trace/create")]
    gpu_run = "veglia-process-" + str(nodes["gpu"].pk)
    gpu_workflow = f"wf{creates.index(gpu_run) + 1}"
    gpu_complete = next(r for r in platform.paths("/complete") if gpu_workflow in r["path"])
    metrics = gpu_complete["body"]["metrics"][0]
    assert metrics["gpu"]["pct"]["mean"] == 75 and metrics["gpu"]["peakMemUsed"]["max"] == 11388


def test_platform_outage_loses_nothing_and_slows_no_job(tower_profile, platform):
    platform.fail_until = time.monotonic() + 4
    start = time.monotonic()
    nodes = [engine.run_get_node(ShellJob, command=orm.Str(f"echo {i}"))[1] for i in range(4)]
    job_seconds = time.monotonic() - start
    sender = TowerSender(tower_profile)
    report = sender.send_pending()
    assert report.errors and "HTTP 503" in report.errors[0]
    _flush(tower_profile)
    sent = [task["taskId"] for task in platform.tasks()]
    assert sorted(sent) == sorted(n.pk for n in nodes)  # each exactly once
    assert job_seconds < 15
    assert outbox.status_counts() == {
        "pending": 0,
        "sent": 8,
        "failed": 0,
        "last_error": outbox.status_counts()["last_error"],
    }


def test_bad_token_pauses_reporting_until_it_is_fixed(tower_profile, platform, run_cli):
    platform.unauthorized = True
    engine.run_get_node(ShellJob, command=orm.Str("true"))
    report = TowerSender(tower_profile).send_pending()
    assert "refused the access token (401" in report.paused
    again = TowerSender(tower_profile).send_pending()
    assert again.paused and not again.errors  # paused: not tried again, not re-reported
    status = run_cli("-p", "test", "tower", "status")
    assert "paused:" in status.stdout and "pending:   2" in status.stdout
    assert TOKEN not in status.output

    platform.unauthorized = False
    Config().set_option("test", "tower.access_token", "new-token-value")
    tower_profile.secrets["tower.access_token"] = "new-token-value"
    _flush(tower_profile)
    assert platform.requests[-1]["auth"] == "Bearer new-token-value"


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


def test_jobs_of_one_tower_run_are_one_platform_workflow(tower_profile, platform):
    nodes = []
    for i in range(3):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"echo {i}")
        builder.metadata.options.tower_run = "batch-7"
        nodes.append(engine.run_get_node(builder)[1])
    _flush(tower_profile)
    assert len(platform.paths("/trace/create")) == 1
    assert platform.paths("/trace/create")[0]["body"]["runName"] == "batch-7"
    assert len(platform.paths("/complete")) == 1
    assert sorted(t["taskId"] for t in platform.tasks()) == sorted(n.pk for n in nodes)
    assert platform.paths("/complete")[0]["body"]["progress"]["succeeded"] == 3


def test_the_daemon_sends_by_itself(tower_profile, platform, daemon):
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("echo daemon"))
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    deadline = time.monotonic() + 30
    while not platform.paths("/complete"):
        assert time.monotonic() < deadline, platform.requests
        time.sleep(0.2)
    assert [t["taskId"] for t in platform.tasks()] == [node.pk]


def test_a_cached_job_still_reports_its_gpu_block(tower_profile, platform):
    first = engine.run_get_node(_job_writing(json.dumps(EXAMPLE).encode()))[1]
    builder = _job_writing(json.dumps(EXAMPLE).encode())
    builder.metadata.cache = True
    second = engine.run_get_node(builder)[1]
    assert second.get_attribute("cached_from")["pk"] == first.pk
    _flush(tower_profile)
    by_id = {task["taskId"]: task for task in platform.tasks()}
    assert by_id[second.pk]["gpuMetrics"] == EXAMPLE["gpu"]
