"""The web charts (inline SVG) and the self-contained report of ``veglia report``.

The renderers are pure functions of the view dicts, so the views here are built by hand in
the shape veglia.views gives them. The report is also opened in Debian's Chromium, to see
that it draws and that nothing in it reaches out.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import zlib
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jinja2
import pytest

from veglia.plugins.web.charts import MAX_POINTS, TEMPLATE_GLOBALS, timeline_svg, usage_svg
from veglia.plugins.web.report import render_report

START = datetime(2026, 12, 6, 4, 0, tzinfo=timezone.utc)
EVIL = "<script>alert('x')</script>"


def at(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat()


def entry(pk: int, label: str, state: str, submitted: Any, started: Any, ended: Any) -> dict:
    return {
        "pk": pk,
        "label": label,
        "url": f"/job/{pk}",
        "state": state,
        "submitted": None if submitted is None else at(submitted),
        "started": None if started is None else at(started),
        "ended": None if ended is None else at(ended),
    }


def parse(svg: str) -> ElementTree.Element:
    return ElementTree.fromstring(str(svg))


def row_of(root: ElementTree.Element, pk: int) -> ElementTree.Element:
    return next(g for g in root.iter("g") if g.get("data-pk") == str(pk))


def bar(row: ElementTree.Element, kind: str) -> tuple[float, float]:
    rect = next(r for r in row.iter("rect") if kind in (r.get("class") or "").split())
    return float(rect.get("x") or 0), float(rect.get("width") or 0)


def texts(root: ElementTree.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter("text")]


# --- timeline ---------------------------------------------------------------------------


def test_timeline_bars_follow_the_times() -> None:
    timeline = [
        entry(1, "align", "finished", 0, 60, 120),
        entry(2, "call", "finished", 60, 120, 240),
        entry(3, "report", "excepted", 120, 240, 300),
    ]
    root = parse(timeline_svg(timeline, at(300)))
    queued1, run1 = bar(row_of(root, 1), "bar-queued"), bar(row_of(root, 1), "bar-run")
    queued2, run2 = bar(row_of(root, 2), "bar-queued"), bar(row_of(root, 2), "bar-run")
    run3 = bar(row_of(root, 3), "bar-run")
    minute = run1[1]
    assert minute > 0
    # Queued then running, end to end; each bar as long as its span.
    assert queued1[0] + queued1[1] == pytest.approx(run1[0])
    assert queued1[1] == pytest.approx(minute)
    assert queued2[0] == pytest.approx(run1[0])
    assert run2[0] == pytest.approx(run1[0] + minute)
    assert run2[1] == pytest.approx(2 * minute)
    assert run3[0] == pytest.approx(run2[0] + run2[1])
    assert run3[1] == pytest.approx(minute)
    # A failed job's bar is not coloured as a finished one.
    fills = {
        pk: next(r for r in row_of(root, pk).iter("rect") if "bar-run" in r.get("class")).get(
            "fill"
        )
        for pk in (1, 3)
    }
    assert fills[1] != fills[3]
    # The duration is written beside each bar, the axis in elapsed time.
    assert "1m" in texts(row_of(root, 1))
    assert "2m" in texts(row_of(root, 2))
    assert {"0", "1m", "2m", "5m"} <= set(texts(root))


def test_timeline_rows_link_to_the_job() -> None:
    root = parse(timeline_svg([entry(7, "align", "finished", 0, 1, 2)], at(2)))
    links = [a.get("href") for a in root.iter("a")]
    assert links == ["/job/7"]
    root = parse(timeline_svg([entry(7, "align", "finished", 0, 1, 2)], at(2), link=lambda e: None))
    assert list(root.iter("a")) == []


def test_timeline_running_and_queued_jobs_reach_now() -> None:
    timeline = [
        entry(1, "done", "finished", 0, 0, 100),
        entry(2, "running", "running", 0, 100, None),
        entry(3, "queued", "waiting", 150, None, None),
    ]
    root = parse(timeline_svg(timeline, at(200)))
    done = bar(row_of(root, 1), "bar-run")
    running = bar(row_of(root, 2), "bar-run")
    queued = bar(row_of(root, 3), "bar-queued")
    assert running[1] == pytest.approx(done[1])
    assert queued[0] + queued[1] == pytest.approx(running[0] + running[1])
    assert "1m 40s so far" in texts(row_of(root, 2))
    assert "queued 50s" in texts(row_of(root, 3))
    assert not [r for r in row_of(root, 3).iter("rect") if "bar-run" in r.get("class")]


def test_timeline_escapes_labels() -> None:
    svg = timeline_svg([entry(1, EVIL, "finished", 0, 1, 2)], at(2))
    assert "<script" not in svg
    root = parse(svg)
    assert EVIL in texts(root)


def test_timeline_zero_durations_and_odd_entries_still_draw() -> None:
    timeline = [
        entry(1, "instant", "finished", 0, 0, 0),
        entry(2, "never submitted", "created", None, None, None),
        entry(3, "killed in the queue", "killed", 0, None, 0),
    ]
    root = parse(timeline_svg(timeline, at(0)))
    assert bar(row_of(root, 1), "bar-run")[1] > 0
    assert "not submitted" in texts(row_of(root, 2))
    assert "did not run" in " ".join(texts(row_of(root, 3)))


def test_timeline_without_jobs() -> None:
    root = parse(timeline_svg([], at(0)))
    assert "no jobs yet" in texts(root)


# --- usage ------------------------------------------------------------------------------


def points(values: list[float | None], key: str = "cpu", step: float = 10) -> list[dict]:
    return [{"t": at(i * step), key: value} for i, value in enumerate(values)]


def polyline_xs(root: ElementTree.Element) -> list[list[float]]:
    return [
        [float(pair.split(",")[0]) for pair in (line.get("points") or "").split()]
        for line in root.iter("polyline")
    ]


def test_usage_draws_the_series_and_marks_its_peak() -> None:
    svg = usage_svg(points([10, 50, 180, 40]), "cpu", "CPU", "%")
    root = parse(svg)
    [xs] = polyline_xs(root)
    assert len(xs) == 4
    assert xs == sorted(xs)
    assert xs[1] - xs[0] == pytest.approx(xs[3] - xs[2])
    assert "CPU" in texts(root)
    assert "peak 180%" in texts(root)
    peak = next(c for c in root.iter("circle") if c.get("class") == "peak")
    assert float(peak.get("cx") or 0) == pytest.approx(xs[2])


def test_usage_writes_bytes_in_readable_units() -> None:
    gib = 2**30
    root = parse(usage_svg(points([gib / 2, 3 * gib / 2], key="rss"), "rss", "Memory", "bytes"))
    assert "peak 1.5 GiB" in texts(root)
    assert any(text.endswith("GiB") for text in texts(root) if text != "peak 1.5 GiB")


def test_usage_leaves_gaps_where_nothing_was_measured() -> None:
    root = parse(usage_svg(points([1, 2, None, 3, 4]), "cpu", "CPU", "%"))
    assert [len(xs) for xs in polyline_xs(root)] == [2, 2]


def test_usage_skips_points_without_a_time() -> None:
    series = [*points([1, 2, 3]), {"t": None, "cpu": 99}, {"t": "not a time", "cpu": 99}, {}]
    root = parse(usage_svg(series, "cpu", "CPU", "%"))
    assert [len(xs) for xs in polyline_xs(root)] == [3]
    assert "peak 3%" in texts(root)


def test_usage_without_samples() -> None:
    for series in ([], points([None, None])):
        root = parse(usage_svg(series, "gpu", "GPU", "%"))
        assert "no samples" in texts(root)
        assert list(root.iter("polyline")) == []


def test_usage_with_one_point() -> None:
    root = parse(usage_svg(points([42]), "cpu", "CPU", "%"))
    assert list(root.iter("polyline")) == []
    assert [c.get("class") for c in root.iter("circle")] == ["sample", "peak"]
    assert "peak 42%" in texts(root)


def test_usage_downsamples_a_long_series_and_keeps_the_peak() -> None:
    values: list[float | None] = [float(i % 97) for i in range(100_000)]
    values[73_123] = 5000.0
    root = parse(usage_svg(points(values, step=1), "cpu", "CPU", "%"))
    [xs] = polyline_xs(root)
    assert len(xs) <= MAX_POINTS
    assert xs == sorted(xs)
    assert "peak 5000%" in texts(root)


def test_usage_takes_epoch_millisecond_times() -> None:
    series = [{"t": 1_796_519_190_000 + i * 1000, "cpu": float(i)} for i in range(121)]
    root = parse(usage_svg(series, "cpu", "CPU", "%"))
    assert {"0", "1m", "2m", "120%"} <= set(texts(root))


def test_usage_escapes_the_title() -> None:
    svg = usage_svg(points([1]), "cpu", EVIL, "%")
    assert "<script" not in svg
    assert EVIL in texts(parse(svg))


def test_charts_in_an_autoescaping_template() -> None:
    """A page template draws the charts through TEMPLATE_GLOBALS: the SVG goes in as it is,
    the labels in it stay escaped once."""
    environment = jinja2.Environment(autoescape=True)
    environment.globals.update(TEMPLATE_GLOBALS)
    template = environment.from_string(
        "<main>{{ timeline_svg(view.timeline, view.now) }}"
        "{{ usage_svg(view.points, 'cpu', 'CPU', '%') }}</main>"
    )
    view = {"timeline": [entry(1, EVIL, "finished", 0, 1, 2)], "now": at(2), "points": []}
    root = parse(template.render(view=view))
    assert [svg.get("class") for svg in root.iter("svg")] == ["veglia-chart", "veglia-chart"]
    assert EVIL in texts(root)
    assert "no samples" in texts(root)


# --- report -----------------------------------------------------------------------------


def row(pk: int, label: str, kind: str, state: str, **extra: Any) -> dict:
    base = {
        "pk": pk,
        "uuid": f"uuid-{pk}",
        "label": label,
        "kind": kind,
        "process_type": f"veglia.test.{label}",
        "state": state,
        "status": state,
        "exit_status": None,
        "exit_message": None,
        "paused": False,
        "ctime": at(0),
        "mtime": at(300),
        "computer": "hpc" if kind == "calcjob" else None,
        "job_id": None,
        "scheduler_state": None,
        "parent_pk": 1 if pk != 1 else None,
        "stopped_by": None,
        "monitor_notes": None,
        "url": f"/{'job' if kind == 'calcjob' else 'workflow'}/{pk}",
    }
    return {**base, **extra}


def workflow_view() -> dict:
    steps = [
        {"row": row(1, "variant-calling", "workflow", "running"), "depth": 0},
        {"row": row(2, "align", "calcjob", "finished", exit_status=0, job_id="101"), "depth": 1},
        {
            "row": row(
                3, EVIL, "calcjob", "finished", exit_status=137, exit_message="out of memory"
            ),
            "depth": 1,
        },
        {"row": row(4, "call-variants", "calcjob", "running", job_id="103"), "depth": 1},
    ]
    return {
        "process": steps[0]["row"],
        "started": at(0),
        "ended": None,
        "estimated_end": at(900),
        "health": {"succeeded": 1, "failed": 1, "running": 1, "waiting": 0},
        "problems": [
            {
                "pk": 3,
                "label": EVIL,
                "url": "/job/3",
                "problem": "exited 137: killed for memory",
                "what_to_do": "ask for more memory and re-run the step",
            }
        ],
        "steps": steps,
        "timeline": [
            entry(2, "align", "finished", 0, 20, 140),
            entry(3, EVIL, "finished", 10, 30, 90),
            entry(4, "call-variants", "running", 140, 160, None),
        ],
        "now": at(400),
    }


def job_view(pk: int, *, gpu: bool = False) -> dict:
    trace_points = [
        {
            "t": at(20 + i * 5),
            "cpu": 95.0 + i % 7,
            "rss": (200 + i) * 2**20,
            "mem": None,
            "gpu": (60.0 + i % 30) if gpu else None,
            "gpu_mem": 3 * 2**30 if gpu else None,
        }
        for i in range(24)
    ]
    return {
        "process": workflow_view()["steps"][pk - 1]["row"],
        "history": [{"state": "created", "at": at(0)}],
        "scheduler": {"job_id": str(100 + pk), "queue": "normal", "state": "R", "computer": "hpc"},
        "resources": [
            {"name": "memory", "asked": 4 * 2**30, "used": 2 * 2**30, "unit": "bytes"},
            {"name": "walltime", "asked": 3600, "used": 120, "unit": "seconds"},
            {"name": "cpus", "asked": 4, "used": 1, "unit": None},
        ],
        "command_line": "bwa mem ref.fa reads.fq",
        "script": "#!/bin/bash\nbwa mem ref.fa reads.fq\n",
        "inputs": [],
        "outputs": [],
        "log": [],
        "monitors": [],
        "trace": {"measured_by": "core.trace", "points": trace_points},
        "stopped_by": None,
        "monitor_notes": None,
    }


def report_html() -> str:
    jobs = {2: job_view(2), 3: job_view(3), 4: job_view(4, gpu=True)}
    return render_report(workflow_view(), jobs)


class Structure(HTMLParser):
    """Every tag opened is closed, in order (void elements aside); links and sources."""

    VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "col", "source"})
    # SVG elements written self-closed (<rect/>).
    SELF_CLOSED = frozenset({"rect", "line", "circle", "path", "polyline"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.urls: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("href", "src", "xlink:href", "action")]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("href", "src", "xlink:href", "action")]

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def test_report_is_well_formed_html_that_reaches_nowhere() -> None:
    html = report_html()
    parser = Structure()
    parser.feed(html)
    parser.close()
    assert parser.stack == []
    assert html.startswith("<!DOCTYPE html>")
    for forbidden in ("http://", "https://", "<script", "url("):
        assert forbidden not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", html)
    # Every link is to a section of the report itself.
    assert parser.urls
    assert all(url.startswith("#") for url in parser.urls), parser.urls
    assert {"script", "img", "link", "iframe"}.isdisjoint(parser.tags)


def test_report_shows_the_summary_steps_and_problems() -> None:
    html = report_html()
    for step in ("variant-calling", "align", "call-variants", "&lt;script&gt;alert("):
        assert step in html
    assert "exited 137: killed for memory" in html
    assert "ask for more memory and re-run the step" in html
    assert "137: out of memory" in html
    assert "6m 40s so far" in html  # the workflow, running for 400 s
    assert "2m" in html  # align ran 20..140
    assert "4.0 GiB" in html and "2.0 GiB" in html  # asked and used memory
    assert "1h" in html  # asked walltime
    # One section per job, which the steps and the timeline link to.
    for pk in (2, 3, 4):
        assert f'id="job-{pk}"' in html
        assert f'href="#job-{pk}"' in html


def test_report_charts_gpu_only_when_measured() -> None:
    html = report_html()
    sections = re.split(r'<article class="job" id="job-\d+">', html)[1:]
    assert len(sections) == 3
    assert all('aria-label="CPU: peak' in section for section in sections)
    assert all('aria-label="Memory (RSS): peak' in section for section in sections)
    assert ['aria-label="GPU: peak' in section for section in sections] == [False, False, True]


def test_report_without_jobs_or_trace() -> None:
    workflow = workflow_view()
    bare = job_view(2)
    bare["trace"] = None
    html = render_report(workflow, {2: bare})
    assert "No resource trace for this job." in html
    empty = {**workflow, "steps": [], "timeline": [], "problems": []}
    html = render_report(empty, {})
    assert "No steps." in html and "no jobs yet" in html


# --- the report in a real browser ---------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")


def browser_missing(reason: str) -> None:
    """Skip, or fail under CI=true: CI has Debian's chromium and playwright."""
    message = f"{reason} (apt-get install chromium; pip install -e '.[dev]')"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs a browser: {message}", pytrace=False)
    pytest.skip(message)


