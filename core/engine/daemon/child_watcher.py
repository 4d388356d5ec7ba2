"""Waiting for processes to terminate, wherever they run: one query per interval for all.

A workflow's children may run in another daemon worker, so their end is read from the
database rather than from in-memory futures; every waiting workflow of a worker shares the
one query.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import sqlalchemy as sa

from veglia.engine.metrics import METRICS
from veglia.manage import get_storage
from veglia.orm.process_nodes import TERMINAL_STATES
from veglia.storage.models import Node
from veglia.storage.outage import is_storage_outage, wait_for_storage

__all__ = ["ChildWatcher"]

LOGGER = logging.getLogger("veglia.engine")


class ChildWatcher:
    """``await watcher.wait([pk, ...])`` returns once every process has terminated."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self._waiters: dict[int, list[asyncio.Future[Any]]] = {}
        self._task: asyncio.Task[Any] | None = None
        self._wake: asyncio.Event | None = None

    def wake(self) -> None:
        """A process on this loop terminated: look now rather than at the next interval
        (children on other workers are still found within one interval)."""
        if self._wake is not None and self._waiters:
            self._wake.set()

    async def wait(self, pks: list[int]) -> None:
        loop = asyncio.get_running_loop()
        futures = []
        for pk in pks:
            future = loop.create_future()
            self._waiters.setdefault(pk, []).append(future)
            futures.append(future)
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._watch())
        try:
            await asyncio.gather(*futures)
        finally:
            for pk, future in zip(pks, futures, strict=True):
                with contextlib.suppress(KeyError, ValueError):
                    self._waiters[pk].remove(future)
                    if not self._waiters[pk]:
                        del self._waiters[pk]

    def _terminated(self, pks: list[int]) -> list[int]:

        METRICS.child_queries += 1
        with get_storage().session() as session:
            return list(
                session.scalars(
                    sa.select(Node.id).where(
                        Node.id.in_(pks), Node.process_state.in_(TERMINAL_STATES)
                    )
                )
            )

    async def _watch(self) -> None:
        while self._waiters:
            try:
                terminated = self._terminated(list(self._waiters))
            except Exception as exc:
                if not is_storage_outage(exc):
                    raise
                LOGGER.warning("cannot see whether child processes ended: %s", exc)
                await wait_for_storage()
                continue
            for pk in terminated:
                for future in self._waiters.pop(pk, []):
                    if not future.done():
                        future.set_result(None)
            if self._waiters and self._wake is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval)
                self._wake.clear()
