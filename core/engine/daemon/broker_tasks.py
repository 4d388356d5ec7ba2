"""RabbitMQ through kiwipy: the profile's task queue, process RPCs and broadcasts.

Queue and exchange names carry the profile's id, so profiles sharing one RabbitMQ never see
each other's tasks. Every message is JSON (see :func:`encode`); a worker drops a task message
that is no veglia task (see :func:`task_problem`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from veglia.config.profile import Profile
from veglia.exceptions import BrokerError
from veglia.manage import get_profile

__all__ = [
    "create_communicator",
    "decode",
    "delete_broker_queues",
    "encode",
    "get_controller",
    "queue_names",
    "send_continue_task",
    "task_problem",
]

LOGGER = logging.getLogger("veglia.broker")
_communicators: dict[str, Any] = {}
#: Node ids are 32-bit integers in PostgreSQL; a larger pid could only fail in the database.
_MAX_PID = 2**31 - 1
#: How much of a dropped message's body its log line shows, to help find who sent it.
_EXCERPT = 24


def encode(value: Any) -> bytes:
    """The body of a message to the broker: JSON.

    kiwipy's default is YAML, whose loader builds Python objects (tuples, names of functions)
    from tags in whatever anyone with access to the broker publishes; JSON decodes to plain
    data only. Workers and senders share the queues, so every communicator uses this codec.
    """
    return json.dumps(value, separators=(",", ":")).encode()


def decode(body: bytes) -> Any:
    """A message body from the broker (see :func:`encode`)."""
    return json.loads(body)


def task_problem(body: bytes) -> str | None:
    """Why a task message's body is not a veglia task, or None when it is one."""
    try:
        envelope = decode(body)
    except (ValueError, RecursionError):  # RecursionError: nesting too deep for the decoder
        return "not JSON"
    # kiwipy sends a task as [task, no_reply], and unpacks it before any subscriber sees it.
    if not (isinstance(envelope, list) and len(envelope) == 2 and isinstance(envelope[1], bool)):
        return "not a [task, no_reply] pair"
    task = envelope[0]
    pid = task.get("pid") if isinstance(task, dict) else None
    if type(pid) is not int or not 0 < pid <= _MAX_PID:  # bool is an int too: exclude it
        return "its pid is no process id"
    return None


def queue_names(profile: Profile) -> dict[str, str]:
    prefix = f"veglia-{profile.id}"
    return {
        "message_exchange": f"{prefix}.messages",
        "task_exchange": f"{prefix}.tasks",
        "task_queue": f"{prefix}.process.queue",
    }


def delete_broker_queues(profile: Profile) -> None:
    """Delete the profile's task queue (with the tasks waiting in it) and its exchanges from
    its broker: what a profile that is thrown away would otherwise leave on RabbitMQ for
    good. Names that do not exist are no error; a profile without a broker has none."""
    if not profile.broker_url:
        return
    import aio_pika

    names = queue_names(profile)

    async def delete() -> None:
        connection = await aio_pika.connect(profile.broker_url, timeout=10)
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(names["task_queue"])
            await channel.exchange_delete(names["task_exchange"])
            await channel.exchange_delete(names["message_exchange"])

    try:
        asyncio.run(delete())
    except Exception as exc:
        raise BrokerError(
            f"Cannot delete the queues of profile {profile.name} at {profile.broker_url_masked}: "
            f"{exc}"
        ) from None


def create_communicator(
    profile: Profile, task_prefetch_count: int = 0, *, takes_tasks: bool = False
) -> Any:
    """A new kiwipy thread communicator for the profile's broker.

    ``takes_tasks`` for a worker's: its task consumer drops any message that is no veglia
    task, before kiwipy sees it (see :func:`_drop_foreign_tasks`).
    """
    from kiwipy.rmq import RmqThreadCommunicator

    try:
        communicator = RmqThreadCommunicator.connect(
            connection_params={"url": profile.broker_url},
            task_prefetch_count=task_prefetch_count,
            encoder=encode,
            decoder=decode,
            **queue_names(profile),
        )
    except Exception as exc:
        raise BrokerError(
            f"Cannot connect to the broker at {profile.broker_url_masked}: {exc}. Start RabbitMQ "
            "or unset broker.url."
        ) from None
    if takes_tasks:
        try:
            _drop_foreign_tasks(communicator, profile)
        except BaseException:
            communicator.close()
            raise
    return communicator


