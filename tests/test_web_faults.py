"""`veglia web` through faults together (issue #31): while a browser watches the overview, a
daemon worker is killed, the broker restarts and the database goes away and comes back. The
page says it cannot load meanwhile, then follows every job to its end without a reload, and
every job ran exactly once."""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from pathlib import Path

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia_fixtures.browser import expect
from veglia_fixtures.profiles import make_profile, wait_for
from veglia_fixtures.services import rabbitmqctl

ShellJob = CalculationFactory("core.shell")
JOBS = 6


def _kill_a_worker(profile) -> None:
    workers = DaemonFiles(profile).read_status()["workers"]
    os.kill(workers[0]["pid"], signal.SIGKILL)


def test_the_overview_follows_jobs_through_a_worker_kill_a_broker_restart_and_a_db_outage(
    rabbitmq_url, relayed_postgres, restartable_rabbitmq, daemon, browser_page, tmp_path
):
    from veglia.plugins.web.server import Listener, WebServer, new_token

    profile = make_profile(
        **{
            "storage.url": relayed_postgres["url"],
            "broker.url": rabbitmq_url,
            "daemon.lease_timeout": "10",
        }
    )
    daemon(2)
    ledger = Path(tmp_path) / f"ran-{uuid.uuid4().hex[:8]}.log"
    nodes = []
    for i in range(JOBS):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"echo token-{i} >> {ledger}; sleep {4 + 2 * i}")
        builder.metadata.label = f"through-faults-{i}"
        nodes.append(engine.submit(builder))
    server = WebServer(profile.name, Listener(port=0), new_token())
    server.start()
    try:
        page = browser_page
        page.goto(server.url)
        badge = page.locator("#live-badge")
        expect(badge).to_have_attribute("data-state", "live", timeout=10_000)
        page.evaluate("window.notReloaded = true")

        _kill_a_worker(profile)
        rabbitmqctl("stop_app")
        time.sleep(4)
        rabbitmqctl("start_app")
        relayed_postgres["stop"]()
        try:
            # The page says the view cannot be loaded, rather than showing an old one as live.
            expect(badge).to_have_attribute("data-state", "disconnected", timeout=15_000)
            time.sleep(4)
        finally:
            relayed_postgres["start"]()

        wait_for(nodes, lambda n: n.is_terminated, timeout=240)
        assert all(n.is_finished_ok for n in nodes), [n.process_state for n in nodes]
        ran = ledger.read_text().split()
        assert sorted(ran) == sorted(f"token-{i}" for i in range(JOBS)), ran  # once each
        expect(badge).to_have_attribute("data-state", "live", timeout=15_000)
        for i in range(JOBS):
            row = page.locator("tr", has=page.get_by_text(f"through-faults-{i}", exact=True))
            expect(row.first).to_contain_text(re.compile("finished", re.IGNORECASE), timeout=15_000)
        assert page.evaluate("window.notReloaded") is True
    finally:
        server.stop()
