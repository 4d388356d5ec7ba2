"""How the CLI talks: one console, tables that can be raw, and one-line messages."""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Sequence
from typing import Any, BinaryIO

import click
from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from veglia.cli.fit import elide_middle, elide_words, fit_column, share_widths

__all__ = [
    "console",
    "echo_error",
    "echo_info",
    "echo_success",
    "echo_warning",
    "echo_wrapped",
    "print_table",
]

# Piped output is for scripts and logs: do not fold it to 80 columns (tables are never
# folded when piped: see print_table).
_WIDTH = None if sys.stdout.isatty() else 240
#: Tables longer than this are laid out by veglia rather than rich: the same text, without
#: rich's measuring of every cell (about 1 ms a row: a tenth of ``process list``'s start-up
#: for 40 rows). Rich still lays out a table with a title, or one too wide for the console.
PLAIN_ROWS = 0
console = Console(highlight=False, soft_wrap=True, width=_WIDTH)
error_console = Console(stderr=True, highlight=False, soft_wrap=True, width=_WIDTH)


def echo_success(message: str) -> None:
    console.print(f"[green]✔[/green] {message}")


def echo_info(message: str) -> None:
    console.print(message)


def echo_warning(message: str) -> None:
    error_console.print(f"[yellow]Warning:[/yellow] {message}")


def echo_error(message: str) -> None:
    error_console.print(f"[red]Error:[/red] {message}", markup=True)


def on_terminal() -> bool:
    """Whether the output goes to a terminal (a person reads it) rather than into a pipe or
    a file (a script does): rich's FORCE_COLOR, set for colours in CI logs, does not count."""
    isatty = getattr(console.file, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed file
        return False


def echo_wrapped(text: str, hang: str = "    ") -> None:
    """``text`` as it is, not markup; on a terminal wrapped between words, the lines after
    the first starting with ``hang``, a word too long for a line shortened in its middle.
    Piped, one line."""
    if not on_terminal():
        console.print(text, markup=False, soft_wrap=True)
        return
    room = max(console.width - cell_len(hang), 8)
    for index, line in enumerate(Text(elide_words(text, room)).wrap(console, room)):
        line.rstrip()
        console.print(Text(hang) + line if index else line, soft_wrap=True)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def binary_stdout() -> BinaryIO:
    """stdout for bytes (``click.get_binary_stream`` is deprecated since click 8.5)."""
    return sys.stdout.buffer


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    raw: bool = False,
    title: str | None = None,
    keep: Collection[str] = (),
) -> None:
    """Print rows under the given headers; ``raw`` gives tab-separated lines for scripts.

    On a terminal the table fits its width without breaking a word: when it is too wide,
    a two-column table puts each value that does not fit beside its key under it, and a
    wider one shares the width out between its columns, wrapping between words and
    shortening a word too long for its column in the middle ("/scratch/…/job/ab12"): a
    column of one word a cell (a label, a type) gives way before one of prose (a status, a
    description), and the columns named in ``keep`` (names a user types: an option, an entry
    point) stay whole while the others can give way.
    Piped, every value is whole and every row one line (cells of several lines aside),
    however wide: what ``grep`` wants."""
    if raw:
        for row in rows:
            click.echo("\t".join(_cell(v) for v in row))
        return
    cells = [[_cell(v) for v in row] for row in rows]
    width = console.width if on_terminal() else None
    if len(cells) > PLAIN_ROWS and title is None and _print_plain(columns, cells, width):
        return
    by_column = [[header, *(row[i] for row in cells)] for i, header in enumerate(columns)]
    naturals = [max(cell_len(line) for t in texts for line in t.split("\n")) for texts in by_column]
    gaps = 2 * (len(columns) - 1)
    if width is None:
        _print_unfolded(_table(columns, cells, [None] * len(columns), title))
    elif sum(naturals) + gaps <= width:
        console.print(_table(columns, cells, [None] * len(columns), title))
    elif len(columns) == 2 and title is None:
        _print_keyed(columns, cells, naturals[0], width)
    else:
        fits = [
            fit_column(texts[1:], natural, keep=header in keep)
            for header, texts, natural in zip(columns, by_column, naturals, strict=True)
        ]
        widths = share_widths(naturals, fits, width - gaps)
        shortened = [[elide_words(c, w) for c, w in zip(row, widths, strict=True)] for row in cells]
        headers = [elide_words(h, w) for h, w in zip(columns, widths, strict=True)]
        console.print(_table(headers, shortened, widths, title))


