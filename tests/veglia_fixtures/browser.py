"""Fixtures for `veglia web`: a real uvicorn server for the test profile, and a real browser
(Debian's chromium driven by Playwright). Without chromium or Playwright the browser tests
are skipped with the reason, except under CI=true, where they fail."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from veglia_fixtures.services import service_missing

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixtures skip (or fail under CI), saying why
    expect = None  # type: ignore[assignment]

__all__ = ["RunningWeb", "browser_page", "expect", "web_server"]

CHROMIUM = os.environ.get("VEGLIA_TEST_CHROMIUM", "/usr/bin/chromium")


@dataclass(frozen=True)
class RunningWeb:
    """A server of the loaded profile: its address (``http://127.0.0.1:PORT/``) and its token;
    ``url`` logs in."""

    base_url: str
    token: str

    @property
    def url(self) -> str:
        return f"{self.base_url}?token={self.token}"


@pytest.fixture
def web_server(profile) -> Iterator[RunningWeb]:
    """`veglia web` for the test profile on 127.0.0.1, on a free port, in this process."""
    from veglia.plugins.web.server import Listener, WebServer, new_token

    server = WebServer(profile.name, Listener(port=0), new_token())
    server.start()
    yield RunningWeb(server.base_url, server.token or "")
    server.stop()


@pytest.fixture
def browser_page() -> Iterator[object]:
    """A page of a new chromium (a Playwright ``Page``). Started for each test, not once a
    session: while Playwright's sync API is open, an event loop counts as running on this
    thread, and the tests after it that run one of their own (`engine.run`) would fail."""
    if shutil.which(CHROMIUM) is None:
        service_missing(f"no chromium at {CHROMIUM} (Debian package `chromium`)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        service_missing("Playwright for Python is not installed (pip install -e '.[dev]')")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        yield context.new_page()
        context.close()
        browser.close()
