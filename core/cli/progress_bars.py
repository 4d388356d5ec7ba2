"""Progress bars for long commands (archive create and import, verify, storage maintain): on
stderr, and only when stderr is a terminal; a pipe or a log file gets the command's result
alone. The work reports through a :data:`~veglia.progress_report.ProgressReport`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from veglia.cli.output import error_console
from veglia.progress_report import ProgressReport, no_progress

__all__ = ["progress_bars"]


@contextmanager
def progress_bars() -> Iterator[ProgressReport]:
    """A :data:`~veglia.progress_report.ProgressReport` that draws one bar per part of the
    work, gone once it ends (the command's summary stays); on no terminal, one that does
    nothing."""
    if not error_console.is_terminal:
        yield no_progress
        return
    bars = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console,
        transient=True,
    )
    tasks: dict[str, TaskID] = {}

    def report(what: str, done: int, total: int | None) -> None:
        task = tasks.get(what)
        if task is None:
            task = tasks[what] = bars.add_task(what, total=total)
        bars.update(task, completed=done, total=total)

    with bars:
        yield report
