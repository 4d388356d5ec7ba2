"""Charts as inline SVG: a workflow's timeline and a job's resource use over time.

Pure functions from the view dicts (see veglia.views) to ``markupsafe.Markup``, so a Jinja2
template puts them in a page as they are, and every label interpolated is escaped. No
script, no stylesheet, no font or image from anywhere: colours and fonts are attributes, so
a chart reads the same in a live page, in the self-contained report and in a saved file.

The ``<svg>`` carries no ``xmlns``: an HTML parser places inline SVG in its namespace by
itself, and the report must not hold a single ``http://`` (nor does it need one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

from veglia.plugins.web.formatting import duration_text, number, parse_time

__all__ = ["MAX_POINTS", "STATE_COLOURS", "TEMPLATE_GLOBALS", "timeline_svg", "usage_svg"]

#: The most points a usage chart draws; a longer series keeps each bucket's highest value,
#: so a peak is never averaged away.
MAX_POINTS = 500

#: Fill of a job's running bar by its state (Nextflow's report colours a bar by process; a
#: reader of ours asks first which jobs failed, so ours colour by outcome).
STATE_COLOURS = {
    "finished": "#3a9d5d",
    "running": "#2f7ed8",
    "waiting": "#8fb8e8",
    "created": "#b8c2cc",
    "excepted": "#d64541",
    "failed": "#d64541",
    "killed": "#e08a1e",
}
_OTHER_COLOUR = "#7a8794"
_QUEUED_COLOUR = "#d9dee4"
_TEXT = "#24292f"
_MUTED = "#57606a"
_GRID = "#e4e8ec"
_FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"

#: Steps an elapsed-time axis may tick at, in seconds; past the last, whole weeks.
_TIME_STEPS = (
    *(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5),
    *(1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800),
    *(3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800),
)

# Timeline geometry, in SVG units (the chart scales down to its container's width).
_TL_WIDTH = 960
_TL_LABEL = 230  # the label column
_TL_TEXT_ROOM = 120  # right of the last bar, for its duration
_TL_CHAR_WIDTH = 6.5  # a character of the 12 px text, about
_TL_AXIS = 30
_TL_ROW = 20
_TL_BAR = 12
_TL_LEGEND = 30
_TL_LABEL_CHARS = 34

# Usage chart geometry.
_U_WIDTH = 560
_U_HEIGHT = 200
_U_LEFT = 70
_U_RIGHT = 20
_U_TOP = 30
_U_BOTTOM = 30


def timeline_svg(
    timeline: Sequence[dict[str, Any]],
    now: Any,
    *,
    link: Callable[[dict[str, Any]], str | None] | None = None,
) -> Markup:
    """One row per job as Nextflow's report draws it: the label, a light bar while the job
    was queued (submitted..started), a bar coloured by state while it ran (started..ended,
    or ..``now`` while it runs), the run's duration beside it, elapsed time on the axis.

    ``timeline`` holds the workflow view's entries (``pk, label, url, state, submitted,
    started, ended``). Each row links to ``link(entry)``, by default the entry's ``url``;
    a row whose link is None or empty is not a link.
    """
    now_at = parse_time(now)
    rows = [_TimelineRow(entry, now_at) for entry in timeline]
    if not rows:
        return _empty_svg(_TL_WIDTH, 60, "Timeline", "no jobs yet")
    moments = [m for row in rows for m in row.moments()]
    start = min(moments, default=now_at)
    end = max(moments, default=now_at)
    span = (end - start).total_seconds() if start and end else 0.0
    span = span if span > 0 else 1.0
    left, right = _TL_LABEL + 10, _TL_WIDTH - _TL_TEXT_ROOM
    scale = (right - left) / span

    def x_of(moment: datetime) -> float:
        assert start is not None  # a row with a moment to place made one
        return left + (moment - start).total_seconds() * scale

    height = _TL_AXIS + len(rows) * _TL_ROW + _TL_LEGEND
    parts = [_svg_open(_TL_WIDTH, height, f"Timeline of {len(rows)} job(s)")]
    parts.append(Markup("<title>{}</title>").format(f"Timeline of {len(rows)} job(s)"))
    plot_bottom = _TL_AXIS + len(rows) * _TL_ROW
    for tick in _time_ticks(span):
        x = left + tick * scale
        parts.append(_vline(x, _TL_AXIS - 6, plot_bottom, _GRID))
        parts.append(_text(x, _TL_AXIS - 10, _tick_label(tick), anchor="middle", fill=_MUTED))
    if start:
        parts.append(_text(4, 14, f"from {start:%Y-%m-%d %H:%M:%S} UTC", fill=_MUTED))
    states: list[str] = []
    for index, row in enumerate(rows):
        y = _TL_AXIS + index * _TL_ROW
        parts.append(row.render(y, x_of, link or _default_link, striped=index % 2 == 1))
        if row.state not in states:
            states.append(row.state)
    if now_at and any(row.open for row in rows):
        parts.append(_vline(x_of(now_at), _TL_AXIS - 6, plot_bottom, _MUTED, dashed=True))
    parts.append(_legend(plot_bottom + 20, states))
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def _default_link(entry: dict[str, Any]) -> str | None:
    return entry.get("url")


class _TimelineRow:
    """One job's row: its spans resolved against ``now`` and drawn on demand."""

    def __init__(self, entry: dict[str, Any], now: datetime | None) -> None:
        self.entry = entry
        self.state = str(entry.get("state") or "unknown")
        self.submitted = parse_time(entry.get("submitted"))
        self.started = parse_time(entry.get("started"))
        self.ended = parse_time(entry.get("ended"))
        # A span still open (queued or running) reaches ``now``.
        self.open = self.ended is None and (self.started or self.submitted) is not None
        # Without a ``now`` an open span is drawn as far as it is known.
        self.until = self.ended or now or self.started or self.submitted
        # A clock a little off between the engine and a computer can put a start before
        # the submission or an end before the start; a bar never runs backwards.
        if self.submitted and self.started and self.started < self.submitted:
            self.submitted = self.started
        if self.until and self.started and self.until < self.started:
            self.until = self.started

    def moments(self) -> list[datetime]:
        known = [self.submitted, self.started, self.ended]
        if self.open:
            known.append(self.until)
        return [moment for moment in known if moment is not None]

    def render(
        self,
        y: float,
        x_of: Callable[[datetime], float],
        link: Callable[[dict[str, Any]], str | None],
        *,
        striped: bool,
    ) -> Markup:
        label = str(self.entry.get("label") or f"pk {self.entry.get('pk', '?')}")
        # f-strings with escape() on each text rather than Markup.format: the same markup
        # in a third of the time, which a timeline of thousands of jobs feels.
        parts = [Markup(f"<title>{escape(self._tooltip(label))}</title>")]
        # The row's background is part of its link, so a click anywhere on the row follows
        # it; translucent, so the grid drawn beneath shows through.
        parts.append(
            Markup(
                f'<rect class="row-background" x="0" y="{y}" width="{_TL_WIDTH}" '
                f'height="{_TL_ROW}" fill="{_MUTED}" fill-opacity="{"0.07" if striped else "0"}"/>'
            )
        )
        parts.append(_text(_TL_LABEL, y + _TL_ROW / 2 + 4, _clip(label), anchor="end"))
        bar_y = y + (_TL_ROW - _TL_BAR) / 2
        text_x: float | None = None
        queued_until = self.started or self.until
        if self.submitted and queued_until:
            x0, x1 = x_of(self.submitted), x_of(queued_until)
            parts.append(_bar(x0, x1, bar_y, _QUEUED_COLOUR, "bar-queued"))
            text_x = max(x0, x1)
        if self.started and self.until:
            x0, x1 = x_of(self.started), x_of(self.until)
            colour = STATE_COLOURS.get(self.state, _OTHER_COLOUR)
            parts.append(_bar(x0, x1, bar_y, colour, f"bar-run state-{self.state}"))
            text_x = max(x0, x1, text_x or x0)
        if text_x is None:
            parts.append(_text(_TL_LABEL + 10, y + _TL_ROW / 2 + 4, "not submitted", fill=_MUTED))
        else:
            summary = self._summary()
            if text_x + 5 + len(summary) * _TL_CHAR_WIDTH > _TL_WIDTH:
                # No room right of the bars (the last row): written left of them instead.
                first = x_of(self.submitted or self.started)  # type: ignore[arg-type]
                parts.append(
                    _text(first - 5, y + _TL_ROW / 2 + 4, summary, anchor="end", fill=_MUTED)
                )
            else:
                parts.append(_text(text_x + 5, y + _TL_ROW / 2 + 4, summary, fill=_MUTED))
        body = Markup("").join(parts)
        pk = escape(self.entry.get("pk", ""))
        href = link(self.entry)
        if href:
            return Markup(f'<a href="{escape(href)}"><g class="row" data-pk="{pk}">{body}</g></a>')
        return Markup(f'<g class="row" data-pk="{pk}">{body}</g>')

    def _seconds(self, start: datetime | None, end: datetime | None) -> float | None:
        return (end - start).total_seconds() if start and end else None

    def _summary(self) -> str:
        """What the row writes beside its bars: how long it ran, or has waited."""
        if self.started:
            ran = duration_text(self._seconds(self.started, self.until))
            return f"{ran} so far" if self.open else ran
        waited = duration_text(self._seconds(self.submitted, self.until))
        if self.open:
            return f"queued {waited}"
        if self.state == "finished":
            # It ran between two polls: none saw it running, so only its end is known.
            return f"done in {waited}"
        return f"queued {waited}, did not run"

    def _tooltip(self, label: str) -> str:
        lines = [f"{label} (pk {self.entry.get('pk', '?')}): {self.state}"]
        queued = self._seconds(self.submitted, self.started or self.until)
        if queued is not None:
            lines.append(f"queued {duration_text(queued)}")
        ran = self._seconds(self.started, self.until)
        if ran is not None:
            lines.append(f"ran {duration_text(ran)}" + (" so far" if self.open else ""))
        for name, moment in (
            ("submitted", self.submitted),
            ("started", self.started),
            ("ended", self.ended),
        ):
            if moment:
                lines.append(f"{name} {moment:%Y-%m-%d %H:%M:%S} UTC")
        return "\n".join(lines)


