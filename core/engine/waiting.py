"""A WAITING state whose work can be interrupted by a kill or a pause."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Any, TypeVar

import plumpy

__all__ = ["InterruptibleWaiting"]

T = TypeVar("T")


@plumpy.persistence.auto_persist("msg", "data")
class InterruptibleWaiting(plumpy.process_states.Waiting):
    """WAITING that runs a coroutine (``execute``), which kill and pause interrupt."""

    #: The task awaiting an interruptible coroutine (see ``_interruptible``).
    _inline: _Inline | None = None

    def load_instance_state(self, saved_state: Any, load_context: Any) -> None:
        super().load_instance_state(saved_state, load_context)
        self._inline = None

    def interrupt(self, reason: Any) -> None:
        inline = self._inline
        if inline is not None and inline.reason is None:
            inline.reason = reason
            if inline.finish_first:
                return  # raised once the coroutine has ended
            # Not at once: called from within the task itself, a cancellation would only be
            # delivered at its next await, which may come after the coroutine has ended.
            inline.task.get_loop().call_soon(self._cancel_inline, inline)

    def _cancel_inline(self, inline: _Inline) -> None:
        # Still awaiting the coroutine, and not in a call it must let finish: cancel it.
        if self._inline is inline and not inline.finish_first:
            inline.cancelled = inline.task.cancel()

    async def before_a_call(self, awaitable: Awaitable[T]) -> T:
        """Await what comes before a call of the coroutine under way has begun on the
        computer (a transport task's back-off, its wait for the connection and the
        connection's opening): a kill or pause ends it at once, even in a coroutine whose
        calls are let finish (``finish_first``): only a call under way may delay it."""
        inline = self._inline
        if inline is None or inline.task is not asyncio.current_task():
            return await awaitable
        if inline.reason is not None:  # it came while the last call ran: no further attempt
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise inline.reason
        finish_first, inline.finish_first = inline.finish_first, False
        try:
            return await awaitable
        finally:
            inline.finish_first = finish_first

    async def _interruptible(self, coroutine: Any, *, finish_first: bool) -> Any:
        """Await ``coroutine`` in this task; an interruption (kill, pause) is raised.

        Without ``finish_first`` the interruption cancels the coroutine. With it, a
        transport call already under way is let finish (a submit that ran must be
        recorded), and the interruption is raised after.

        No task, future or callbacks of its own: a calc job polls its scheduler job here
        for as long as the job is queued and runs, and a worker holds thousands of them.
        """
        inline = self._inline = _Inline(asyncio.current_task(), finish_first)  # type: ignore[arg-type]
        try:
            result = await coroutine
        except asyncio.CancelledError:
            if not inline.cancelled:
                raise  # cancelled from outside (the worker drops the process)
            inline.uncancel()
            raise inline.reason from None
        finally:
            self._inline = None
        if inline.reason is not None:  # it came while the coroutine ran to its end
            inline.uncancel()
            raise inline.reason
        return result


class _Inline:
    """The task awaiting an interruptible coroutine, and the interruption once it came."""

    __slots__ = ("cancelled", "finish_first", "reason", "task")

    def __init__(self, task: asyncio.Task[Any], finish_first: bool) -> None:
        self.task = task
        self.finish_first = finish_first
        self.reason: Any = None
        self.cancelled = False

    def uncancel(self) -> None:
        """Our cancellation is handled: the task is not being cancelled any more (Python
        3.11+ counts the requests; ``asyncio.timeout`` in the task relies on the count)."""
        uncancel = getattr(self.task, "uncancel", None)
        if self.cancelled and uncancel is not None:
            uncancel()
