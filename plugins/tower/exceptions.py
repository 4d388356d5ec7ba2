"""Every error of the Tower reporter, in one tree.

    TowerError
    ├── RetryLater          the Platform is busy or unreachable: the same request, later
    ├── SettingsRejected    401/403, a redirect: no request can pass until a setting changes
    ├── TowerRefused        the Platform refused this request (another 4xx): its run stops
    └── RecordError         a run's records cannot be turned into a request at all

Only :class:`RetryLater` and :class:`SettingsRejected` concern every run; the other two
concern one run, which is marked refused while the others go on.
"""

from __future__ import annotations

from veglia.plugin_api import VegliaError

__all__ = ["RecordError", "RetryLater", "SettingsRejected", "TowerError", "TowerRefused"]


class TowerError(VegliaError):
    """Base class of the Tower reporter's errors."""


class RetryLater(TowerError):
    """429, 5xx, a timeout or a network error: send the same request again later."""

    def __init__(self, message: str, after: float | None = None) -> None:
        super().__init__(message)
        #: The server's ``Retry-After``, in seconds, when it gave one.
        self.after = after


class SettingsRejected(TowerError):
    """The Platform turns every request away until the token, endpoint or workspace changes."""


class TowerRefused(TowerError):
    """The Platform refused one request (4xx other than 401/403): it will never take it."""

    def __init__(self, request: str, status: int | None, message: str) -> None:
        super().__init__(
            f"{request}: HTTP {status}: {message}" if status else f"{request}: {message}"
        )
        #: Which call was refused: create, begin, progress, heartbeat or complete.
        self.request = request
        self.status = status
        #: What the server said (its ``message``), or what was wrong with the answer.
        self.message = message


class RecordError(TowerError):
    """A run's stored records cannot be made into a request (a bug, or corrupt data)."""
