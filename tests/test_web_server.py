"""`veglia web` (issue #31, the server): who may see and do what, escaping, live updates,
and a kill from the browser on a real daemon; with a real uvicorn server and chromium."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.browser import distinct_colours, expect
from veglia_fixtures.profiles import VEGLIA, wait_for
from veglia_fixtures.services import service_missing

ShellJob = CalculationFactory("core.shell")
PASSWORD = "correct horse battery staple 7"


@contextlib.contextmanager
def _logged_in(web_server) -> Iterator[httpx.Client]:
    """An HTTP client whose session the token logged in."""
    with httpx.Client(base_url=web_server.base_url, follow_redirects=True, timeout=30) as client:
        assert client.get("/", params={"token": web_server.token}).status_code == 200
        yield client


def _add_user(run_cli, name: str, role: str) -> None:
    result = run_cli(
        "-p", "test", "web", "user", "add", name, "--role", role, "--password-stdin",
        input=PASSWORD + "\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def _log_in_as(page, web_server, name: str) -> None:
    page.goto(web_server.base_url)
    assert "/login" in page.url
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(web_server.base_url)


def _waiting_job(label: str = "waits") -> orm.CalcJobNode:
    """A job submitted with no daemon running: it stays `created`, an active process."""
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 600")
    builder.metadata.label = label
    return engine.submit(builder)


def test_the_printed_token_logs_the_browser_in_and_leaves_the_address(web_server, browser_page):
    page = browser_page
    page.goto(web_server.url)
    assert page.url == web_server.base_url  # the token is in no history nor Referer
    assert page.locator("h1").inner_text() == "Overview"
    assert page.locator("header .who").inner_text() == "token (operate)"
    page.wait_for_selector("#live-badge[data-state=live]")


def test_a_wrong_token_or_none_is_refused(web_server):
    with httpx.Client(base_url=web_server.base_url, timeout=30) as client:
        wrong = client.get("/", params={"token": web_server.token + "x"})
        assert wrong.status_code == 401 and "That token is not valid" in wrong.text
        page = client.get("/")
        assert page.status_code == 303 and page.headers["location"] == "/login?next=%2F"
        assert client.get("/api").status_code == 401
        assert client.get("/live").status_code == 401
        assert client.get("/action/kill/1").status_code == 303
        assert client.post("/action/kill/1").status_code == 303


def test_every_answer_tells_the_server_time_it_took(web_server):
    with _logged_in(web_server) as client:
        for path in ("/", "/api", "/processes?state=all", "/api/job/999999999", "/login"):
            timing = client.get(path).headers["server-timing"]
            assert re.fullmatch(r"app;dur=\d+\.\d", timing), (path, timing)


def test_a_script_reads_the_api_with_the_token_in_a_header_but_cannot_act(web_server):
    node = _waiting_job("scripted")
    with httpx.Client(base_url=web_server.base_url, timeout=30) as client:
        header = {"Authorization": f"token {web_server.token}"}
        job = client.get(f"/api/job/{node.pk}", headers=header)
        assert job.status_code == 200 and job.json()["process"]["label"] == "scripted"
        assert "veglia_session" not in job.cookies  # no session: nothing to forge a form with
        wrong = client.get("/api", headers={"Authorization": f"token {web_server.token}x"})
        assert wrong.status_code == 401 and wrong.json() == {"error": "That token is not valid."}
        kill = client.post(f"/action/kill/{node.pk}", headers=header, data={"csrf_token": ""})
        assert kill.status_code == 403
    assert node.refresh().process_state == "created"


def test_a_read_only_user_sees_no_action_and_a_forged_kill_is_refused(
    web_server, browser_page, run_cli
):
    node = _waiting_job()
    _add_user(run_cli, "viewer", "read")
    page = browser_page
    _log_in_as(page, web_server, "viewer")
    assert page.locator("header .who").inner_text() == "viewer (read)"
    assert page.get_by_text("waits", exact=True).count() >= 1
    page.goto(f"{web_server.base_url}job/{node.pk}")
    assert page.get_by_text("waits", exact=True).count() >= 1
    assert page.locator('a[href^="/action/"]').count() == 0
    # The user's own session and CSRF token, on a POST the page never offered.
    csrf = page.locator("header input[name=csrf_token]").get_attribute("value")
    answer = page.request.post(
        f"{web_server.base_url}action/kill/{node.pk}", form={"csrf_token": csrf}
    )
    assert answer.status == 403 and "may look but not act" in answer.text()
    assert page.request.get(f"{web_server.base_url}action/kill/{node.pk}").status == 403
    assert node.refresh().process_state == "created"


def test_an_operator_sees_the_action_and_a_post_without_the_csrf_token_is_refused(web_server):
    node = _waiting_job()
    with _logged_in(web_server) as client:
        assert f'href="/action/kill/{node.pk}"' in client.get(f"/job/{node.pk}").text
        confirm = client.get(f"/action/kill/{node.pk}")
        assert confirm.status_code == 200 and "Kill process" in confirm.text
        assert client.post(f"/action/kill/{node.pk}").status_code == 403
        wrong = client.post(f"/action/kill/{node.pk}", data={"csrf_token": "forged"})
        assert wrong.status_code == 403
    assert node.refresh().process_state == "created"


def test_a_bind_beyond_this_machine_needs_tls_or_a_proxy(run_cli, profile):
    result = run_cli("-p", "test", "web", "--host", "0.0.0.0", "--port", "0")
    assert result.exit_code == 3, result.output
    assert result.stderr.strip().count("\n") == 0
    assert "Refusing to serve on 0.0.0.0 without TLS" in result.output
    assert "--behind-proxy" in result.output


def test_a_label_with_markup_is_shown_as_text(web_server, browser_page):
    label = '<script>window.hacked = 1</script><img src=x onerror="window.hacked = 2">'
    _waiting_job(label)
    page = browser_page
    page.goto(web_server.url)
    assert page.get_by_text(label, exact=True).first.is_visible()
    assert page.evaluate("window.hacked") is None
    with _logged_in(web_server) as client:
        html = client.get("/").text
        assert (
            "&lt;script&gt;window.hacked = 1&lt;/script&gt;" in html
            and "<script>window" not in html
        )
        headers = client.get("/").headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert json.dumps(label)[1:-1] in client.get("/api").text


def test_the_overview_follows_a_job_that_ends_without_a_reload(web_server, browser_page):
    page = browser_page
    page.goto(web_server.url)
    page.wait_for_selector("#live-badge[data-state=live]")
    page.evaluate("window.notReloaded = true")
    assert page.get_by_text("live-job", exact=True).count() == 0

    done = threading.Event()
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo done")
    builder.metadata.label = "live-job"
    # Its own thread: Playwright's sync API keeps an event loop on this one.
    threading.Thread(target=lambda: (engine.run(builder), done.set()), daemon=True).start()
    assert done.wait(120)
    row = page.locator("tr", has=page.get_by_text("live-job", exact=True)).first
    expect(row).to_contain_text(re.compile("finished", re.IGNORECASE), timeout=5000)
    assert page.evaluate("window.notReloaded") is True


def test_a_running_job_is_killed_from_the_page(profile, daemon, web_server, browser_page):
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 600"), metadata={"label": "sleeper"})
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)
    page = browser_page
    page.goto(web_server.url)
    page.goto(f"{web_server.base_url}job/{node.pk}")
    page.click(f'a[href="/action/kill/{node.pk}"]')
    assert page.locator("h1").inner_text() == f"Kill process {node.pk}?"
    page.click("button.danger")
    page.locator(".flash").wait_for()
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_killed
    # On the process's page (or the overview): the page follows, without a reload.
    expect(page.locator("main")).to_contain_text(re.compile("killed", re.IGNORECASE))
    assert distinct_colours(page.screenshot()) > 5


def test_no_answer_holds_a_secret(web_server, run_cli, veglia_home):
    _add_user(run_cli, "operator", "operate")
    run_cli("-p", "test", "config", "set", "storage.password", "db-secret-4711")
    node = _waiting_job()
    secrets_file = (veglia_home / "secrets.json").read_text()
    hashes = re.findall(r"scrypt\$[^\"]+", secrets_file)
    assert hashes
    answers = []
    with httpx.Client(base_url=web_server.base_url, timeout=30) as client:
        answers.append(client.get("/login").text)
        token = re.search(r'name="csrf_token" value="([^"]+)"', answers[-1]).group(1)
        answers.append(client.post(
            "/login", data={"username": "operator", "password": PASSWORD, "csrf_token": token}
        ).text)  # fmt: skip
        for path in (
            "/", "/api", f"/job/{node.pk}", f"/api/job/{node.pk}", f"/action/kill/{node.pk}",
            "/nowhere", "/api/nowhere",
        ):  # fmt: skip
            answers.append(client.get(path, follow_redirects=True).text)
        with client.stream("GET", "/live") as stream:
            for line in stream.iter_lines():
                answers.append(line)
                if line.startswith("data:"):
                    break
    assert len(answers) > 7
    for answer in answers:
        for secret in (PASSWORD, "db-secret-4711", *hashes, web_server.token):
            assert secret not in answer


def test_daemon_start_options_and_daemon_status_lines_serve_the_web_view_with_the_daemon(
    profile, run_cli
):
    refused = run_cli("-p", "test", "daemon", "start", "--web", "0.0.0.0:8765")
    assert refused.exit_code == 2 and "Refusing to serve on 0.0.0.0 without TLS" in refused.output
    started = run_cli("-p", "test", "daemon", "start", "--web", "127.0.0.1:0")
    assert started.exit_code == 0, started.output
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"Web view: (http\S+)", run_cli("daemon", "status").stdout)):
            assert time.monotonic() < deadline, run_cli("daemon", "logs").stdout
            time.sleep(0.2)
        url = found.group(1)
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        assert url in run_cli("daemon", "logs").stdout
        with httpx.Client(follow_redirects=True, timeout=30) as client:
            overview = client.get(url)
            assert overview.status_code == 200 and "<h1>Overview</h1>" in overview.text
    finally:
        assert run_cli("-p", "test", "daemon", "stop").exit_code == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=5)
    assert "Web view" not in run_cli("daemon", "status").stdout


def test_web_users_keep_only_a_salted_hash_in_the_secrets_file(run_cli, profile, veglia_home):
    _add_user(run_cli, "ops", "operate")
    prompted = run_cli(
        "-p", "test", "web", "user", "add", "viewer", input=f"{PASSWORD}\n{PASSWORD}\n"
    )  # fmt: skip
    assert prompted.exit_code == 0, prompted.output
    mismatch = run_cli("-p", "test", "web", "user", "add", "x", input="one\ntwo\n")
    assert mismatch.exit_code != 0 and "do not match" in mismatch.output
    listed = run_cli("-p", "test", "web", "user", "list")
    assert listed.stdout.split() == ["ops", "operate", "viewer", "read"]
    secrets_file = json.loads((veglia_home / "secrets.json").read_text())
    users = secrets_file["test"]["web.users"]
    assert (
        users["ops"]["hash"].startswith("scrypt$")
        and users["ops"]["hash"] != users["viewer"]["hash"]
    )
    for text in ((veglia_home / "config.json").read_text(), json.dumps(secrets_file)):
        assert PASSWORD not in text
    assert "web.users" not in (veglia_home / "config.json").read_text()
    assert run_cli("-p", "test", "web", "user", "remove", "ops").exit_code == 0
    assert run_cli("-p", "test", "web", "user", "list").stdout.split() == ["viewer", "read"]
    gone = run_cli("-p", "test", "web", "user", "remove", "ops")
    assert gone.exit_code == 3 and "No web user 'ops'" in gone.output


def test_a_removed_user_is_logged_out_at_the_next_request(web_server, run_cli):
    _add_user(run_cli, "temp", "read")
    with httpx.Client(base_url=web_server.base_url, timeout=30) as client:
        login = client.get("/login").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', login).group(1)
        wrong = client.post(
            "/login", data={"username": "temp", "password": "nope", "csrf_token": token}
        )
        assert wrong.status_code == 401
        client.post("/login", data={"username": "temp", "password": PASSWORD, "csrf_token": token})
        assert client.get("/api").status_code == 200
        assert run_cli("-p", "test", "web", "user", "remove", "temp").exit_code == 0
        assert client.get("/api").status_code == 401


def test_pause_and_play_from_the_web_view(web_server):
    node = _waiting_job()
    with _logged_in(web_server) as client:
        token = re.search(
            r'name="csrf_token" value="([^"]+)"', client.get(f"/action/pause/{node.pk}").text
        ).group(1)
        paused = client.post(f"/action/pause/{node.pk}", data={"csrf_token": token})
        assert paused.status_code == 200 and f"process {node.pk}" in paused.text.lower()
        assert node.refresh().paused
        client.post(f"/action/play/{node.pk}", data={"csrf_token": token})
        assert not node.refresh().paused
        unblock = client.post(f"/action/unblock/{node.pk}", data={"csrf_token": token})
        assert f"Process {node.pk} is not blocked." in unblock.text
        assert client.get("/action/explode/1").status_code == 404
        assert client.get("/action/kill/999999").status_code == 404
        missing = client.get("/job/999999")
        assert missing.status_code == 404 and "999999" in missing.text
        missing = client.get("/api/job/999999")
        assert missing.status_code == 404 and "999999" in missing.json()["error"]


def test_watchers_of_one_view_share_one_load_per_interval_and_loading_stops_with_them():
    from veglia.plugins.web.live import LiveHub, view_key

    interval = 0.2
    loads: list[float] = []

    def load() -> dict:
        loads.append(time.monotonic())
        return {"changes": len(loads) // 2}  # a new view every second load

    async def scenario() -> list[list[dict]]:
        hub = LiveHub(interval)
        key = view_key("overview", {"state": "running"})
        together = await asyncio.gather(*(hub.view(key, load) for _ in range(10)))
        assert len(loads) == 1 and all(view == together[0] for view in together)

        async def watch() -> list[dict]:
            seen = []
            async for view in hub.watch(key, load):
                seen.append(view)
                if len(seen) == 3:
                    return seen
            return seen

        seen = await asyncio.gather(*(watch() for _ in range(20)))
        after_watchers = len(loads)
        await asyncio.sleep(5 * interval)
        assert len(loads) == after_watchers  # nobody watches: nothing is loaded
        return seen

    seen = asyncio.run(scenario())
    assert all(views == seen[0] for views in seen)  # each watcher saw the same changes
    assert [view["changes"] for view in seen[0]] == [0, 1, 2]  # only changes are sent
    assert len(loads) <= 7
    gaps = [later - earlier for earlier, later in itertools.pairwise(loads)]
    assert all(gap >= interval * 0.95 for gap in gaps), gaps


async def wait_until(condition: Any, deadline: float = 10.0) -> None:
    """Until ``condition()`` holds; fails after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the condition never held"
        await asyncio.sleep(0.01)


