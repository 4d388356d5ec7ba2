"""How the CLI talks: one console, tables that can be raw, and one-line messages."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

import click
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["console", "echo_error", "echo_info", "echo_success", "echo_warning", "print_table"]

# Piped output is for scripts and logs: do not fold it to 80 columns.
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
) -> None:
    """Print rows under the given headers; ``raw`` gives tab-separated lines for scripts."""
    if raw:
        for row in rows:
            click.echo("\t".join(_cell(v) for v in row))
        return
    cells = [[_cell(v) for v in row] for row in rows]
    if len(cells) > PLAIN_ROWS and title is None and _print_plain(columns, cells):
        return
    table = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for cell_row in cells:
        table.add_row(*cell_row, style=None)
    console.print(table)


def _print_plain(columns: Sequence[str], rows: list[list[str]]) -> bool:
    """Lay out a long table as rich would (cells padded to their column, two spaces between
    columns), without rich's cost per cell (10 s for 18,000 rows of ``process list``); False,
    printing nothing, when it does not fit the console's width (rich then folds cells)."""
    widths = [cell_len(header) for header in columns]
    for row in rows:
        for index, cell in enumerate(row):
            if "\n" in cell:
                return False
            widths[index] = max(widths[index], cell_len(cell))
    if sum(widths) + 2 * (len(widths) - 1) > console.width:
        return False

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell + " " * (width - cell_len(cell)) for cell, width in zip(cells, widths, strict=True)
        )

    console.print(Text(line(columns), style="bold"))
    console.file.write("".join(line(row) + "\n" for row in rows))
    console.file.flush()
    return True


raw_option = click.option(
    "-r", "--raw", is_flag=True, help="Print tab-separated values without headers, for scripts."
)


def is_interactive() -> bool:
    return sys.stdin.isatty()
