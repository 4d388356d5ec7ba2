"""Changing how many workers a running daemon has (``veglia daemon incr / decr``).

A request is a small file in the daemon's folder, ``scale-<token>.json`` holding the change
(``{"delta": 2}``, or ``-1``). The supervisor takes every request within its loop's 0.2 s: it
renames the file first, so a request is taken or withdrawn, never both, and requests sent at
once all count. It never goes below one worker, nor past one without a broker, and writes the
new count in its status before it deletes the request: once its file is gone, the status says
what the request made of the daemon.

Like the supervisor, this module imports nothing of the engine, the storage or the broker.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from veglia.config.private_paths import private_file
from veglia.engine.daemon.files import DaemonFiles
from veglia.exceptions import DaemonError

__all__ = ["Taken", "clear_requests", "request_change", "take_requests"]

_PREFIX = "scale-"
_TAKEN = ".taken"


def request_change(files: DaemonFiles, delta: int, timeout: float = 10.0) -> None:
    """Ask the running supervisor to add (``delta`` > 0) or remove workers, and wait until it
    has: its status then holds the new count. :class:`DaemonError` when it does not take the
    request within ``timeout`` s (the request is withdrawn: nothing changes)."""
    request = files.folder / f"{_PREFIX}{uuid.uuid4().hex}.json"
    tmp = request.with_suffix(".tmp")
    with open(private_file(tmp), "w") as handle:
        json.dump({"delta": delta}, handle)
    tmp.rename(request)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not request.exists() and not _taken(request).exists():
            return
        time.sleep(0.05)
    try:
        request.unlink()
    except FileNotFoundError:  # taken meanwhile: it is being carried out
        _wait_gone(_taken(request), timeout)
        return
    raise DaemonError(
        f"The daemon did not change its workers within {timeout:.0f} s; nothing was changed. "
        "See `veglia daemon logs`."
    )


def _taken(request: Path) -> Path:
    return request.with_name(request.name + _TAKEN)


def _wait_gone(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while path.exists():
        if time.monotonic() > deadline:
            raise DaemonError(
                f"The daemon took the request to change its workers but did not finish it "
                f"within {timeout:.0f} s; see `veglia daemon status` and `veglia daemon logs`."
            )
        time.sleep(0.05)


class Taken:
    """The requests the supervisor took at once: their summed ``delta``; :meth:`done` once
    the change is made and written in the status."""

    def __init__(self, delta: int, paths: list[Path]) -> None:
        self.delta, self._paths = delta, paths

    def done(self) -> None:
        for path in self._paths:
            path.unlink(missing_ok=True)


def take_requests(files: DaemonFiles) -> Taken:
    """The requests waiting now (the supervisor's side); a request that cannot be read
    counts as no change."""
    delta, paths = 0, []
    for request in files.folder.glob(f"{_PREFIX}*.json"):
        taken = _taken(request)
        try:
            request.rename(taken)
        except FileNotFoundError:  # withdrawn meanwhile
            continue
        paths.append(taken)
        try:
            value = json.loads(taken.read_text())["delta"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            delta += value
    return Taken(delta, paths)


def clear_requests(files: DaemonFiles) -> None:
    """Drop the requests an earlier supervisor left (it stopped before taking them)."""
    for leftover in files.folder.glob(f"{_PREFIX}*"):
        leftover.unlink(missing_ok=True)
