"""The live hub's change probe: the database's change stamp, read as changed for a few
seconds after the newest write.

A write's ``mtime`` is taken when its transaction runs, not when it commits: a transaction
that commits after a newer one already did leaves the newest ``mtime`` as it was. Reading
the stamp as changed while the newest write is younger than :data:`SETTLE_SECONDS` loads
the watched views again after such a late commit too; when the database is quiet, the
stamp decides alone.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from veglia.orm.queries import change_stamp

__all__ = ["SETTLE_SECONDS", "probe_changes"]

#: Seconds after the newest write during which the stamp is read as changed.
SETTLE_SECONDS = 5.0


def probe_changes() -> Any:
    """The database's change stamp; a new object each time while a write is recent."""
    stamp = change_stamp()
    newest = stamp[0]
    if newest is None:
        return stamp
    if newest.tzinfo is None:  # SQLite gives back the UTC time without its zone
        newest = newest.replace(tzinfo=timezone.utc)
    if (datetime.now(timezone.utc) - newest).total_seconds() < SETTLE_SECONDS:
        return object()  # equal to no other: the views load again
    return stamp
