"""RabbitMQ through kiwipy: the profile's task queue, process RPCs and broadcasts.

Queue and exchange names carry the profile's id, so profiles sharing one RabbitMQ never see
each other's tasks.
"""

from __future__ import annotations

import atexit
import contextlib
from typing import Any

from veglia.config.profile import Profile
from veglia.exceptions import BrokerError

__all__ = ["create_communicator", "get_controller", "queue_names", "send_continue_task"]

_communicators: dict[str, Any] = {}


def queue_names(profile: Profile) -> dict[str, str]:
    prefix = f"veglia-{profile.id}"
    return {
        "message_exchange": f"{prefix}.messages",
        "task_exchange": f"{prefix}.tasks",
        "task_queue": f"{prefix}.process.queue",
    }


def create_communicator(profile: Profile, task_prefetch_count: int = 0) -> Any:
    """A new kiwipy thread communicator for the profile's broker."""
    from kiwipy.rmq import RmqThreadCommunicator

    try:
        return RmqThreadCommunicator.connect(
            connection_params={"url": profile.broker_url},
            task_prefetch_count=task_prefetch_count,
            **queue_names(profile),
        )
    except Exception as exc:
        raise BrokerError(
            f"Cannot connect to the broker at {profile.broker_url_masked}: {exc}. Start RabbitMQ "
            "or unset broker.url."
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

    from veglia.manage import get_profile

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

    from veglia.manage import get_profile

    return plumpy.RemoteProcessThreadController(_shared(get_profile()))


@atexit.register
def _close() -> None:
    for communicator in _communicators.values():
        with contextlib.suppress(Exception):  # at interpreter exit: nothing left to tell
            communicator.close()
    _communicators.clear()
