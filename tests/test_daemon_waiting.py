"""What a daemon worker keeps of a waiting job, slimmed for memory, behaves as before: kill
and pause interrupt a waiting step, the task bridge carries outcomes across loops, a held
task is acknowledged when its process ends, a worker's processes get their RPCs. Without a
database, and but for the RPCs (the real RabbitMQ) without a broker: the parts alone."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from types import SimpleNamespace

import pytest
from plumpy.process_states import KillInterruption

from veglia.engine.daemon.task_bridge import task_bridge
from veglia.engine.waiting import InterruptibleWaiting


def _waiting() -> InterruptibleWaiting:
    return InterruptibleWaiting(SimpleNamespace(), None, msg="test", data=None)


async def _until_inside(state: InterruptibleWaiting) -> None:
    while state._inline is None:
        await asyncio.sleep(0)


@pytest.mark.parametrize("finish_first", [False, True])
def test_an_interruption_ends_the_wait_with_its_reason(finish_first):
    async def scenario() -> None:
        state = _waiting()
        never = asyncio.get_running_loop().create_future()
        step = asyncio.ensure_future(state._interruptible(never, finish_first=finish_first))
        await _until_inside(state)
        state.interrupt(KillInterruption("killed"))
        if finish_first:
            await asyncio.sleep(0.01)
            assert not step.done()  # the transport call in flight is let finish
            never.set_result("submitted")
        with pytest.raises(KillInterruption):
            await step
        if not finish_first:
            assert never.cancelled()  # a poll is not waited for
        assert step.cancelling() == 0 if hasattr(step, "cancelling") else True

    asyncio.run(scenario())


def test_the_task_goes_on_normally_after_an_interruption():
    """The cancellation behind an interruption is the state's own: it does not leak into
    what the task awaits next (the next state, or the worker's own waits)."""

    async def scenario() -> None:
        state = _waiting()

        async def step() -> str:
            with pytest.raises(KillInterruption):
                await state._interruptible(asyncio.sleep(3600), finish_first=False)
            await asyncio.sleep(0.01)  # would raise CancelledError on a stray cancellation
            return "went on"

        task = asyncio.ensure_future(step())
        await _until_inside(state)
        state.interrupt(KillInterruption("killed"))
        assert await task == "went on"

    asyncio.run(scenario())


def test_an_interruption_from_within_the_awaited_coroutine_is_raised():
    async def scenario() -> None:
        state = _waiting()

        async def poll() -> str:
            state.interrupt(KillInterruption("a monitor killed it"))
            return "polled"

        with pytest.raises(KillInterruption):
            await state._interruptible(poll(), finish_first=False)
        await asyncio.sleep(0.01)  # no cancellation left pending on this task

    asyncio.run(scenario())


def test_a_cancellation_from_outside_is_not_taken_for_an_interruption():
    async def scenario() -> None:
        state = _waiting()
        task = asyncio.ensure_future(state._interruptible(asyncio.sleep(3600), finish_first=False))
        await _until_inside(state)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert state._inline is None

    asyncio.run(scenario())


def _other_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return loop, thread


@pytest.mark.parametrize("outcome", ["result", "error"])
def test_the_task_bridge_runs_the_subscriber_on_its_loop_and_hands_back_the_outcome(outcome):
    worker_loop, thread = _other_loop()
    seen = {}

    async def subscriber(communicator, task):
        seen["loop"] = asyncio.get_running_loop()
        if outcome == "error":
            raise ValueError(task["pid"])
        return task["pid"] * 2

    bridged = task_bridge(subscriber, worker_loop)

    async def as_kiwipy() -> object:  # kiwipy calls the subscriber on its loop, awaits there
        return await bridged(None, {"pid": 21})

    try:
        if outcome == "error":
            with pytest.raises(ValueError):
                asyncio.run(as_kiwipy())
        else:
            assert asyncio.run(as_kiwipy()) == 42
        assert seen["loop"] is worker_loop
    finally:
        worker_loop.call_soon_threadsafe(worker_loop.stop)
        thread.join(5)
        worker_loop.close()


def test_the_task_bridge_leaves_a_dropped_process_unanswered():
    """A subscriber cancelled on the worker's loop (its process dropped) neither
    acknowledges nor rejects the task, as with plumpy's chain of futures."""
    worker_loop, thread = _other_loop()

    async def subscriber(communicator, task):
        raise asyncio.CancelledError

    bridged = task_bridge(subscriber, worker_loop)

    async def as_kiwipy() -> bool:
        future = bridged(None, {"pid": 1})
        await asyncio.sleep(0.2)
        return future.done()

    try:
        assert asyncio.run(as_kiwipy()) is False
    finally:
        worker_loop.call_soon_threadsafe(worker_loop.stop)
        thread.join(5)
        worker_loop.close()


class _Channel:
    def __init__(self) -> None:
        self.is_closed = False
        self.acked: list[int] = []

    async def basic_ack(self, delivery_tag: int) -> None:
        self.acked.append(delivery_tag)


def _held(outcome_of, *, no_reply: bool = True, subscribers: int = 1):
    """Hand one task to ``hold`` with a subscriber returning ``outcome_of(loop)``; the
    channel and what ``hold`` returned."""
    from veglia.engine.daemon.held_tasks import hold

    channel = _Channel()
    message = SimpleNamespace(channel=channel, delivery_tag=7)
    consumer = SimpleNamespace(
        _subscribers={i: (lambda _c, _t: outcome_of()) for i in range(subscribers)}
    )
    return channel, message, consumer, hold


def test_a_held_task_is_acknowledged_when_its_outcome_is_done_and_not_before():
    async def scenario() -> None:
        outcome = asyncio.get_running_loop().create_future()
        channel, message, consumer, hold = _held(lambda: outcome)
        assert await hold(consumer, message, {"pid": 1}, True)
        await asyncio.sleep(0.01)
        assert channel.acked == []  # the process still runs
        outcome.set_result(True)
        await asyncio.sleep(0.01)
        assert channel.acked == [7]

    asyncio.run(scenario())


def test_a_held_task_whose_outcome_is_cancelled_stays_unacknowledged():
    async def scenario() -> None:
        outcome = asyncio.get_running_loop().create_future()
        channel, message, consumer, hold = _held(lambda: outcome)
        assert await hold(consumer, message, {"pid": 1}, True)
        outcome.cancel()
        await asyncio.sleep(0.01)
        assert channel.acked == []

    asyncio.run(scenario())


@pytest.mark.parametrize(("no_reply", "subscribers"), [(False, 1), (True, 2)])
def test_a_task_held_otherwise_goes_to_kiwipy(no_reply, subscribers):
    async def scenario() -> None:
        channel, message, consumer, hold = _held(lambda: None, subscribers=subscribers)
        assert not await hold(consumer, message, {"pid": 1}, no_reply)
        assert channel.acked == []

    asyncio.run(scenario())


def test_a_task_goes_to_kiwipy_when_its_consumer_lacks_the_subscriber_table():
    """A kiwipy whose consumer keeps its subscribers elsewhere: its own path, no error."""

    async def scenario() -> None:
        channel, message, _consumer, hold = _held(lambda: None)
        assert not await hold(SimpleNamespace(), message, {"pid": 1}, True)
        assert channel.acked == []

    asyncio.run(scenario())


def test_a_workers_rpcs_reach_its_processes_through_one_binding(rabbitmq_url):
    """On the real broker: a worker's queue, bound once, takes the RPCs of its processes by
    its lease's token and their pk; one for a process it no longer runs is answered with an
    error; one for a worker that does not exist routes nowhere. Starting and ending a
    process costs the broker nothing."""
    import kiwipy
    from kiwipy.rmq import RmqThreadCommunicator

    from veglia.engine.daemon.rpc_queue import SharedRpcQueue, rpc_recipient

    def answer(future):
        result = future.result(timeout=10)
        while isinstance(result, concurrent.futures.Future):
            result = result.result(timeout=10)
        return result

    worker = RmqThreadCommunicator.connect(connection_params={"url": rabbitmq_url})
    sender = RmqThreadCommunicator.connect(connection_params={"url": rabbitmq_url})
    try:
        queue = SharedRpcQueue(worker, "t0ken42")
        for pk in (1, 2, 3):
            queue.add(lambda _communicator, message, pk=pk: f"{pk} got {message}", pk)
        queue.remove(3)
        holder = "a-host/4242/t0ken42/5pace"
        assert answer(sender.rpc_send(rpc_recipient(2, holder), "hi")) == "2 got hi"
        assert answer(sender.rpc_send(rpc_recipient(1, holder), "ho")) == "1 got ho"
        with pytest.raises(kiwipy.RemoteException, match="no longer run by this worker"):
            answer(sender.rpc_send(rpc_recipient(3, holder), "hi"))
        with pytest.raises(kiwipy.UnroutableError):
            answer(sender.rpc_send(rpc_recipient(1, "a-host/4243/other/5pace"), "hi"))
    finally:
        sender.close()
        worker.close()
