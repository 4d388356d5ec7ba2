"""Fitting table cells into a terminal's width without breaking a word: column widths
shared out, and a word too long for its column shortened in the middle ("/scratch/…/ab12")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size

__all__ = [
    "ELLIPSIS",
    "PROSE_FLOOR",
    "WORD_FLOOR",
    "ColumnFit",
    "elide_middle",
    "elide_words",
    "fit_column",
    "share_widths",
]

ELLIPSIS = "…"
#: A column no wider than this keeps its width while wider ones give way (states, times
#: and short names stay whole); a column of one long word a cell (a label, a type, a path)
#: is made this wide while others can give way, and its words are shortened in the middle.
WORD_FLOOR = 16
#: A column of prose (cells of several words: a status, a description) is made at least
#: this wide while one-word columns can give way: it wraps between words, a few a line.
PROSE_FLOOR = 20
#: How narrow a one-word column is made, shortened in its middle, before prose gives way.
ELIDED_LOW = 8
#: A word, with the branch of a tree before it (``process list``'s "   └─ name"): the
#: branch stays on its name's line.
_WORD = re.compile(r"(^ *└─ )?(\S+)")


@dataclass(frozen=True)
class ColumnFit:
    """How a column gives way when a table is too wide: it is made ``floor`` wide while
    others can give way, then ``low`` wide in its ``turn`` (lower turns first); past that,
    the widest column gives way, a cell at a time."""

    floor: int
    low: int
    turn: int


#: The turns: one-word columns are shortened in their middle first, then prose wraps onto
#: more lines, then the names a user types (kept whole) are shortened; short columns last.
_ONE_WORD, _PROSE, _KEPT, _SHORT = range(4)


def fit_column(cells: Sequence[str], natural: int, *, keep: bool = False) -> ColumnFit:
    """How a column of these cells (its header aside), ``natural`` cells wide with its
    header, gives way. ``keep``: its values are names a user types (an option, an entry
    point), kept whole while the other columns can give way."""
    if natural <= WORD_FLOOR:
        return ColumnFit(natural, natural, _SHORT)
    if keep:
        return ColumnFit(natural, WORD_FLOOR, _KEPT)
    lines = [line for text in cells for line in text.split("\n")]
    words = [[match.group() for match in _WORD.finditer(line)] for line in lines]
    # Prose when most lines too long for a word's floor are several words (a cell of a
    # column of labels that holds "(none installed)" does not make it prose).
    wide = [
        len(of_line) > 1
        for line, of_line in zip(lines, words, strict=True)
        if cell_len(line) > WORD_FLOOR
    ]
    if 2 * sum(wide) >= len(wide):
        longest = max((cell_len(word) for of_line in words for word in of_line), default=0)
        return ColumnFit(min(natural, PROSE_FLOOR), min(longest, WORD_FLOOR), _PROSE)
    return ColumnFit(WORD_FLOOR, ELIDED_LOW, _ONE_WORD)


def _head(text: str, width: int) -> str:
    """The start of ``text`` in at most ``width`` cells."""
    return set_cell_size(text, width).rstrip() if cell_len(text) > width else text


def _tail(text: str, width: int) -> str:
    """The end of ``text`` in at most ``width`` cells."""
    return _head(text[::-1], width)[::-1]


def _elide_path(text: str, width: int) -> str | None:
    """A path with whole folders left out of its middle: ``/scratch/…/job/ab12``; when its
    first part is too long for that, the start of that part and whole folders of the end:
    ``host-with-a-long-na…/79/01/ab12``. None when not even its last part fits."""
    parts = text.split("/")
    if len(parts) < 3:
        return None
    # "/scratch" and "(/scratch" keep what is before their first slash.
    head = next(
        (i for i, part in enumerate(parts, 1) if any(c.isalnum() for c in part)), len(parts)
    )
    if head >= len(parts):
        return None
    tail, best = 1, None
    while head + tail < len(parts):
        candidate = "/".join([*parts[:head], ELLIPSIS, *parts[len(parts) - tail :]])
        if cell_len(candidate) > width:
            break
        best = candidate
        # Grow the end first (the job's own folder tells jobs apart), then the start.
        if cell_len(parts[len(parts) - tail - 1]) <= cell_len(parts[head]):
            tail += 1
        else:
            head += 1
    if best is not None:
        return best
    # The first part too long to be whole: at least a third of the width for its start,
    # the rest for the end, in whole folders.
    least = max(width // 3, 1)
    end = "/" + parts[-1]
    if cell_len(end) + cell_len(ELLIPSIS) + least > width:
        return None
    for tail in range(2, len(parts) - head + 1):
        longer = "/" + "/".join(parts[len(parts) - tail :])
        if cell_len(longer) + cell_len(ELLIPSIS) + least > width:
            break
        end = longer
    return _head(text, width - cell_len(ELLIPSIS) - cell_len(end)) + ELLIPSIS + end


def elide_middle(text: str, width: int) -> str:
    """``text`` itself when it fits in ``width`` cells, else its start and end with "…"
    between: whole folders left out of a path, characters out of anything else."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    path = _elide_path(text, width) if "/" in text.strip("/") else None
    if path is not None:
        return path
    # More of the end than of the start: a name's end tells it from its neighbours
    # ("...-waiting", "...:DirectScheduler").
    room = width - cell_len(ELLIPSIS)
    return _head(text, room // 3) + ELLIPSIS + _tail(text, room - room // 3)


def elide_words(text: str, width: int) -> str:
    """``text`` with each word longer than ``width`` cells shortened in its middle, so it
    can wrap between words in a column that wide."""

    def shortened(match: re.Match[str]) -> str:
        branch, word = match.group(1) or "", match.group(2)
        room = width - cell_len(branch)
        if room < 4:
            return elide_middle(branch + word, width)
        return branch + elide_middle(word, room)

    return _WORD.sub(shortened, text)


def share_widths(naturals: Sequence[int], fits: Sequence[ColumnFit], room: int) -> list[int]:
    """Column widths within ``room`` cells: each column its natural width if all fit;
    else each its floor, and what is left shared out so that narrow columns are whole and
    the wide ones get equal shares. Floors that do not fit give way in turn, each column
    down to its low, widest first; then the widest column, whatever it holds."""
    if sum(naturals) <= room:
        return list(naturals)
    widths = [min(fit.floor, natural) for fit, natural in zip(fits, naturals, strict=True)]
    for turn in sorted({fit.turn for fit in fits}):
        giving = [i for i, fit in enumerate(fits) if fit.turn == turn]
        while sum(widths) > room:
            above = [i for i in giving if widths[i] > fits[i].low]
            if not above:
                break
            widths[max(above, key=lambda i: widths[i])] -= 1
    while sum(widths) > room and max(widths) > 1:
        widest = widths.index(max(widths))
        widths[widest] -= 1
    left = room - sum(widths)
    wanting = sorted(
        (i for i, natural in enumerate(naturals) if natural > widths[i]),
        key=lambda i: naturals[i] - widths[i],
    )
    while wanting and left > 0:
        share = left // len(wanting)
        if share == 0:  # a cell each to the columns that want the most
            for i in sorted(wanting, key=lambda i: widths[i] - naturals[i])[:left]:
                widths[i] += 1
            break
        need = naturals[wanting[0]] - widths[wanting[0]]
        if need <= share:
            widths[wanting.pop(0)] += need
            left -= need
            continue
        for i in wanting:
            widths[i] += share
        left -= share * len(wanting)
    return widths
