"""The live hub's change probe: which nodes were written since the probe before, from the
database's change stamp and the index on ``nodes.mtime``.

Once a second the probe reads the stamp (one statement). Only when its newest write moved, or
is recent, does it read the nodes written in the last :data:`SETTLE_SECONDS` (down the index)
and compare them with the ones it read the time before: a node is written when it is new
there or its ``mtime`` moved. A write's ``mtime`` is taken when its transaction runs, not when
it commits, so a transaction that commits after a newer one did is still found, as long as it
commits within those seconds. Then one statement adds the nodes those writes show on (the
sources of the links into new nodes: a new step's caller, a new output's job, the inputs a new
job uses) and those of new log entries.

A quiet database costs one statement a second; a busy one three or four, for the whole hub.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from veglia.plugin_api import ChangeStamp, change_stamp, nodes_touched_by, recent_writes
from veglia.plugins.web.live import EVERYTHING, Changes

__all__ = [
    "CHANGED_LIMIT",
    "RESOLUTION_SECONDS",
    "SETTLE_SECONDS",
    "ChangeProbe",
    "workers_stamp",
]

#: Seconds a transaction may take between its write and its commit and still be seen.
SETTLE_SECONDS = 5.0

#: The resolution of an mtime of whole seconds.
RESOLUTION_SECONDS = 1.0

#: More nodes written within those seconds than this: every view is loaded again, which
#: costs less than finding which.
CHANGED_LIMIT = 1000


def workers_stamp() -> tuple[tuple[int, bool], ...]:
    """The daemon's workers and whether each is alive (their files, no SQL)."""
    # Lazy: the overview's view of the workers, read only while a page watches.
    from veglia.plugin_api import workers

    return tuple((worker["pid"], worker["alive"]) for worker in workers())


class ChangeProbe:
    """Call it for the :class:`~veglia.plugins.web.live.Changes` since the call before (the
    first call: everything)."""

    def __init__(self, outside: Callable[[], Any] | None = workers_stamp) -> None:
        #: What the views show from outside the database (the daemon's workers).
        self._outside = outside
        self._stamp: ChangeStamp | None = None
        self._outside_stamp: Any = None
        #: The nodes written within SETTLE_SECONDS of the newest write, pk -> mtime.
        self._recent: dict[int, datetime] = {}
        #: When the last call began (UTC).
        self._probed_at = datetime.now(timezone.utc)

    def __call__(self) -> Changes:
        try:
            return self._changes()
        except BaseException:
            self._stamp = None  # the next call starts again: everything
            raise

    def _changes(self) -> Changes:
        probed_before, self._probed_at = self._probed_at, datetime.now(timezone.utc)
        stamp = change_stamp()
        outside = self._outside() if self._outside is not None else None
        before, self._stamp = self._stamp, stamp
        outside_before, self._outside_stamp = self._outside_stamp, outside
        recent_before = self._recent
        self._recent = self._recent_writes(stamp, before)
        if before is None or stamp.computers != before.computers:
            return EVERYTHING
        if len(self._recent) > CHANGED_LIMIT:
            return EVERYTHING
        # A node is written when its mtime moved; or, for an mtime of whole seconds (SQLite's
        # CURRENT_TIMESTAMP), when it is as recent as the probe before less a second: a
        # second write within the same second leaves the same mtime.
        recent_cut = probed_before - timedelta(seconds=RESOLUTION_SECONDS)
        written = {
            pk
            for pk, mtime in self._recent.items()
            if recent_before.get(pk) != mtime
            or (mtime.microsecond == 0 and _as_utc(mtime) >= recent_cut)
        }
        new = {pk for pk in written if before.newest_node is None or pk > before.newest_node}
        if stamp.nodes != before.nodes + len(new):
            return EVERYTHING  # a delete, or nodes imported with their old mtime
        after_log = (before.newest_log or 0) if stamp.newest_log != before.newest_log else None
        # Links are stored with the node they lead to: only a new node brings new ones.
        touched = written | nodes_touched_by(new, after_log)
        elsewhere = (
            stamp.plugins != before.plugins
            or stamp.pipelines != before.pipelines
            or outside != outside_before
        )
        return Changes(frozenset(touched), elsewhere)

    def _recent_writes(self, stamp: ChangeStamp, before: ChangeStamp | None) -> dict[int, datetime]:
        """The nodes written within SETTLE_SECONDS of the newest write, read while that
        write is recent or new; empty once the database is quiet."""
        newest = stamp.newest_write
        if newest is None:
            return {}
        moved = before is None or newest != before.newest_write
        if not moved and _age(newest) > 2 * SETTLE_SECONDS:
            return {}
        return recent_writes(newest - timedelta(seconds=SETTLE_SECONDS), CHANGED_LIMIT)


def _as_utc(moment: datetime) -> datetime:
    # SQLite gives back the UTC time without its zone.
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def _age(moment: datetime) -> float:
    return (datetime.now(timezone.utc) - _as_utc(moment)).total_seconds()
