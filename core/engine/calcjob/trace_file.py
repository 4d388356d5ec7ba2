"""Reading a JSON trace file a job leaves in its work directory (a plugin's: a job-side
tracer's, the ``core.trace`` sampler's ``_veglia_trace.json``), and putting its ``proc`` block
on a trace record. The file is the job's: no link is followed, its size is capped, and anything
malformed is a :class:`~veglia.exceptions.TraceFileUnusable` that says why."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from veglia.exceptions import TraceFileUnusable, TransportError
from veglia.wording import a_or_an

__all__ = ["MAX_DEPTH", "MAX_TRACE_BYTES", "apply_proc_block", "parse_trace", "read_trace_file"]

#: A trace file is a few kB; anything past this is not one, and is not read.
MAX_TRACE_BYTES = 1024 * 1024
#: Metrics are flat; a block nested deeper than this is not a trace's and would not store.
MAX_DEPTH = 16
#: The blocks of a Nextflow-style trace file.
TRACE_BLOCKS = ("gpu", "proc", "cgroup")


def parse_trace(raw: bytes, path: str, blocks: Iterable[str] = TRACE_BLOCKS) -> dict[str, Any]:
    """The named blocks of a trace file that are objects: ``{"gpu": ..., "proc": ...}``."""
    try:
        # NaN and Infinity are not JSON; Python reads them, no database stores them: null.
        data = json.loads(raw.decode("utf-8"), parse_constant=lambda _: None)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise TraceFileUnusable(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TraceFileUnusable(f"{path} holds {a_or_an(type(data).__name__)}, not an object")
    found = {key: data[key] for key in blocks if isinstance(data.get(key), dict)}
    for key, block in found.items():
        if _depth(block) > MAX_DEPTH:
            raise TraceFileUnusable(f"the {key} block of {path} nests deeper than {MAX_DEPTH}")
    return found


def _depth(value: Any, level: int = 0) -> int:
    """How deep ``value`` nests, counting stops past the limit."""
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def read_trace_file(
    transport: Any, path: str, blocks: Iterable[str] = TRACE_BLOCKS, missing: str = ""
) -> dict[str, Any]:
    """Read and parse a trace file in the transport's cwd (the job's work directory).

    :param missing: said after "does not exist" (who did not write it)."""
    # The job may have made the file's folder, or its whole work dir, a link leading elsewhere.
    link = transport.link_above(".", path)
    if link is not None:
        raise TraceFileUnusable(
            f"{path} is not read: {link} is a link, and veglia follows no link in a job's folder"
        )
    try:
        info = transport.lstat(path)
    except TransportError:
        raise TraceFileUnusable(f"{path} does not exist{missing}") from None
    if not info.is_file:
        raise TraceFileUnusable(f"{path} is not a regular file (a link, FIFO or device): not read")
    if info.size > MAX_TRACE_BYTES:
        raise TraceFileUnusable(f"{path} is {info.size} bytes, over the {MAX_TRACE_BYTES} byte cap")
    try:
        # The cap again on the read itself: the file may grow, or be swapped, after lstat.
        raw = transport.read_bytes(path, size=MAX_TRACE_BYTES + 1)
    except TransportError as exc:
        raise TraceFileUnusable(f"{path} could not be read: {exc}") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceFileUnusable(f"{path} grew over the {MAX_TRACE_BYTES} byte cap while read")
    return parse_trace(raw, path, blocks)


#: The ``proc`` block in the units of Nextflow's ``.command.trace``: percentages times ten,
#: memory in kB. Name on the record, name in the block, factor to the record's unit.
_PROC_FIELDS = (
    ("pcpu", "pct_cpu", 0.1),
    ("pmem", "pct_mem", 0.1),
    ("rss", "rss", 1024),
    ("vmem", "vmem", 1024),
    ("peak_rss", "peak_rss", 1024),
    ("peak_vmem", "peak_vmem", 1024),
    ("rchar", "rchar", 1),
    ("wchar", "wchar", 1),
    ("syscr", "syscr", 1),
    ("syscw", "syscw", 1),
    ("read_bytes", "read_bytes", 1),
    ("write_bytes", "write_bytes", 1),
    ("vol_ctxt", "vol_ctxt", 1),
    ("inv_ctxt", "inv_ctxt", 1),
    ("realtime", "realtime", 1),
)


def apply_proc_block(record: Any, proc: dict[str, Any]) -> set[str]:
    """A trace's measured figures on the record's fields, in the record's units; junk values
    are skipped. Returns the names of the fields it set."""
    taken = set()
    for ours, theirs, factor in _PROC_FIELDS:
        value = proc.get(theirs)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        try:
            scaled = value * factor
            setattr(record, ours, round(scaled, 1) if isinstance(factor, float) else int(scaled))
        except (OverflowError, ValueError):  # inf, nan: no measurement
            continue
        taken.add(ours)
    return taken
