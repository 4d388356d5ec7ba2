"""The stored settings of the computers a runner uses, read again while it runs.

A daemon worker keeps one open connection per computer (``transport_queue``) and one poller
per computer; both were made from the settings read when the first job needed them. Here
they are checked against the database again, at most every ``TTL`` seconds per computer
(two small queries): when `veglia computer configure` (or anything else) changed what
reaching the computer depends on, the next transport lease opens a new connection with the
new settings, and the old one is closed once no task uses it. No daemon restart is needed.

A submitting process uses the same view: a loop of submissions reads its computer, by
label, and whether it is configured at most once a ``TTL`` too, not at every job. Changes
this Python process makes itself (``Computer.save``, ``configure``...) are seen at once, and
a cache read through another profile's storage is dropped.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from veglia.exceptions import ConfigurationError
from veglia.manage import get_storage
from veglia.orm.computers import Computer, load_computer, local_changes

__all__ = ["TTL", "ComputerSettings", "ComputerState"]

#: Seconds a computer's settings, once read, are taken as current.
TTL = 1.0


@dataclass(frozen=True)
class ComputerState:
    """A computer as stored now, and a digest of everything reaching it depends on."""

    computer: Computer
    version: str
    #: Whether the default user has configured it (it has an authinfo).
    configured: bool = True
    #: Whether the default user may submit jobs to it (`veglia computer disable`).
    enabled: bool = True


def _version(computer: Computer, auth_params: dict[str, Any] | None) -> str:
    settings = [
        computer.hostname,
        computer.transport_type,
        computer.scheduler_type,
        computer.properties,
        auth_params,
    ]
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ComputerSettings:
    """One runner's view of its computers' stored settings."""

    def __init__(self, ttl: float = TTL) -> None:
        self.ttl = ttl
        self._seen: dict[int, tuple[float, ComputerState]] = {}
        self._pks: dict[str, tuple[float, int]] = {}  # label -> (when read, pk)
        self._source: tuple[Any, int] | None = None  # (storage, local changes) read from

    def _check_source(self) -> None:
        """Forget what was read from another storage, or before this process changed a
        computer."""
        source = (get_storage(), local_changes())
        if self._source is None or self._source[0] is not source[0] or self._source[1] != source[1]:
            self._seen.clear()
            self._pks.clear()
            self._source = source

    def by_label(self, label: str) -> ComputerState:
        """The computer labelled ``label`` as stored now (its label read again when the last
        read is over ``ttl`` old; an unknown label is read at every call)."""
        self._check_source()
        seen = self._pks.get(label)
        now = time.monotonic()
        if seen is not None and now - seen[0] < self.ttl:
            state = self.current_by_pk(seen[1])
            if state.computer.label == label:
                return state
        computer = load_computer(label)  # NotExistent for an unknown label
        assert computer.pk is not None
        self._pks[label] = (now, computer.pk)
        return self.current_by_pk(computer.pk)

    def current(self, computer: Computer) -> ComputerState:
        """``computer`` as stored now (read again when the last read is over ``ttl`` old)."""
        assert computer.pk is not None
        return self.current_by_pk(computer.pk)

    def current_by_pk(self, pk: int) -> ComputerState:
        """The computer ``pk`` as stored now (read again when the last read is over ``ttl``
        old): a job's computer, without reading it by its label first."""
        self._check_source()
        seen = self._seen.get(pk)
        now = time.monotonic()
        if seen is not None and now - seen[0] < self.ttl:
            return seen[1]
        fresh = load_computer(pk)
        try:
            auth_params: dict[str, Any] | None = fresh.get_auth_params()
        except ConfigurationError:  # not configured: opening a transport says so
            auth_params = None
        state = ComputerState(
            fresh,
            _version(fresh, auth_params),
            auth_params is not None,
            auth_params is None or fresh.is_enabled(),
        )
        if seen is not None and (seen[1].version, seen[1].enabled) == (
            state.version,
            state.enabled,
        ):
            state = seen[1]  # unchanged: the same object as before
        self._seen[pk] = (now, state)
        return state
