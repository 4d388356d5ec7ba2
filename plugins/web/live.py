"""The live hub: one load of a view per second at most, shared by everyone who watches it.

A view is keyed by its page name and its arguments. :meth:`LiveHub.view` answers a page or an
API request with the view loaded in the last second, or loads it once for every request that
asks meanwhile. :meth:`LiveHub.watch` yields the view each time it changes, for a
server-sent-events stream; a key nobody watches is no longer loaded.

With a probe (one cheap statement whose answer changes when anything the views show does),
a watched view is loaded again only when the probe's answer changed since its last load, or
every :data:`SLOW_INTERVAL` seconds for what lies outside the database (workers' liveness,
the time): a page left open costs the database the probe, once a second for the whole hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MIN_INTERVAL", "SLOW_INTERVAL", "LiveHub", "ViewKey", "view_key"]

#: Seconds between two loads of one view, however many browsers watch it; and between two
#: probes of the hub.
MIN_INTERVAL = 1.0

#: Seconds after which a watched view is loaded again though the probe saw no change.
SLOW_INTERVAL = 15.0

ViewKey = tuple[str, tuple[tuple[str, Any], ...]]


def view_key(name: str, params: dict[str, Any]) -> ViewKey:
    return name, tuple(sorted(params.items()))


@dataclass
class _Channel:
    load: Callable[[], dict[str, Any]]
    view: dict[str, Any] | None = None
    error: BaseException | None = None
    loaded_at: float = float("-inf")
    #: Bumped when a load gives a view different from the one before (0: never loaded).
    version: int = 0
    pending: asyncio.Future[None] | None = None
    watchers: int = 0
    poller: asyncio.Task[None] | None = None
    #: The hub's probe version when the last load began (-1: never loaded).
    probed: int = -1
    #: Set, and replaced by a new one, when a load ends (whether the view changed or not).
    loaded: asyncio.Event = field(default_factory=asyncio.Event)


class LiveHub:
    """Views shared between requests and streams, by key; one instance per app."""

    def __init__(
        self,
        interval: float = MIN_INTERVAL,
        probe: Callable[[], Any] | None = None,
        slow_interval: float = SLOW_INTERVAL,
    ) -> None:
        self.interval = interval
        self.slow_interval = slow_interval
        self._probe = probe
        self._channels: dict[ViewKey, _Channel] = {}
        #: Bumped when the probe's answer differs from the one before (or the probe failed).
        self._probe_version = 0
        self._stamp: Any = None
        #: Set, and replaced by a new one, when the probe's version is bumped.
        self._probed = asyncio.Event()
        self._prober: asyncio.Task[None] | None = None
        #: Loads and probes run so far, for the tests and the bench.
        self.loads = 0
        self.probes = 0

    def _channel(self, key: ViewKey, load: Callable[[], dict[str, Any]]) -> _Channel:
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel(load)
        return channel

    async def view(self, key: ViewKey, load: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The view of ``key``: the one loaded within the last interval, or a new load."""
        channel = self._channel(key, load)
        try:
            if time.monotonic() - channel.loaded_at >= self.interval:
                await self._refresh(channel)
            if channel.error is not None:
                raise channel.error
            assert channel.view is not None
            return channel.view
        finally:
            self._evict_idle()

    async def watch(
        self, key: ViewKey, load: Callable[[], dict[str, Any]], heartbeat: float | None = None
    ) -> AsyncIterator[dict[str, Any] | BaseException | None]:
        """The view now, then each time it changes (or the error its load raised), and None
        after ``heartbeat`` seconds without a change; for as long as the caller iterates."""
        channel = self._channel(key, load)
        channel.watchers += 1
        if channel.poller is None:
            channel.poller = asyncio.create_task(self._poll(channel))
        if self._probe is not None and self._prober is None:
            self._prober = asyncio.create_task(self._run_probe())
        try:
            seen = 0  # the first load makes it 1
            while True:
                if channel.version == seen:
                    # An event, not a condition: cancelling a wait for it (the heartbeat's
                    # timeout, a closed stream) leaves no lock half taken.
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(_new_version(channel, seen), heartbeat)
                changed = channel.version != seen
                seen = channel.version
                if not changed:
                    yield None
                elif channel.error is not None:
                    yield channel.error
                else:
                    yield channel.view
        finally:
            # The poller ends by itself once nobody watches: cancelled, it could leave a
            # load half done for a request that waits on it.
            channel.watchers -= 1
            self._evict_idle()

    def _evict_idle(self) -> None:
        """Drop the views nobody watched or asked for lately: a key nobody watches costs
        nothing but its memory, until then."""
        too_old = time.monotonic() - 30 * self.interval
        for key, channel in list(self._channels.items()):
            if channel.watchers == 0 and channel.pending is None and channel.loaded_at < too_old:
                del self._channels[key]

    async def _poll(self, channel: _Channel) -> None:
        try:
            while channel.watchers > 0:
                wait = channel.loaded_at + self.interval - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self._probe is not None:
                    await self._until_changed(channel)
                if channel.watchers == 0:
                    break
                await self._refresh(channel)
        finally:
            channel.poller = None

    async def _until_changed(self, channel: _Channel) -> None:
        """Until the probe saw a change since the channel's last load, its slow refresh is
        due, or nobody watches it."""
        due = channel.loaded_at + self.slow_interval
        while channel.watchers > 0 and channel.probed == self._probe_version:
            left = due - time.monotonic()
            if left <= 0:
                return
            # At most an interval: a channel nobody watches any longer ends its poller soon.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._probed.wait(), min(left, self.interval))

    async def _run_probe(self) -> None:
        """Probe once an interval while anyone watches any view; bump the probe's version
        when its answer changed."""
        assert self._probe is not None
        try:
            while any(channel.watchers for channel in self._channels.values()):
                started = time.monotonic()
                self.probes += 1
                try:
                    stamp = await asyncio.to_thread(self._probe)
                    changed = stamp != self._stamp
                except Exception:  # a failing probe: as if everything changed, loads tell why
                    stamp, changed = None, True
                self._stamp = stamp
                if changed:
                    self._probe_version += 1
                    probed, self._probed = self._probed, asyncio.Event()
                    probed.set()
                await asyncio.sleep(max(0.0, started + self.interval - time.monotonic()))
        finally:
            self._prober = None

    async def _refresh(self, channel: _Channel) -> None:
        """Load the view once, in a worker thread; concurrent callers share that load."""
        if channel.pending is not None:
            await asyncio.shield(channel.pending)
            return
        channel.pending = asyncio.get_running_loop().create_future()
        # The probe's answer is from before this load: a change after it is seen as one.
        channel.probed = self._probe_version
        try:
            self.loads += 1
            try:
                view = await asyncio.to_thread(channel.load)
                error = None
            except Exception as exc:  # shown to whoever asks; the next load may succeed
                view, error = None, exc
            if _fingerprint(view, error) != _fingerprint(channel.view, channel.error):
                channel.version += 1
            channel.view, channel.error = view, error
            channel.loaded_at = time.monotonic()
            loaded, channel.loaded = channel.loaded, asyncio.Event()
            loaded.set()
        finally:
            channel.pending.set_result(None)
            channel.pending = None


async def _new_version(channel: _Channel, seen: int) -> None:
    """Until the channel's version is not ``seen``."""
    while channel.version == seen:
        await channel.loaded.wait()


def _fingerprint(view: dict[str, Any] | None, error: BaseException | None) -> tuple:
    # The view itself, compared with ==: as exact as its JSON text, and a workflow of
    # 2,000 steps compares in a few ms where json.dumps(sort_keys=True) took 40.
    if error is not None:
        return ("error", f"{type(error).__name__}: {error}")
    return ("view", view)
