"""How the CLI talks: one console, tables that can be raw, and one-line messages."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

__all__ = ["console", "echo_error", "echo_info", "echo_success", "echo_warning", "print_table"]

# Piped output is for scripts and logs: do not fold it to 80 columns.
_WIDTH = None if sys.stdout.isatty() else 240
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
    table = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(v) for v in row), style=None)
    console.print(table)


raw_option = click.option(
    "--raw", is_flag=True, help="Print tab-separated values without headers, for scripts."
)


def is_interactive() -> bool:
    return sys.stdin.isatty()