def _legend(y: float, states: list[str]) -> Markup:
    items = [("queued", _QUEUED_COLOUR)]
    items += [(state, STATE_COLOURS.get(state, _OTHER_COLOUR)) for state in states]
    parts = []
    x = float(_TL_LABEL + 10)
    for name, colour in items:
        parts.append(
            Markup('<rect x="{:.1f}" y="{:.1f}" width="14" height="10" fill="{}"/>').format(
                x, y - 9, colour
            )
        )
        parts.append(_text(x + 18, y, name, fill=_MUTED))
        x += 30 + 7 * len(name)
    return Markup("").join(parts)


def usage_svg(points: Sequence[dict[str, Any]], key: str, title: str, unit: str) -> Markup:
    """One series of a job's trace over the run: ``points[i][key]`` against elapsed time,
    with axes, the peak marked and gaps where nothing was measured.

    ``points`` holds the job view's ``trace.points`` (``t`` an ISO time or epoch number).
    ``unit`` ``"bytes"`` writes values in B/KiB/MiB/GiB after the peak; any other unit
    (``"%"``) is written after each value as it is. A series longer than ``MAX_POINTS`` is
    cut into that many buckets, each keeping its highest value.
    """
    samples = _samples(points, key)
    if not any(value is not None for _, value in samples):
        return _empty_svg(_U_WIDTH, _U_HEIGHT, title, "no samples")
    peak_at, peak = max(
        ((moment, value) for moment, value in samples if value is not None),
        key=lambda sample: sample[1],
    )
    samples = _downsample(samples, MAX_POINTS)
    divisor, shown_unit = _display_unit(unit, peak)
    top = _nice_ceiling(peak / divisor, percent=unit == "%")
    start, end = samples[0][0], samples[-1][0]
    span = (end - start).total_seconds()
    left, right = _U_LEFT, _U_WIDTH - _U_RIGHT
    y_top, y_bottom = _U_TOP, _U_HEIGHT - _U_BOTTOM

    def x_of(moment: datetime) -> float:
        if span <= 0:
            return (left + right) / 2
        return left + (moment - start).total_seconds() / span * (right - left)

    def y_of(value: float) -> float:
        return y_bottom - value / divisor / top * (y_bottom - y_top)

    peak_text = f"peak {_value_text(peak / divisor, shown_unit)}"
    label = f"{title}: {peak_text}"
    parts = [_svg_open(_U_WIDTH, _U_HEIGHT, label)]
    parts.append(Markup("<title>{}</title>").format(label))
    parts.append(_text(left, 18, title, weight="600"))
    for step in range(5):
        value = top * step / 4
        y = y_bottom - step / 4 * (y_bottom - y_top)
        parts.append(_hline(left, right, y, _GRID if step else _MUTED))
        text = _value_text(value, shown_unit)
        parts.append(_text(left - 6, y + 4, text, anchor="end", fill=_MUTED))
    parts.append(_vline(left, y_top, y_bottom, _MUTED))
    for tick in _time_ticks(span) if span > 0 else [0.0]:
        x = left + tick / span * (right - left) if span > 0 else x_of(start)
        parts.append(_vline(x, y_bottom, y_bottom + 4, _MUTED))
        parts.append(_text(x, y_bottom + 17, _tick_label(tick), anchor="middle", fill=_MUTED))
    for run in _runs(samples):
        coords = [(x_of(moment), y_of(value)) for moment, value in run]
        parts.append(_series_path(coords, y_bottom))
    px, py = x_of(peak_at), y_of(peak)
    parts.append(
        Markup('<circle class="peak" cx="{:.1f}" cy="{:.1f}" r="4" fill="#d64541"/>').format(px, py)
    )
    anchor = "end" if px > (left + right) / 2 else "start"
    parts.append(
        _text(
            px + (-8 if anchor == "end" else 8),
            max(py - 6, y_top + 10),
            peak_text,
            anchor=anchor,
            fill="#d64541",
        )
    )
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


