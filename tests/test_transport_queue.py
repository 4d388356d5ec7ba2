"""The transport queue shares one connection, throttles opens, and closes idle connections."""

from __future__ import annotations

import asyncio
import time

from veglia.engine.metrics import METRICS
from veglia.engine.transport_queue import TransportQueue
from veglia.plugins.transports.local import LocalTransport


class CountingTransport(LocalTransport):
    """The local transport, remembering when it was opened."""

    def __init__(self) -> None:
        super().__init__()
        self.opened_at: list[float] = []

    def open(self) -> None:
        self.opened_at.append(time.monotonic())
        super().open()


def test_concurrent_tasks_share_one_open_connection():
    transport = CountingTransport()
    queue = TransportQueue(idle_timeout=10)

    async def task(i: int) -> str:
        async with queue.lease(("c", 1), lambda: transport, safe_interval=0.0) as lease:
            await asyncio.sleep(0.01)
            return (await lease.run(transport.exec_command, f"echo {i}"))[1]

    async def main() -> list[str]:
        return await asyncio.gather(*(task(i) for i in range(50)))

    results = asyncio.run(main())
    assert results == [f"{i}\n" for i in range(50)]
    assert len(transport.opened_at) == 1


def test_safe_interval_is_a_minimum_between_opens_not_a_delay_per_use():
    transport = CountingTransport()
    queue = TransportQueue(idle_timeout=0.05)

    async def use() -> float:
        start = time.monotonic()
        async with queue.lease(("c", 1), lambda: transport, safe_interval=1.0):
            pass
        return time.monotonic() - start

    async def main() -> tuple[float, float, float]:
        first = await use()  # opens at once
        second = await use()  # still open: no wait
        await asyncio.sleep(0.2)  # idle: closed
        assert not transport.is_open
        third = await use()  # reopens, but not within 1 s of the first open
        return first, second, third

    first, second, third = asyncio.run(main())
    assert first < 0.5 and second < 0.05
    assert len(transport.opened_at) == 2
    assert transport.opened_at[1] - transport.opened_at[0] >= 1.0
    assert third >= 0.5  # it waited for the rest of the interval


def test_idle_connection_is_closed_and_a_busy_one_is_not():
    transport = CountingTransport()
    queue = TransportQueue(idle_timeout=0.1)

    async def main() -> None:
        async with queue.lease(("c", 1), lambda: transport, safe_interval=0.0):
            await asyncio.sleep(0.3)  # in use longer than the idle timeout
            assert transport.is_open
        await asyncio.sleep(0.3)
        assert not transport.is_open

    asyncio.run(main())


def test_new_settings_get_a_new_connection_and_the_old_one_closes_when_idle():
    made: list[CountingTransport] = []

    def factory() -> CountingTransport:
        made.append(CountingTransport())
        return made[-1]

    queue = TransportQueue(idle_timeout=60)
    opens = METRICS.transport_opens

    async def main() -> None:
        async with queue.lease(("c", 1), factory, 0.0, version="port 1") as old:
            async with queue.lease(("c", 1), factory, 0.0, version="port 2") as new:
                assert new.transport is not old.transport and len(made) == 2
                assert old.transport.is_open  # in use: left to its task
            await old.run(old.transport.exec_command, "true")
        await asyncio.sleep(0.1)  # closed on its own thread once its last user is done
        assert not made[0].is_open and made[1].is_open
        async with queue.lease(("c", 1), factory, 0.0, version="port 2") as same:
            assert same.transport is made[1]
        assert METRICS.transport_opens == opens + 2  # what `daemon status` reports

    asyncio.run(main())
    queue.close()
