"""The live trace of a running job: what its sampler wrote, read at each poll for all jobs at once.

A job-script wrap that declares ``live_trace`` (``core.trace``, or any plugin's) leaves two
files in the job's work directory while it runs:

- ``_veglia_trace.json``: the blocks of Nextflow-style traces (``proc``, ``cgroup``, ``gpu``,
  ``sampler``), rewritten whole at every sample;
- ``_veglia_trace.series``: one line per sample, after the header
  ``#veglia-trace-series 1 t cpu rss mem gpu gpu_mem gpu_bw``, ``-`` for unknown values.

At each poll of a RUNNING job the engine reads the lines added to the series since the last
poll and the json, in the same transport call as every other job of the computer and their
``watch_files`` monitors, and keeps the result on the node (attribute ``trace_live``). It is
written to the database at most every ``WRITE_INTERVAL`` seconds, the offset with the
series it ended, so a worker that restarts reads on from there: no sample lost, none twice.

Monitors that take a ``trace`` parameter get it as a :class:`LiveTrace`.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import math
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from veglia.engine.runner import get_runner
from veglia.exceptions import MonitorError
from veglia.file_reads import DEFAULT_BUDGET
from veglia.orm import attributes as attr

if TYPE_CHECKING:
    from veglia.engine.calcjob.owner import OwningJob

__all__ = [
    "JSON_FILE",
    "MAX_POINTS",
    "SERIES_FILE",
    "JobLiveTrace",
    "LiveTrace",
    "TraceSample",
    "downsample",
    "parse_series",
    "watch_trace",
]

F = TypeVar("F", bound=Callable[..., Any])

JSON_FILE = "_veglia_trace.json"
SERIES_FILE = "_veglia_trace.series"
SERIES_HEADER = "#veglia-trace-series 1 t cpu rss mem gpu gpu_mem gpu_bw"
#: Points kept on the node; older ones are merged pairwise first, so recent samples keep
#: their resolution and the whole run stays covered.
MAX_POINTS = 240
#: Seconds between two database writes of a running job's live trace.
WRITE_INTERVAL = 60.0
#: The json is a few kB; a bigger file is not a sampler's, and is not parsed.
JSON_TAIL = 256 * 1024
#: Bytes of new series lines read per poll; the rest comes at the next polls.
SERIES_MAX_READ = 1024 * 1024
_BLOCKS = ("proc", "cgroup", "gpu", "sampler")


class TraceSample(NamedTuple):
    """One line of the series. ``t`` in epoch ms; ``cpu`` percent of one core x10 over the
    interval before ``t``; ``rss`` the process tree's kB; ``mem`` the job cgroup's
    anonymous memory in bytes; ``gpu`` utilisation %; ``gpu_mem`` MiB used; ``gpu_bw``
    memory bandwidth utilisation %. None when unknown."""

    t: int
    cpu: float | None = None
    rss: float | None = None
    mem: float | None = None
    gpu: float | None = None
    gpu_mem: float | None = None
    gpu_bw: float | None = None


_AVERAGED = ("cpu", "gpu", "gpu_bw")


def _number(text: str) -> float | None:
    if text == "-":
        return None
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return int(value) if value.is_integer() else value


def parse_series(text: str, at_start: bool) -> tuple[list[TraceSample], int]:
    """The samples in ``text`` (whole lines of the series) and how many lines were dropped
    as not sane. ``at_start``: ``text`` begins the file, so its first line must be the
    header; with another header (another version) every line is dropped."""
    samples: list[TraceSample] = []
    dropped = 0
    lines = text.splitlines()
    if at_start and lines:
        header = lines.pop(0)
        if header.split() != SERIES_HEADER.split():
            return [], len(lines) + 1
    for line in lines:
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != len(TraceSample._fields):
            dropped += 1
            continue
        try:
            t = int(fields[0])
            values = [_number(f) for f in fields[1:]]
        except ValueError:
            dropped += 1
            continue
        samples.append(TraceSample(t, *values))
    return samples, dropped


def _merge(a: TraceSample, b: TraceSample) -> TraceSample:
    """Two neighbours as one: rates averaged, sizes their max (a peak survives), at the
    earlier time (the run stays covered from its start)."""
    merged: list[Any] = [a.t]
    for name in TraceSample._fields[1:]:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            merged.append(y if x is None else x)
        elif name in _AVERAGED:
            merged.append((x + y) / 2)
        else:
            merged.append(max(x, y))
    return TraceSample(*merged)


def downsample(points: list[TraceSample], limit: int = MAX_POINTS) -> list[TraceSample]:
    """At most ``limit`` points: the older half merged pairwise until they fit."""
    points = list(points)
    while len(points) > limit:
        half = (len(points) // 2) & ~1
        older = [_merge(points[i], points[i + 1]) for i in range(0, half, 2)]
        points = older + points[half:]
    return points


def evenly(points: list[TraceSample], limit: int = MAX_POINTS) -> list[TraceSample]:
    """At most ``limit`` points spread evenly over the whole run (a finished job's plot):
    each of consecutive points merged into one, rates averaged, sizes their max."""
    size = -(-len(points) // limit) if points else 1
    if size <= 1:
        return list(points)
    merged = []
    for start in range(0, len(points), size):
        chunk = points[start : start + size]
        point = chunk[0]
        for count, other in enumerate(chunk[1:], start=1):
            point = _fold(point, other, count)
        merged.append(point)
    return merged


def _fold(mean: TraceSample, sample: TraceSample, count: int) -> TraceSample:
    """``mean`` of ``count`` samples with one more: rates a running mean, sizes the max."""
    values: list[Any] = [mean.t]
    for name in TraceSample._fields[1:]:
        x, y = getattr(mean, name), getattr(sample, name)
        if x is None or y is None:
            values.append(y if x is None else x)
        elif name in _AVERAGED:
            values.append(x + (y - x) / (count + 1))
        else:
            values.append(max(x, y))
    return TraceSample(*values)


@dataclass(frozen=True)
class LiveTrace:
    """A running job's trace as of the last poll."""

    #: The blocks of ``_veglia_trace.json``: ``proc``, ``cgroup``, ``gpu``, ``sampler``
    #: (those the sampler wrote).
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The samples, oldest first (older ones merged when there are more than MAX_POINTS).
    series: list[TraceSample] = field(default_factory=list)
    #: When the trace was last written on the computer (epoch ms), None when unknown.
    updated: int | None = None

    @property
    def proc(self) -> dict[str, Any]:
        return self.latest.get("proc") or {}

    @property
    def cgroup(self) -> dict[str, Any]:
        return self.latest.get("cgroup") or {}

    @property
    def gpu(self) -> dict[str, Any]:
        return self.latest.get("gpu") or {}

    @property
    def sampler(self) -> dict[str, Any]:
        return self.latest.get("sampler") or {}

    @property
    def last(self) -> TraceSample | None:
        """The newest sample."""
        return self.series[-1] if self.series else None

    def recent(self, seconds: float) -> list[TraceSample]:
        """The samples of the last ``seconds`` before the newest one (the computer's clock)."""
        if not self.series:
            return []
        since = self.series[-1].t - seconds * 1000
        return [s for s in self.series if s.t >= since]

    def covers(self, seconds: float) -> bool:
        """Whether the series reaches ``seconds`` back from its newest sample."""
        return bool(self.series) and self.series[0].t <= self.series[-1].t - seconds * 1000

    @classmethod
    def from_attribute(cls, value: Any) -> LiveTrace | None:
        """The trace kept on a node (``trace_live``), None when it has none."""
        if not isinstance(value, dict):
            return None
        series = [TraceSample(*point) for point in value.get("series") or []]
        latest = value.get("latest") or {}
        if not series and not latest:
            return None
        return cls(latest, series, value.get("updated"))

    @classmethod
    def of(cls, node: Any) -> LiveTrace | None:
        """The node's live trace as of the last poll."""
        return cls.from_attribute(node.get_attribute(attr.TRACE_LIVE))

    @staticmethod
    def expected(node: Any) -> bool:
        """Whether the job was submitted with a wrap that writes a live trace."""
        wraps = node.get_attribute(attr.JOB_SCRIPT_WRAPS) or []
        return any(isinstance(w, dict) and w.get("live_trace") for w in wraps)

    @staticmethod
    def read_interval(node: Any) -> float:
        """Seconds between two reads of the job's live trace by a job that waits
        dehydrated: ``WRITE_INTERVAL``, or its samplers' interval when that is longer (a
        read between two samples finds nothing new)."""
        wraps = node.get_attribute(attr.JOB_SCRIPT_WRAPS) or []
        intervals = [
            w["sample_interval"]
            for w in wraps
            if isinstance(w, dict)
            and w.get("live_trace")
            and isinstance(w.get("sample_interval"), int | float)
        ]
        return float(max([WRITE_INTERVAL, *intervals]))

    @classmethod
    def read(cls, transport: Any, workdir: str | None = None) -> LiveTrace | None:
        """Read the two files through ``transport`` at once (a monitor called outside the
        engine); ``workdir`` defaults to the transport's cwd."""
        workdir = workdir or getattr(transport, "cwd", None) or "/"
        value: dict[str, Any] = {}
        payload = {"budget": DEFAULT_BUDGET, "requests": _requests(workdir, value)}
        _absorb(value, transport.read_files(payload))
        return cls.from_attribute(value)


def watch_trace(function: F) -> F:
    """Let a monitor that takes ``trace`` read it itself when called outside the engine
    (a test with a ``FakeTransport``): the engine hands it over, read with every other job's."""
    if "trace" not in inspect.signature(function).parameters:
        raise MonitorError(f"{function.__name__}: a watch_trace monitor takes a `trace` keyword.")

    @functools.wraps(function)
    def monitor(node: Any, transport: Any, *args: Any, **kwargs: Any) -> Any:
        if "trace" not in kwargs:  # called directly: read it now
            kwargs["trace"] = LiveTrace.read(transport, getattr(node, "remote_workdir", None))
        return function(node, transport, *args, **kwargs)

    return monitor  # type: ignore[return-value]


@functools.lru_cache(maxsize=256)
def takes_trace(function: Callable[..., Any]) -> bool:
    """Whether a monitor declares a ``trace`` parameter."""
    return "trace" in inspect.signature(function).parameters


# -- the engine's part ------------------------------------------------------------------------


def _requests(workdir: str, value: dict[str, Any]) -> list[dict[str, Any]]:
    series = posixpath.join(workdir, SERIES_FILE)
    offset = value.get("offset")
    known = {series: offset} if isinstance(offset, list) and len(offset) == 2 else {}
    common = {"below": workdir, "glob": False, "tail": 0}
    return [
        {**common, "path": series, "mode": "new", "max": SERIES_MAX_READ, "known": known},
        {**common, "path": posixpath.join(workdir, JSON_FILE), "mode": "tail", "tail": JSON_TAIL,
         "max": JSON_TAIL, "known": {}},
    ]  # fmt: skip


def _blocks(entry: list[Any]) -> dict[str, dict[str, Any]] | None:
    _, kind, size, _, _, _, encoded = entry
    if kind != "f" or size > JSON_TAIL or not encoded:
        return None
    try:
        # NaN and Infinity are not JSON; Python reads them, no database stores them: null.
        data = json.loads(base64.b64decode(encoded), parse_constant=lambda _: None)
    except ValueError:  # a final write caught half done: the next poll reads it whole
        return None
    if not isinstance(data, dict):
        return None
    return {key: data[key] for key in _BLOCKS if isinstance(data.get(key), dict)}


def _absorb(value: dict[str, Any], answers: list[Any]) -> None:
    """Fold the answers to the two reads into ``value`` (a ``trace_live`` attribute)."""
    series_entries, json_entries = answers
    for entry in series_entries:
        _, kind, _, _, inode, start, encoded = entry
        if kind != "f":
            continue
        data = base64.b64decode(encoded)
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else b""  # a line being written waits
        samples, dropped = parse_series(data.decode(errors="replace"), at_start=start == 0)
        series = [*(value.get("series") or []), *(list(s) for s in samples)]
        if len(series) > MAX_POINTS:  # only then is each point looked at again
            series = [list(p) for p in downsample([TraceSample(*p) for p in series])]
        value["series"] = series
        value["offset"] = [start + len(data), inode]
        if dropped:
            value["dropped"] = value.get("dropped", 0) + dropped
    for entry in json_entries:
        blocks = _blocks(entry)
        if blocks is not None:
            value["latest"] = blocks
    stamps = [(value.get("latest") or {}).get("sampler", {}).get("updated")]
    stamps.append((value.get("series") or [[None]])[-1][0])
    known_stamps = [s for s in stamps if isinstance(s, int | float) and not isinstance(s, bool)]
    if known_stamps:
        value["updated"] = int(max(known_stamps))


class JobLiveTrace:
    """A running job's live trace as its process reads it (``CalcJob.runtime.live_trace``):
    what it last read, in this process at once (monitors see it), and in the database every
    ``WRITE_INTERVAL`` seconds. The node's in-memory copy is not enough: any other write on
    the node reloads its attributes from the database, dropping values only noted."""

    def __init__(self, job: OwningJob) -> None:
        self.job = job
        #: The ``trace_live`` value as last read; None until the first read.
        self.value: dict[str, Any] | None = None
        #: time.monotonic() of the last database write.
        self.written_at = float("-inf")
        #: Read, not yet written.
        self.pending = False

    def _known(self) -> dict[str, Any]:
        node = self.job.node
        assert node is not None
        return self.value if self.value is not None else node.get_attribute(attr.TRACE_LIVE) or {}

    def requests(self) -> list[dict[str, Any]]:
        """The two reads of a running job's live trace; none when its wraps write none."""
        node = self.job.node
        assert node is not None
        if not LiveTrace.expected(node) or not node.remote_workdir:
            return []
        return _requests(node.remote_workdir, self._known())

    def current(self) -> LiveTrace | None:
        """The job's live trace as this process last read it."""
        return LiveTrace.from_attribute(self._known())

    def take(self, answers: list[Any]) -> None:
        """Keep what the reads found: in this process at once, in the database every
        WRITE_INTERVAL seconds."""
        node = self.job.node
        assert node is not None
        known = self._known()
        # A shallow copy: _absorb replaces the series and blocks, it never changes them in place.
        value = dict(known)
        _absorb(value, answers)
        if value == known:
            return
        self.value = value
        if time.monotonic() - self.written_at >= WRITE_INTERVAL:
            node.set_attribute(attr.TRACE_LIVE, value)
            self.written_at, self.pending = time.monotonic(), False
        else:
            # Not noted on the node too: that deep-copies the series (a millisecond a job at
            # each poll), and the next write on the node drops it anyway. Monitors read this.
            self.pending = True

    def flush(self) -> None:
        """Write what was only noted: the job left RUNNING, or stops."""
        node = self.job.node
        if self.pending and node is not None:
            node.set_attribute(attr.TRACE_LIVE, self.value)
            self.written_at, self.pending = time.monotonic(), False

    async def refresh(self, requests: list[dict[str, Any]]) -> None:
        """Read the job's live trace with the other jobs' reads of this cycle, and keep it."""
        node = self.job.node
        assert node is not None
        try:
            answers = await get_runner().file_batcher(self.job.computer).read(requests)
        except Exception as exc:  # the computer's fault: the poller's backoff handles it
            node.add_log("DEBUG", f"live trace: reading it failed: {exc}")
            return
        self.take(answers)
