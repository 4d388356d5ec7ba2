"""One read of watched files per cycle for all jobs of one computer.

A poll wakes every job of a computer at once; each job's monitor cycle asks for the files
its ``watch_files`` monitors need. The batcher lets them all ask (until no job has added a
request for a few turns of the event loop), then makes one ``Transport.read_files`` call
for all of them (one remote command over SSH) and hands each job its answers.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from veglia.engine.metrics import METRICS
from veglia.file_reads import DEFAULT_BUDGET

if TYPE_CHECKING:
    from veglia.engine.transport_queue import TransportLender
    from veglia.orm.computers import Computer

__all__ = ["FileBatcher"]

#: Event-loop turns without a new request after which a batch is read.
QUIET_TURNS = 3
#: The longest a request waits for others to join it, in seconds.
GATHER = 0.2


class FileBatcher:
    """Gathers the read requests of many jobs into one transport call."""

    def __init__(
        self, runner: TransportLender, computer: Computer, budget: int = DEFAULT_BUDGET
    ) -> None:
        self.runner = runner
        self.computer = computer
        self.budget = budget
        self._pending: list[tuple[list[dict[str, Any]], asyncio.Future[Any]]] = []
        self._task: asyncio.Task[Any] | None = None

    async def read(self, requests: list[dict[str, Any]]) -> list[Any]:
        """The answers to ``requests``, read together with other jobs' requests."""
        future = asyncio.get_running_loop().create_future()
        self._pending.append((requests, future))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._read_batches())
        result: list[Any] = await future
        return result

    async def _gather(self) -> None:
        count, quiet, deadline = -1, 0, time.monotonic() + GATHER
        while quiet < QUIET_TURNS and time.monotonic() < deadline:
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._pending) == count else 0
            count = len(self._pending)

    async def _read_batches(self) -> None:
        while self._pending:
            await self._gather()
            batch, self._pending = self._pending, []
            payload = {"budget": self.budget, "requests": [r for rs, _ in batch for r in rs]}
            try:
                async with self.runner.lease_transport(self.computer) as lease:
                    METRICS.file_reads += 1
                    answers = await lease.run(lease.transport.read_files, payload)
            except Exception as exc:  # every job of the batch logs it and goes on
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            start = 0
            for requests, future in batch:
                if not future.done():
                    future.set_result(answers[start : start + len(requests)])
                start += len(requests)