def png_pixels(png: bytes) -> bytes:
    """The raw scanlines of a PNG (filter bytes included): enough to tell blank from not."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    data, offset = b"", 8
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind = png[offset + 4 : offset + 8]
        if kind == b"IDAT":
            data += png[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return zlib.decompress(data)


def test_report_draws_in_chromium_without_any_request(tmp_path: Path) -> None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_missing("playwright is not installed")
    if not CHROMIUM.exists() and not shutil.which("chromium"):
        browser_missing(f"{CHROMIUM} is not installed")
    report = tmp_path / "report.html"
    report.write_text(report_html(), encoding="utf-8")
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("request", lambda request: requests.append(request.url))
            page.goto(report.as_uri())
            page.wait_for_load_state("networkidle")
            charts = page.locator("svg.veglia-chart")
            assert charts.count() == 1 + 3 * 2 + 2  # the timeline, cpu+memory each, GPU x2
            timeline = charts.first.bounding_box()
            assert timeline and timeline["width"] > 600 and timeline["height"] > 80
            shot = page.screenshot(full_page=True)
            # A timeline row leads to the job's section of the same file.
            page.locator('svg.veglia-chart a[href="#job-3"]').click()
            page.wait_for_url(report.as_uri() + "#job-3")
            assert page.locator("#job-3").is_visible()
        finally:
            browser.close()
    (tmp_path / "report.png").write_bytes(shot)
    assert requests == [report.as_uri()], "the report loaded something besides itself"
    pixels = png_pixels(shot)
    assert len(set(pixels)) > 64, "the screenshot is blank"
