"""The web charts (inline SVG) and the self-contained report of ``veglia report``.

The renderers are pure functions of the view dicts, so the views here are built by hand in
the shape veglia.views gives them. The report is also opened in Debian's Chromium, to see
that it draws and that nothing in it reaches out.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from xml.etree import ElementTree

import jinja2
import pytest

from veglia.plugins.web.charts import MAX_POINTS, TEMPLATE_GLOBALS, timeline_svg, usage_svg

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
