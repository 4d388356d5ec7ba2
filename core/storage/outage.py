"""Telling a database that is away from a query it refused, and waiting until it is back.

A worker meets an unreachable database as SQLAlchemy's ``OperationalError`` (connection
refused or reset, SQLite's "database is locked"), ``InterfaceError`` or a pool timeout. Such
an error says nothing about the process it interrupted, so the process must not end on it:
the worker continues the process from its last checkpoint once the database answers.
Opening the storage when the database is away raises
:class:`~veglia.exceptions.StorageUnavailable`, which counts the same.
"""

from __future__ import annotations

import asyncio
import logging

import sqlalchemy as sa

from veglia.exceptions import StorageUnavailable
from veglia.manage import get_storage

__all__ = ["is_storage_outage", "wait_for_storage"]

LOGGER = logging.getLogger("veglia.storage")

_OUTAGE_ERRORS = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    sa.exc.DisconnectionError,
    sa.exc.TimeoutError,
)
#: SQLite reports mistakes in a query as OperationalError too: those are not outages.
_QUERY_MISTAKES = (
    "no such table",
    "no such column",
    "syntax error",
    "has no column",
    "malformed JSON",
)


def is_storage_outage(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error it was raised from, says the database did not answer."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, StorageUnavailable):
            return True
        if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
            return True
        if isinstance(exc, _OUTAGE_ERRORS):
            return not any(text in str(exc) for text in _QUERY_MISTAKES)
        exc = exc.__cause__
    return False


async def wait_for_storage(first_delay: float = 0.5, max_delay: float = 10.0) -> None:
    """Return once the profile's database answers a query, trying ever more slowly."""

    def answers() -> bool:
        try:
            with get_storage().engine.connect() as connection:
                connection.execute(sa.text("SELECT 1"))
            return True
        except Exception as exc:
            if not is_storage_outage(exc):
                raise
            return False

    delay = first_delay
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(delay)
        # In a thread: connecting to a host that went away can take the connect timeout.
        if await loop.run_in_executor(None, answers):
            return
        delay = min(delay * 2, max_delay)
        LOGGER.warning("the database does not answer yet; next try in %.0f s", delay)
