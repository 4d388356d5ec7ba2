"""The live status line of a job run in the foreground (``veglia shell``, ``verify --rerun``):
its state, what it is doing and the time so far, on stderr, and only when stderr is a
terminal (see :mod:`veglia.cli.progress_bars` for the long commands' bars)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.markup import escape

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
    :func:`veglia.engine.launch.watching`); nothing when stderr is no terminal."""
    if not error_console.is_terminal:
        yield
        return
    started = time.monotonic()
    with error_console.status("starting…") as status:

        def update(process: Process) -> None:
            status.update(escape(status_text(process, time.monotonic() - started)))

        with watching(update):
            yield