def _table(
    columns: Sequence[str], rows: list[list[str]], widths: Sequence[int | None], title: str | None
) -> Table:
    """Rich's table of these cells (as text, not markup), columns of the given widths."""
    table = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for column, width in zip(columns, widths, strict=True):
        table.add_column(column, overflow="fold", width=width)
    for cell_row in rows:
        table.add_row(*(Text(cell) for cell in cell_row), style=None)
    return table


def _print_unfolded(table: Table) -> None:
    """``table`` as wide as its cells make it, wider than the console or not."""
    wide = console.options.update_width(10**6)
    segments: list[Segment] = []
    for line in console.render_lines(table, wide, pad=False):
        segments += [*line, Segment.line()]
    console.print(Segments(segments), end="", soft_wrap=True)


def _print_keyed(columns: Sequence[str], rows: list[list[str]], key_width: int, width: int) -> None:
    """Keys and values, each value beside its key when it fits there, else on the lines
    under it, indented and wrapped between words."""
    key_width = min(key_width, width // 2)
    room = width - key_width - 2
    indent = 4
    lines = [Text(_pad(columns[0], key_width) + "  " + columns[1], style="bold")]
    for key, value in rows:
        parts = value.split("\n")
        label = _pad(elide_middle(key, key_width), key_width)
        if all(cell_len(part) <= room for part in parts):
            lines += [Text(label + "  " + parts[0])]
            lines += [Text(" " * (key_width + 2) + part) for part in parts[1:]]
            continue
        lines.append(Text(label.rstrip()))
        for part in parts:
            wrapped = Text(elide_words(part, width - indent)).wrap(console, width - indent)
            lines += [Text(" " * indent) + line for line in wrapped]
    for line in lines:
        line.rstrip()
        console.print(line)


def _pad(text: str, width: int) -> str:
    return text + " " * (width - cell_len(text))


def _print_plain(columns: Sequence[str], rows: list[list[str]], width: int | None) -> bool:
    """Lay out a long table as rich would (cells padded to their column, two spaces between
    columns), without rich's cost per cell (10 s for 18,000 rows of ``process list``); False,
    printing nothing, when it does not fit in ``width`` (None: any width fits)."""
    header_lengths = [cell_len(header) for header in columns]
    widths = list(header_lengths)
    # Measured once per cell: most are ASCII, whose width is their length.
    lengths = []
    for row in rows:
        row_lengths = []
        for index, cell in enumerate(row):
            if "\n" in cell:
                return False
            length = len(cell) if cell.isascii() else cell_len(cell)
            row_lengths.append(length)
            if length > widths[index]:
                widths[index] = length
        lengths.append(row_lengths)
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        return False

    def line(cells: Sequence[str], cell_lengths: Sequence[int]) -> str:
        return "  ".join(
            cell + " " * (room - length)
            for cell, length, room in zip(cells, cell_lengths, widths, strict=True)
        )

    header = line(columns, header_lengths)
    console.print(Text(header, style="bold"), soft_wrap=True)
    console.file.write(
        "".join(
            line(row, row_lengths) + "\n" for row, row_lengths in zip(rows, lengths, strict=True)
        )
    )
    console.file.flush()
    return True


raw_option = click.option(
    "-r", "--raw", is_flag=True, help="Print tab-separated values without headers, for scripts."
)


def is_interactive() -> bool:
    return sys.stdin.isatty()
