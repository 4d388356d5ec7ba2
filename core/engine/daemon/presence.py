"""Whether a daemon runs for the profile: submitting, watching or listing processes says so
when none does, rather than leave them waiting in silence.

A daemon runs when this host's supervisor is alive; else, with a broker, when a worker
(of any host) consumes the profile's task queue; without one, when a worker (of any host)
renewed a lease lately. The answer is kept a few seconds, so a loop of submissions asks
once.
"""

from __future__ import annotations

import time

from veglia.config.profile import Profile
from veglia.engine.daemon import leases
from veglia.engine.daemon.broker_tasks import queue_names
from veglia.engine.daemon.files import DaemonFiles
from veglia.manage import get_profile

__all__ = ["daemon_running", "no_daemon_message"]

#: Seconds an answer is kept.
CACHE_SECONDS = 5.0
_answers: dict[str, tuple[float, bool]] = {}


def _task_consumers(profile: Profile) -> int:
    """How many workers consume the profile's task queue, on any host."""
    # Lazy: only for a broker profile whose daemon is not on this host (asyncio and ssl
    # are a twentieth of process list's start-up).
    import asyncio

    import aio_pika
    from aio_pika.exceptions import ChannelNotFoundEntity

    async def count() -> int:
        connection = await aio_pika.connect(profile.broker_url, timeout=2)
        async with connection:
            channel = await connection.channel()
            try:
                queue = await channel.declare_queue(
                    queue_names(profile)["task_queue"], passive=True
                )
            except ChannelNotFoundEntity:
                return 0
            return int(queue.declaration_result.consumer_count or 0)

    return asyncio.run(count())


def _ask(profile: Profile) -> bool:
    if DaemonFiles(profile).supervisor_pid() is not None:
        return True
    if profile.broker_url:
        try:
            return _task_consumers(profile) > 0
        except Exception:  # the broker does not answer: that is said elsewhere, not here
            return True
    return leases.live_workers(float(profile.get_option("daemon.lease_timeout"))) > 0


def daemon_running(profile: Profile | None = None) -> bool:
    """Whether a daemon runs the profile's submitted processes."""
    profile = profile or get_profile()
    key = f"{profile.id}:{profile.folder}"
    seen = _answers.get(key)
    if seen is not None and time.monotonic() - seen[0] < CACHE_SECONDS:
        return seen[1]
    answer = _ask(profile)
    _answers[key] = (time.monotonic(), answer)
    return answer


def no_daemon_message(profile: Profile | None = None) -> str:
    profile = profile or get_profile()
    return (
        f"no daemon is running for profile {profile.name!r}: start it with "
        f"`veglia -p {profile.name} daemon start`"
    )
