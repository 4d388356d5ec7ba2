"""Fixtures for `veglia web`: a real uvicorn server for the test profile, and a real browser
(Debian's chromium driven by Playwright). Without chromium or Playwright the browser tests
are skipped with the reason, except under CI=true, where they fail."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from veglia_fixtures.services import service_missing

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixtures skip (or fail under CI), saying why
    expect = None  # type: ignore[assignment]

__all__ = ["RunningWeb", "browser_page", "distinct_colours", "expect", "web_server"]

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


def distinct_colours(png: bytes) -> int:
    """How many colours an 8-bit RGB(A) PNG (as chromium writes them) has."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], None
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos : pos + 8])
        data = png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            chunks.append(data)
        pos += 12 + length
    assert header is not None
    width, height, depth, colour_type = header[:4]
    assert depth == 8 and colour_type in (2, 6), header
    size = 3 if colour_type == 2 else 4
    raw, stride, rows, previous = zlib.decompress(b"".join(chunks)), width * size, [], None
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        prior = previous or bytearray(stride)
        for x in range(stride):
            left = line[x - size] if x >= size else 0
            up, corner = prior[x], prior[x - size] if x >= size else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + best) & 0xFF
        rows.append(line)
        previous = line
    return len({bytes(row[x : x + 3]) for row in rows for x in range(0, stride, size * 7)})
