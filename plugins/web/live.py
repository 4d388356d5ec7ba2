"""The live hub: views shared by everyone who watches them, each kind of view read from the
database at most once a second.

A view is keyed by its page name (its *kind*: overview, workflow, job...) and its arguments.
:meth:`LiveHub.watch` yields the view each time it changes, for a server-sent-events stream;
:meth:`LiveHub.view` answers a page or an API request with a view known to be current, or
loads it once for every request that asks meanwhile. A key nobody watches is no longer
loaded.

The watched views of one kind are loaded together, in one *round* a second at most, so fifty
browsers on fifty different jobs cost the database at most one round of job loads a second.

With a probe (a callable giving :class:`Changes`, run once a second while anyone watches),
a round loads only the views a change touched: a view that shows a set of nodes (a job, a
workflow's steps, a node's provenance) when one of them changed; a view of everything (the
overview, the process search) on any change. A view is also loaded again every
:data:`SLOW_INTERVAL` seconds, for what moves without a write (the time, a worker's death
the probe did not see). A page left open costs the database the probe, one statement a
second for the whole hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EVERYTHING",
    "MIN_INTERVAL",
    "SLOW_INTERVAL",
    "Changes",
    "Covers",
    "LiveHub",
    "ViewKey",
    "view_key",
]

#: Seconds between two rounds of loads of one kind of view, however many browsers watch;
#: and between two probes of the hub.
MIN_INTERVAL = 1.0

#: Seconds after which a watched view is loaded again though the probe saw no change.
SLOW_INTERVAL = 60.0

ViewKey = tuple[str, tuple[tuple[str, Any], ...]]

#: What a view shows: the pks of its nodes, or None for a view of everything.
Covers = Callable[[dict[str, Any]], "frozenset[int] | None"]


def view_key(name: str, params: dict[str, Any]) -> ViewKey:
    return name, tuple(sorted(params.items()))


@dataclass(frozen=True)
class Changes:
    """What changed since the probe before: the pks of the nodes written (and of those a
    write shows on, such as a new step's caller), None when any may have; and whether
    anything else the views of everything show did (a plugin's tables, the daemon's
    workers)."""

    nodes: frozenset[int] | None = frozenset()
    elsewhere: bool = False

    def touch(self, covers: frozenset[int] | None) -> bool:
        """Whether a view showing ``covers`` (None: everything) may have changed."""
        if self.nodes is None:
            return True
        if covers is None:
            return bool(self.nodes) or self.elsewhere
        return not self.nodes.isdisjoint(covers)


#: Anything may have changed (the first probe, a failed one, a delete, too many writes).
EVERYTHING = Changes(None, True)


def _everything(view: dict[str, Any]) -> frozenset[int] | None:
    return None


@dataclass
class _Channel:
    kind: str
    load: Callable[[], dict[str, Any]]
    covers_of: Covers = _everything
    view: dict[str, Any] | None = None
    error: BaseException | None = None
    #: What the last view shows (None: everything, or not loaded yet).
    covers: frozenset[int] | None = None
    loaded_at: float = float("-inf")
    #: Bumped when a load gives a view different from the one before (0: never loaded).
    version: int = 0
    pending: asyncio.Future[None] | None = None
    watchers: int = 0
    #: The hub's probe version when the last load began (-1: never loaded), and the last
    #: version whose changes touched this view: it is due when the second is the greater.
    probed: int = -1
    changed: int = 0
    #: Set, and replaced by a new one, when a load ends (whether the view changed or not).
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    #: What the probe saw change while the view was being loaded.
    during_load: list[Changes] = field(default_factory=list)


@dataclass
class _Kind:
    rounds: asyncio.Task[None] | None = None
    last_round: float = float("-inf")


class LiveHub:
    """Views shared between requests and streams, by key; one instance per app."""

    def __init__(
        self,
        interval: float = MIN_INTERVAL,
        probe: Callable[[], Changes] | None = None,
        slow_interval: float = SLOW_INTERVAL,
    ) -> None:
        self.interval = interval
        self.slow_interval = slow_interval
        self._probe = probe
        self._channels: dict[ViewKey, _Channel] = {}
        self._kinds: dict[str, _Kind] = {}
        self._probe_version = 0
        #: Set, and replaced by a new one, when a probe saw a change.
        self._probed = asyncio.Event()
        self._prober: asyncio.Task[None] | None = None
        #: Loads, rounds (by kind) and probes run so far, for the tests and the bench.
        self.loads = 0
        self.rounds: Counter[str] = Counter()
        self.probes = 0

    def _channel(
        self, key: ViewKey, load: Callable[[], dict[str, Any]], covers: Covers | None
    ) -> _Channel:
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel(key[0], load, covers or _everything)
        return channel

    async def view(
        self, key: ViewKey, load: Callable[[], dict[str, Any]], covers: Covers | None = None
    ) -> dict[str, Any]:
        """The view of ``key``: the one loaded within the last interval, or since which the
        probe saw no change touch it, or a new load."""
        channel = self._channel(key, load, covers)
        try:
            if not self._current(channel):
                await self._load_now(channel)
            if channel.error is not None:
                raise channel.error
            assert channel.view is not None
            return channel.view
        finally:
            self._evict_idle()

    async def watch(
        self,
        key: ViewKey,
        load: Callable[[], dict[str, Any]],
        heartbeat: float | None = None,
        covers: Covers | None = None,
    ) -> AsyncIterator[dict[str, Any] | BaseException | None]:
        """The view now, then each time it changes (or the error its load raised), and None
        after ``heartbeat`` seconds without a change; for as long as the caller iterates.
        ``covers`` tells from a view which nodes it shows (default: everything)."""
        channel = self._channel(key, load, covers)
        channel.watchers += 1
        kind = self._kinds.setdefault(channel.kind, _Kind())
        if kind.rounds is None:
            kind.rounds = asyncio.create_task(self._run_rounds(channel.kind, kind))
        if self._probe is not None and self._prober is None:
            # What changed while no probe ran is not known: every view is due once.
            self._mark(EVERYTHING)
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
            # The rounds end by themselves once nobody watches: cancelled, they could leave
            # a load half done for a request that waits on it.
            channel.watchers -= 1
            self._evict_idle()

    def _current(self, channel: _Channel) -> bool:
        """Whether the channel's view may be answered without a load."""
        if channel.version == 0:
            return False
        if time.monotonic() - channel.loaded_at < self.interval:
            return True
        # Loaded since the probe last saw a change touch it, and the probe still runs.
        return self._prober is not None and not self._due(channel)

    def _due(self, channel: _Channel) -> bool:
        if self._probe is None or channel.changed > channel.probed:
            return True
        return time.monotonic() >= channel.loaded_at + self.slow_interval

    def _evict_idle(self) -> None:
        """Drop the views nobody watched or asked for lately: a key nobody watches costs
        nothing but its memory, until then."""
        too_old = time.monotonic() - 30 * self.interval
        for key, channel in list(self._channels.items()):
            if channel.watchers == 0 and channel.pending is None and channel.loaded_at < too_old:
                del self._channels[key]

    def _watched(self, kind: str) -> list[_Channel]:
        return [c for c in self._channels.values() if c.kind == kind and c.watchers > 0]

    async def _run_rounds(self, name: str, kind: _Kind) -> None:
        """While anyone watches a view of this kind: a round of loads of its due views, an
        interval at least after the round before."""
        try:
            while self._watched(name):
                wait = kind.last_round + self.interval - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                due = await self._until_due(name)
                if not due:
                    break
                kind.last_round = time.monotonic()
                self.rounds[name] += 1
                await self._load_round(due)
        finally:
            kind.rounds = None

    async def _until_due(self, name: str) -> list[_Channel]:
        """The watched views of this kind that are due, once any is; empty once nobody
        watches one."""
        while True:
            watched = self._watched(name)
            now = time.monotonic()
            due = [c for c in watched if c.pending is None and self._due(c)]
            # A view a request loaded within the interval waits for the round after.
            ready = [c for c in due if now - c.loaded_at >= self.interval]
            if ready or not watched:
                return ready
            next_times = [c.loaded_at + self.interval for c in due]
            next_times += [c.loaded_at + self.slow_interval for c in watched]
            left = min(next_times) - now
            # At most an interval: a kind nobody watches any longer ends its rounds soon.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._probed.wait(), max(0.0, min(left, self.interval)))

    async def _run_probe(self) -> None:
        """Probe once an interval while anyone watches any view; mark the views its changes
        touch."""
        assert self._probe is not None
        try:
            while any(channel.watchers for channel in self._channels.values()):
                started = time.monotonic()
                self.probes += 1
                try:
                    changes = await asyncio.to_thread(self._probe)
                except Exception:  # a failing probe: as if everything changed, loads tell why
                    changes = EVERYTHING
                self._mark(changes)
                await asyncio.sleep(max(0.0, started + self.interval - time.monotonic()))
        finally:
            self._prober = None

    def _mark(self, changes: Changes) -> None:
        """Make the views the changes touch due, and wake the rounds waiting for one. A view
        being loaded is judged when its load ends, by what it shows then: before its first
        load, nobody knows."""
        touched, loading = [], []
        for channel in self._channels.values():
            if channel.pending is not None:
                loading.append(channel)
            elif channel.version == 0 or changes.touch(channel.covers):
                touched.append(channel)
        if not touched and not loading:
            return
        self._probe_version += 1
        for channel in touched:
            channel.changed = self._probe_version
        for channel in loading:
            channel.during_load.append(changes)
        probed, self._probed = self._probed, asyncio.Event()
        probed.set()

    async def _load_now(self, channel: _Channel) -> None:
        """Load one view now, in a worker thread; concurrent callers share that load."""
        if channel.pending is not None:
            await asyncio.shield(channel.pending)
            return
        self._begin(channel)
        try:
            loaded = await asyncio.to_thread(_load, channel)
        except BaseException:
            self._abandon(channel)
            raise
        self._end(channel, *loaded)

    async def _load_round(self, channels: list[_Channel]) -> None:
        """Load these views one after another in one worker thread."""
        for channel in channels:
            self._begin(channel)
        try:
            results = await asyncio.to_thread(lambda: [_load(c) for c in channels])
        except BaseException:
            for channel in channels:
                self._abandon(channel)
            raise
        for channel, loaded in zip(channels, results, strict=True):
            self._end(channel, *loaded)

    def _begin(self, channel: _Channel) -> None:
        channel.pending = asyncio.get_running_loop().create_future()
        channel.during_load = []
        # The probe's version is from before this load: a change it reports later is one
        # this load may not have seen.
        channel.probed = self._probe_version
        self.loads += 1

    def _abandon(self, channel: _Channel) -> None:
        """A load that did not end (its caller was cancelled): the view stays as it was, and
        due."""
        channel.probed = -1
        self._settle(channel)

    def _settle(self, channel: _Channel) -> None:
        loaded, channel.loaded = channel.loaded, asyncio.Event()
        loaded.set()
        assert channel.pending is not None
        channel.pending.set_result(None)
        channel.pending = None

    def _end(
        self,
        channel: _Channel,
        view: dict[str, Any] | None,
        error: Exception | None,
        covers: frozenset[int] | None,
    ) -> None:
        if _fingerprint(view, error) != _fingerprint(channel.view, channel.error):
            channel.version += 1
        shown_before = channel.covers if channel.loaded_at > float("-inf") else frozenset()
        channel.view, channel.error = view, error
        channel.covers = covers
        if any(
            changes.touch(channel.covers) or changes.touch(shown_before)
            for changes in channel.during_load
        ):
            channel.changed = self._probe_version  # greater than when the load began
        channel.loaded_at = time.monotonic()
        self._settle(channel)


def _load(
    channel: _Channel,
) -> tuple[dict[str, Any] | None, Exception | None, frozenset[int] | None]:
    """The channel's view, or the error its load raised, and what the view shows; in a
    worker thread (what a workflow of 2,000 steps shows takes a few ms to gather)."""
    try:
        view = channel.load()
        return view, None, channel.covers_of(view)
    except Exception as exc:  # shown to whoever asks; the next load may succeed
        return None, exc, None


async def _new_version(channel: _Channel, seen: int) -> None:
    """Until the channel's version is not ``seen``."""
    while channel.version == seen:
        await channel.loaded.wait()


def _fingerprint(view: dict[str, Any] | None, error: BaseException | None) -> tuple[Any, ...]:
    # The view itself, compared with ==: as exact as its JSON text, and a workflow of
    # 2,000 steps compares in a few ms where json.dumps(sort_keys=True) took 40.
    if error is not None:
        return ("error", f"{type(error).__name__}: {error}")
    return ("view", view)
