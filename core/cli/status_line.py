"""The live status line of a job run in the foreground (``veglia shell``, ``verify --rerun``,
``engine.run`` in a ``veglia run`` script): its state, what it is doing and the time so far,
on stderr, and only when stderr is a terminal (see :mod:`veglia.cli.progress_bars` for the
long commands' bars)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.status import Status

from veglia.cli.output import error_console
from veglia.engine.launch import watching
from veglia.storage.times import format_seconds
from veglia.views.rows import format_state, process_status

if TYPE_CHECKING:
    from veglia.engine.process import Process

__all__ = ["status_line", "status_text"]


def status_text(process: Process, elapsed: float) -> str:
    """``process 12 ⏵ Waiting · scheduler: running · 1m 5s``: its state, what it is doing
    (as ``process list``'s status column says it) and the time it has taken so far."""
    node = process.node
    if node is None:
        return f"starting · {format_seconds(elapsed)}"
    attributes = node.attributes
    state = format_state(node.process_state, node.exit_status, node.paused)
    status = process_status(node.process_state, attributes)
    parts = [f"process {node.pk} {state}", status, format_seconds(elapsed)]
    return " · ".join(part for part in parts if part)


@contextmanager
def status_line() -> Iterator[None]:
    """A live status line while a ``run`` in this block waits for its process (see
    :func:`veglia.engine.launch.watching`), gone when the run ends (a script's next print
    comes where it was); nothing when stderr is no terminal."""
    if not error_console.is_terminal:
        yield
        return
    shown: list[tuple[Status, float]] = []  # the line of the run under way, and its start

    def hide() -> None:
        if shown:
            shown.pop()[0].stop()

    def update(process: Process) -> None:
        if process.has_terminated() or process.node is None or process.node.is_terminated:
            hide()
            return
        if not shown:
            status = error_console.status("starting…")
            status.start()
            shown.append((status, time.monotonic()))
        status, started = shown[0]
        status.update(escape(status_text(process, time.monotonic() - started)))

    try:
        with watching(update):
            yield
    finally:
        hide()
