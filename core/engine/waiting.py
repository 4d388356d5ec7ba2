"""A WAITING state whose work can be interrupted by a kill or a pause."""

from __future__ import annotations

import asyncio
from typing import Any

import plumpy

__all__ = ["InterruptibleWaiting"]


@plumpy.persistence.auto_persist("msg", "data")
class InterruptibleWaiting(plumpy.process_states.Waiting):
    """WAITING that runs a coroutine (``execute``), which kill and pause interrupt."""

    def __init__(self, process: Any, done_callback: Any, msg: str | None = None, data: Any = None):
        super().__init__(process, done_callback, msg, data)
        self._interruption: asyncio.Future | None = None

    def load_instance_state(self, saved_state: Any, load_context: Any) -> None:
        super().load_instance_state(saved_state, load_context)
        self._interruption = None

    def interrupt(self, reason: Any) -> None:
        if self._interruption is not None and not self._interruption.done():
            self._interruption.set_exception(reason)

    async def _interruptible(self, coroutine: Any, *, finish_first: bool) -> Any:
        """Await ``coroutine`` unless kill/pause comes first.

        With ``finish_first`` a transport call already under way is let finish (a submit
        that ran must be recorded) before the interruption is raised.
        """
        self._interruption = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(coroutine)
        try:
            await asyncio.wait({task, self._interruption}, return_when=asyncio.FIRST_COMPLETED)
            if self._interruption.done():
                if finish_first:
                    await asyncio.wait({task})
                else:
                    task.cancel()
                self._interruption.result()  # raises the interruption
            return task.result()
        finally:
            self._interruption = None
