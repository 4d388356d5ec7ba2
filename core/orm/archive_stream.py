"""Reading an archive's ``data.json`` a row at a time, in memory bounded whatever its size or
shape: ijson parses it as it is unpacked, one row (a user, a node, a link...) is built at a
time, and a row, a string, a number or a nesting past a fixed bound is refused before it is
held.

``data.json`` is one object of lists of rows: ``{"users": [...], "nodes": [...], ...}``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from typing import Any

from veglia.exceptions import ArchiveRowTooBig
from veglia.storage.repository import ByteSource

__all__ = ["MAX_DEPTH", "SECTIONS", "StreamDamaged", "rows"]

#: The lists of rows ``data.json`` holds, each once.
SECTIONS = ("users", "computers", "codes", "nodes", "links", "logs", "groups")
#: Deepest nesting of ``data.json`` (its object is level 1, a list of rows 2, a row 3):
#: far past any honest attributes, well within what storing them as JSON recurses through.
MAX_DEPTH = 100
#: What a value costs in memory besides its text, about (a small dict, list, int or str).
_OVERHEAD = 64
_READ = 64 * 1024

_DELIMITERS = [bytes([byte]) for byte in b' \t\n\r[]{},:"']
#: A quote after an odd run of backslashes: escaped, in a string.
_ESCAPED_QUOTE = re.compile(rb'(?<!\\)(?:\\\\)*\\"')


#: What the reader raises when ``data.json`` is not JSON, not an object of lists of rows, or
#: nests too deep: a ValueError saying it, which the archive's reader reports as damage.
StreamDamaged = ValueError


class _TokenGuard:
    """Passes ``data.json`` on to the parser as it is read, refusing a string, number or
    word longer than ``max_token`` bytes (give or take a chunk) before the parser, which
    holds a token whole, has read it all.

    Only a token that runs over the end of a chunk can grow past a chunk: so the guard
    follows, chunk by chunk, whether the text is inside a string (by the parity of the
    quotes not escaped) and how long the open string or bare token has run.
    """

    def __init__(self, handle: ByteSource, max_token: int):
        self._handle, self._max_token = handle, max_token
        self._offset = 0  # bytes passed on before the current chunk
        self._in_string = False
        self._escaped = False  # the chunk before ended, in a string, on an odd backslash run
        self._start = 0  # where the open string began (or the chunk it began in)
        self._bare = 0  # length of the bare token the chunks before ended on
        self.section, self.number = "data.json", 0  # where the parser is, for messages

    def read(self, count: int = -1) -> bytes:
        chunk = self._handle.read(count)
        self._scan(chunk)
        self._offset += len(chunk)
        return chunk

    def _scan(self, chunk: bytes) -> None:
        view = chunk[1:] if self._escaped else chunk
        quotes = view.count(b'"')
        if b'\\"' in view:
            quotes -= len(_ESCAPED_QUOTE.findall(view))
        if quotes % 2:
            self._in_string = not self._in_string
        if self._in_string:
            if quotes:  # the open string began in this chunk: count from its start
                self._start = self._offset
            self._escaped = (len(view) - len(view.rstrip(b"\\"))) % 2 == 1
            self._bare = 0
            if self._offset + len(chunk) - self._start > self._max_token:
                raise ArchiveRowTooBig(self.section, self.number, self._max_token)
            return
        self._escaped = False
        last = max(chunk.rfind(delimiter) for delimiter in _DELIMITERS)
        self._bare = self._bare + len(chunk) if last < 0 else len(chunk) - last - 1
        if self._bare > self._max_token:
            raise StreamDamaged(
                f"data.json holds a number or word of more than {self._max_token} bytes"
            )


def _build(
    event: str, value: Any, events: Iterator[tuple[str, Any]], depth: int, budget: int
) -> tuple[Any, int]:
    """The value whose first parser event is ``(event, value)``, at nesting ``depth``, and
    what is left of ``budget`` (bytes, about) after it; None as the value when the budget
    runs out (the rest of the value is not read)."""
    if event == "start_map":
        root: Any = {}
    elif event == "start_array":
        root = []
    else:
        return value, budget - _OVERHEAD - (len(value) if event == "string" else 0)
    stack: list[Any] = [root]
    current, key = root, None
    budget -= _OVERHEAD
    for event, value in events:
        if event == "map_key":
            key, budget = value, budget - len(value)
            continue
        if event == "end_map" or event == "end_array":
            stack.pop()
            if not stack:
                return root, budget
            current = stack[-1]
            continue
        if event == "start_map":
            item: Any = {}
        elif event == "start_array":
            item = []
        else:
            item = value
            if event == "string":
                budget -= len(value)
        budget -= _OVERHEAD
        if budget < 0:
            return None, budget
        if current.__class__ is dict:
            current[key] = item
        else:
            current.append(item)
        if event == "start_map" or event == "start_array":
            stack.append(item)
            current = item
            if depth + len(stack) > MAX_DEPTH:
                raise StreamDamaged(f"data.json nests deeper than {MAX_DEPTH} levels")
    raise StreamDamaged("data.json ends inside a row")


_OPEN = frozenset({"start_map", "start_array"})
_CLOSE = frozenset({"end_map", "end_array"})


def _skip(event: str, events: Iterator[tuple[str, Any]], depth: int) -> None:
    """Read past the value whose first event is ``event``, at nesting ``depth``, building
    nothing."""
    if event not in _OPEN:
        return
    level = depth + 1
    for event, _ in events:
        if event in _OPEN:
            level += 1
            if level > MAX_DEPTH:
                raise StreamDamaged(f"data.json nests deeper than {MAX_DEPTH} levels")
        elif event in _CLOSE:
            level -= 1
            if level == depth:
                return


def rows(
    handle: ByteSource, sections: Collection[str], max_row: int
) -> Iterator[tuple[str, int, Any]]:
    """``(section, number, row)`` for each row of ``data.json`` (read from ``handle``) in the
    ``sections`` named, in the order of the file; the others are read past, never built.

    :class:`StreamDamaged` when it is not valid JSON, not an object of the lists
    :data:`SECTIONS` (each once; other keys are read past), or nests past
    :data:`MAX_DEPTH`; :class:`~veglia.exceptions.ArchiveRowTooBig` for a row past
    ``max_row`` bytes (as held in memory, about), or a string past it.
    """
    import ijson  # Lazy: only an import reads an archive's rows (13 ms at the first import)

    guard = _TokenGuard(handle, max_row)
    events = iter(ijson.basic_parse(guard, buf_size=_READ, use_float=True))
    try:
        yield from _rows(guard, events, sections, max_row)
        for _ in events:  # the parser refuses anything after the object
            pass
    except ijson.JSONError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StreamDamaged(f"data.json is not valid JSON ({first})") from None


def _rows(
    guard: _TokenGuard,
    events: Iterator[tuple[str, Any]],
    sections: Collection[str],
    max_row: int,
) -> Iterator[tuple[str, int, Any]]:
    event, _ = next(events, ("end", None))
    if event != "start_map":
        raise StreamDamaged("data.json is not an object")
    seen: set[str] = set()
    for event, key in events:
        if event == "end_map":
            break
        guard.section, guard.number = "data.json", 0  # until a row of a section starts
        event, _ = next(events)
        if key not in SECTIONS:
            _skip(event, events, 1)
            continue
        if key in seen:
            raise StreamDamaged(f"data.json has the list {key!r} twice")
        seen.add(key)
        if event != "start_array":
            raise StreamDamaged(f"data.json has no list {key!r}")
        if key not in sections:  # read past whole, its rows not looked at
            _skip(event, events, 1)
            continue
        guard.section = key
        for number, (event, value) in enumerate(events, 1):
            if event == "end_array":
                break
            guard.number = number
            if event != "start_map":
                raise StreamDamaged(f"{key} are not all objects")
            row, left = _build(event, value, events, 2, max_row)
            if left < 0:
                raise ArchiveRowTooBig(key, number, max_row)
            yield key, number, row
    missing = [key for key in SECTIONS if key not in seen]
    if missing:
        raise StreamDamaged(f"data.json has no list {missing[0]!r}")