Sample = tuple[datetime, float | None]


def _samples(points: Sequence[dict[str, Any]], key: str) -> list[Sample]:
    """The points with a readable time, oldest first; a value not measured is None."""
    samples = []
    for point in points:
        moment = parse_time(point.get("t")) if isinstance(point, dict) else None
        if moment is not None:
            samples.append((moment, number(point.get(key))))
    samples.sort(key=lambda sample: sample[0])
    return samples


def _downsample(samples: list[Sample], most: int) -> list[Sample]:
    """At most ``most`` samples: each bucket of neighbours keeps its highest (a resource's
    peak is what a reader looks for), at that sample's own time."""
    if len(samples) <= most:
        return samples
    kept: list[Sample] = []
    for bucket in range(most):
        chunk = samples[bucket * len(samples) // most : (bucket + 1) * len(samples) // most]
        known = [sample for sample in chunk if sample[1] is not None]
        kept.append(max(known, key=lambda sample: sample[1] or 0.0) if known else chunk[0])
    return kept


def _runs(samples: list[Sample]) -> list[list[tuple[datetime, float]]]:
    """The series cut at each unmeasured sample, so a gap shows as a gap."""
    runs: list[list[tuple[datetime, float]]] = [[]]
    for moment, value in samples:
        if value is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((moment, value))
    return [run for run in runs if run]


def _series_path(coords: list[tuple[float, float]], baseline: float) -> Markup:
    if len(coords) == 1:
        x, y = coords[0]
        return Markup('<circle class="sample" cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"/>').format(
            x, y, STATE_COLOURS["running"]
        )
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    area = f"M{coords[0][0]:.1f},{baseline:.1f} L{line} L{coords[-1][0]:.1f},{baseline:.1f} Z"
    return Markup(
        '<path class="area" d="{}" fill="#2f7ed8" fill-opacity="0.15" stroke="none"/>'
        '<polyline class="series" points="{}" fill="none" stroke="#2f7ed8" '
        'stroke-width="1.5" stroke-linejoin="round"/>'
    ).format(area, line)


def _display_unit(unit: str, peak: float) -> tuple[float, str]:
    """The divisor and the unit the axis is written in: bytes scale to the peak's size."""
    if unit != "bytes":
        return 1.0, unit
    for name, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if peak >= scale:
            return float(scale), name
    return 1.0, "B"


def _value_text(value: float, unit: str) -> str:
    if value == 0:
        return "0"
    text = f"{value:.1f}" if 0 < abs(value) < 10 and value != int(value) else f"{value:.0f}"
    return f"{text}%" if unit == "%" else f"{text} {unit}".rstrip()


def _nice_ceiling(value: float, *, percent: bool) -> float:
    """The axis' top: a round number at or above ``value`` whose quarters are round too (a
    percent axis shows at least 100, so one busy core reads as full)."""
    if percent and value <= 100:
        return 100.0
    if value <= 0:
        return 1.0
    power: float = 10 ** math.floor(math.log10(value))
    for factor in (1, 1.2, 1.6, 2, 2.4, 4, 6, 8, 10):
        if value <= factor * power * (1 + 1e-9):
            return factor * power
    return 10 * power


def _time_ticks(span: float, most: int = 8) -> list[float]:
    """Elapsed seconds to tick at: the smallest readable step giving at most ``most``."""
    step = next((s for s in _TIME_STEPS if span / s <= most), None)
    if step is None:
        step = 604800 * math.ceil(span / 604800 / most)
    count = int(span / step + 1e-9)
    return [i * step for i in range(count + 1)]


def _tick_label(seconds: float) -> str:
    return "0" if seconds == 0 else duration_text(seconds)


def _clip(label: str) -> str:
    return label if len(label) <= _TL_LABEL_CHARS else label[: _TL_LABEL_CHARS - 1] + "…"


def _svg_open(width: float, height: float, label: str) -> Markup:
    return Markup(
        '<svg class="veglia-chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'style="max-width:100%;height:auto" role="img" aria-label="{label}" '
        'font-family="{font}" font-size="12" fill="{text}">'
    ).format(w=width, h=height, label=label, font=_FONT, text=_TEXT)


def _empty_svg(width: float, height: float, title: str, message: str) -> Markup:
    return Markup("").join(
        [
            _svg_open(width, height, f"{title}: {message}"),
            Markup("<title>{}</title>").format(f"{title}: {message}"),
            _text(10, 18, title, weight="600"),
            Markup('<rect x="1" y="26" width="{}" height="{}" fill="none" stroke="{}"/>').format(
                width - 2, height - 28, _GRID
            ),
            _text(width / 2, 26 + (height - 28) / 2 + 4, message, anchor="middle", fill=_MUTED),
            Markup("</svg>"),
        ]
    )


def _bar(x0: float, x1: float, y: float, colour: str, kind: str) -> Markup:
    # A job that took no time still shows as a sliver.
    width = max(x1 - x0, 1.5)
    return Markup(
        f'<rect class="{escape(kind)}" x="{x0:.2f}" y="{y:.1f}" width="{width:.2f}" '
        f'height="{_TL_BAR}" fill="{escape(colour)}"/>'
    )


def _text(
    x: float,
    y: float,
    content: str,
    *,
    anchor: str = "start",
    fill: str = _TEXT,
    weight: str = "normal",
) -> Markup:
    return Markup(
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{escape(anchor)}" fill="{escape(fill)}" '
        f'font-weight="{escape(weight)}">{escape(content)}</text>'
    )


def _vline(x: float, y0: float, y1: float, colour: str, *, dashed: bool = False) -> Markup:
    # Lines are drawn over rows (the "now" line); a click goes through them to the row.
    dash = Markup(' stroke-dasharray="4 3"') if dashed else Markup("")
    return Markup(
        '<line x1="{x:.1f}" y1="{:.1f}" x2="{x:.1f}" y2="{:.1f}" stroke="{}" '
        'pointer-events="none"{}/>'
    ).format(y0, y1, colour, dash, x=x)


def _hline(x0: float, x1: float, y: float, colour: str) -> Markup:
    return Markup('<line x1="{:.1f}" y1="{y:.1f}" x2="{:.1f}" y2="{y:.1f}" stroke="{}"/>').format(
        x0, x1, colour, y=y
    )


#: What a Jinja2 environment adds to its globals to draw these charts in a template.
TEMPLATE_GLOBALS: dict[str, Callable[..., Markup]] = {
    "timeline_svg": timeline_svg,
    "usage_svg": usage_svg,
}
