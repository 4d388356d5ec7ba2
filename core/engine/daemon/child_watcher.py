"""Waiting for processes to terminate, wherever they run: one query per interval for all.

A workflow's children may run in another daemon worker, so their end is read from the
database rather than from in-memory futures; every waiting workflow of a worker shares the
one query. Dehydrated workflows (``ChildrenSleep``) are looked at less often
(``SLEEPER_INTERVAL``), and at once when a child ends in this worker; once all of a
sleeper's children have ended it is woken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import sqlalchemy as sa

from veglia.engine.dehydration import ChildrenSleep, Sleeps, Wake
from veglia.engine.metrics import METRICS
from veglia.manage import get_storage
from veglia.orm.process_nodes import TERMINAL_STATES
from veglia.storage.models import Node
from veglia.storage.outage import is_storage_outage, wait_for_storage

__all__ = ["SLEEPER_INTERVAL", "ChildWatcher"]

LOGGER = logging.getLogger("veglia.engine")

#: Seconds between two looks at the children of dehydrated workflows.
SLEEPER_INTERVAL = 2.0
#: Process ids per query (SQLite allows 32,766 parameters in a statement).
CHUNK = 10_000


class ChildWatcher:
    """``await watcher.wait([pk, ...])`` returns once every process has terminated."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self._waiters: dict[int, list[asyncio.Future[Any]]] = {}
        self._task: asyncio.Task[Any] | None = None
        self._wake: asyncio.Event | None = None
        #: Dehydrated workflows by pk, and which of them wait on each child.
        self._sleepers: dict[int, ChildrenSleep] = {}
        self._parents: dict[int, list[int]] = {}
        self._sleepers_seen = float("-inf")
        #: Children of sleepers that ended in this worker since the last look.
        self._ended_here: list[int] = []
        #: Where sleepers are woken (``Runner.sleeps``, set by the worker).
        self.sleeps: Sleeps | None = None

    def wake(self, pk: int | None = None) -> None:
        """Process ``pk`` on this loop terminated: look now rather than at the next interval
        (children on other workers are still found within one interval)."""
        child_of_sleeper = pk is not None and pk in self._parents
        if child_of_sleeper:
            self._ended_here.append(pk)  # type: ignore[arg-type]  # not None, as tested
        if self._wake is not None and (self._waiters or child_of_sleeper):
            self._wake.set()

    def sleep(self, sleep: ChildrenSleep) -> None:
        """Watch a dehydrated workflow's children; wake it once they have all ended."""
        sleep.keeper = self
        self._sleepers[sleep.pk] = sleep
        for child in sleep.children:
            self._parents.setdefault(child, []).append(sleep.pk)
        self._sleepers_seen = float("-inf")
        self._start(asyncio.get_running_loop())

    def forget(self, sleep: ChildrenSleep) -> None:
        if self._sleepers.get(sleep.pk) is not sleep:
            return
        del self._sleepers[sleep.pk]
        for child in sleep.children:
            parents = self._parents.get(child)
            if parents is not None:
                with contextlib.suppress(ValueError):
                    parents.remove(sleep.pk)
                if not parents:
                    del self._parents[child]

    @property
    def sleeping(self) -> int:
        return len(self._sleepers)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._watch())

    async def wait(self, pks: list[int]) -> None:
        loop = asyncio.get_running_loop()
        futures = []
        for pk in pks:
            future = loop.create_future()
            self._waiters.setdefault(pk, []).append(future)
            futures.append(future)
        self._start(loop)
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
        found: list[int] = []
        with get_storage().session() as session:
            for start in range(0, len(pks), CHUNK):
                found += session.scalars(
                    sa.select(Node.id).where(
                        Node.id.in_(pks[start : start + CHUNK]),
                        Node.process_state.in_(TERMINAL_STATES),
                    )
                )
        return found

    def _wake_sleepers(self, terminated: list[int]) -> None:
        """Wake the dehydrated workflows whose children have now all ended."""
        ended = set(terminated)
        candidates = {parent for pk in ended for parent in self._parents.get(pk, ())}
        for parent in candidates:
            sleep = self._sleepers.get(parent)
            if sleep is None:
                continue
            if all(child in ended or child not in self._parents for child in sleep.children):
                self.forget(sleep)
                if self.sleeps is not None:
                    self.sleeps.wake(parent, Wake())
        for pk in ended:
            self._parents.pop(pk, None)

    async def _watch(self) -> None:
        while self._waiters or self._sleepers:
            now = asyncio.get_running_loop().time()
            look_at = list(self._waiters)
            with_sleepers = bool(self._sleepers) and now - self._sleepers_seen >= SLEEPER_INTERVAL
            if with_sleepers:
                look_at = sorted(set(look_at) | self._parents.keys())
            try:
                terminated = self._terminated(look_at) if look_at else []
            except Exception as exc:
                if not is_storage_outage(exc):
                    raise
                LOGGER.warning("cannot see whether child processes ended: %s", exc)
                await wait_for_storage()
                continue
            if with_sleepers:
                self._sleepers_seen = now
            ended_here, self._ended_here = self._ended_here, []
            if with_sleepers or ended_here:
                self._wake_sleepers([*terminated, *ended_here] if with_sleepers else ended_here)
            for pk in terminated:
                for future in self._waiters.pop(pk, []):
                    if not future.done():
                        future.set_result(None)
            if (self._waiters or self._sleepers) and self._wake is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval)
                self._wake.clear()