def _drop_foreign_tasks(communicator: Any, profile: Profile) -> None:
    """Reject, without requeueing, each task message that is no veglia task, in one log line.

    kiwipy decodes a task message before any subscriber sees it; one that does not decode (or
    does not unpack) raises in its consumer and is then neither acknowledged nor rejected: it
    holds one of the worker's prefetch slots until the connection closes, and is delivered
    again after it. Enough of them starve the worker, across restarts. So the check stands in
    front of kiwipy's consumer, which must be in place before the worker subscribes.
    A rejected message is gone, or dead-lettered if the queue has a dead-letter policy.
    A veglia task is then held as its delivery tag until its process ends (see
    :mod:`~veglia.engine.daemon.held_tasks`).
    """
    # Lazy: held_tasks imports kiwipy, which only a worker's communicator loads.
    from veglia.engine.daemon.held_tasks import hold

    async def install() -> None:
        # kiwipy has no hook for this: its task queue's consumer is replaced on the instance.
        task_queue = await communicator._communicator.get_default_task_queue()
        consumer = task_queue._subscriber
        take = consumer._on_task

        async def on_task(message: Any) -> None:
            problem = task_problem(message.body)
            if problem is None:
                task, no_reply = decode(message.body)
                if not await hold(consumer, message, task, no_reply):
                    await take(message)
                return
            LOGGER.warning(
                "dropped a task message that is no veglia task (%s; %d bytes: %r): something "
                "else publishes to this profile's task queue",
                problem,
                len(message.body),
                message.body[:_EXCERPT],
            )
            await message.reject(requeue=False)

        consumer._on_task = on_task

    try:
        asyncio.run_coroutine_threadsafe(install(), communicator.loop()).result(timeout=60)
    except AttributeError as exc:
        import kiwipy

        raise BrokerError(
            f"This kiwipy ({kiwipy.__version__}) is not one veglia can guard its task queue in "
            f"({exc}): a worker would hang on a message it cannot decode. Install kiwipy 0.9."
        ) from None
    except Exception as exc:
        raise BrokerError(
            f"Cannot open the task queue on the broker at {profile.broker_url_masked}: {exc}. "
            "Check that RabbitMQ runs."
        ) from None


def _shared(profile: Profile) -> Any:
    communicator = _communicators.get(profile.id)
    if communicator is None:
        communicator = _communicators[profile.id] = create_communicator(profile)
    return communicator


def send_continue_task(url: str, pk: int, patience: float = 60.0) -> None:
    """Queue the process for a daemon worker (acknowledged when it terminates).

    A broker that is restarting is waited for, up to ``patience`` seconds, on a new
    connection each try.
    """
    import time

    profile = get_profile()
    deadline = time.monotonic() + patience
    delay = 0.5
    while True:
        try:
            _shared(profile).task_send({"pid": pk}, no_reply=True)
            return
        except Exception as exc:
            stale = _communicators.pop(profile.id, None)
            if stale is not None:
                with contextlib.suppress(Exception):
                    stale.close()
            if time.monotonic() + delay > deadline:
                raise BrokerError(
                    f"Process {pk} is stored but could not be handed to the daemon: the broker "
                    f"at {profile.broker_url_masked} did not take it ({exc}). Once it is back, "
                    f"`veglia process play {pk}` or restart the daemon."
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def get_controller() -> Any:
    """plumpy's controller for kill/pause/play RPCs to the worker running a process."""
    import plumpy

    return plumpy.RemoteProcessThreadController(_shared(get_profile()))


#: Run by :func:`_close` before the communicators go: the task pipeline's flush, which it
#: registers (it imports this module, so this one names it not).
_before_close: list[Callable[[], object]] = []


def before_close(callback: Callable[[], object]) -> None:
    """Have ``callback`` run at exit (or :func:`_close`) while the communicators are open."""
    _before_close.append(callback)


@atexit.register
def _close() -> None:
    # Submitted tasks the broker has yet to confirm first (even with no communicator left:
    # a refused task is then sent again on a new one).
    for callback in _before_close:
        callback()
    for communicator in _communicators.values():
        with contextlib.suppress(Exception):  # at interpreter exit: nothing left to tell
            communicator.close()
    _communicators.clear()