def test_veglia_web_prints_an_address_that_logs_in_and_serves_until_stopped(profile, veglia_home):
    command = [VEGLIA, "-p", "test", "web", "--port", "0"]
    env = {**os.environ, "VEGLIA_HOME": str(veglia_home)}
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(2)]
        assert lines[0] == "veglia web for profile 'test'; open in a browser:\n", lines
        url = lines[1].strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{32}", url), url
        with httpx.Client(follow_redirects=True, timeout=30) as client:
            page = client.get(url)
            assert page.status_code == 200 and "<h1>Overview</h1>" in page.text
            assert "?token=" not in str(page.url)
            assert client.get(url.replace("?token=", "?token=x")).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0


def test_with_tls_it_serves_beyond_this_machine_and_its_cookie_is_secure(
    profile, veglia_home, tmp_path
):
    if shutil.which("openssl") is None:
        service_missing("no openssl to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    command = [
        VEGLIA, "-p", "test", "web", "--host", "0.0.0.0", "--port", "0",
        "--certfile", str(cert), "--keyfile", str(key),
    ]  # fmt: skip
    env = {**os.environ, "VEGLIA_HOME": str(veglia_home)}
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        server.stdout.readline()
        url = server.stdout.readline().strip()
        assert url.startswith("https://0.0.0.0:"), url
        with httpx.Client(verify=False, timeout=30) as client:
            login = client.get(url.replace("0.0.0.0", "127.0.0.1"))
            assert login.status_code == 303
            assert "secure" in login.headers["set-cookie"].lower()
            assert "httponly" in login.headers["set-cookie"].lower()
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0
