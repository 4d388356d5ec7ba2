"""Telling people, through the ``notify`` hook: once per event, not once per poll.

A channel may take long (an SMTP server that does not answer holds a connection until its
timeout), and the processes of a daemon worker all share one event loop: from a running
loop, notifications are sent by one background thread, in the order they were made.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from veglia.manage import get_profile
from veglia.plugin_manager import call_each

__all__ = ["clear_event", "event_pending", "flush", "notify", "notify_once"]

LOGGER = logging.getLogger("veglia.notify")

#: Notifications waiting for the sender thread; beyond this (every channel hung for long)
#: new ones are dropped, logged, rather than held in memory without end.
_QUEUE_LIMIT = 100
#: How long a process that ends waits for notifications still queued: long enough for a
#: server that answers slowly, bounded so a hung one does not keep the process alive, and
#: under the 30 s the daemon gives a stopping worker before killing it.
_EXIT_WAIT = 20.0


def _marker(profile: Any, key: str) -> Path:
    return Path(profile.folder) / "notified" / key.replace("/", "_")


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _deliver(event: str, subject: str, body: str, profile: Any) -> None:

    recipients = [
        a.strip() for a in str(profile.get_option("notify.email")).split(",") if a.strip()
    ]
    for plugin, exc in call_each(
        "notify", event=event, subject=subject, body=body, recipients=recipients, profile=profile
    ):
        LOGGER.error("notification channel %s failed (%s): %s", plugin, event, _one_line(exc))


class _Sender:
    """One daemon thread running deliveries one after another.

    A daemon thread, so a hung channel cannot keep the interpreter alive; :func:`flush`
    (also run at exit) waits a bounded time for what is queued.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(maxsize=_QUEUE_LIMIT)
        self._pending = 0
        self._idle = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="veglia-notify", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> bool:
        with self._idle:
            self._pending += 1
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self._done()
            return False
        return True

    def flush(self, timeout: float) -> int:
        """Wait until nothing is queued or being sent, at most ``timeout`` seconds; the
        number of notifications still pending."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._pending and (remaining := deadline - time.monotonic()) > 0:
                self._idle.wait(remaining)
            return self._pending

    def _done(self) -> None:
        with self._idle:
            self._pending -= 1
            if not self._pending:
                self._idle.notify_all()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                job()
            except Exception as exc:  # this thread must outlive any one notification
                LOGGER.error("sending a notification failed: %s", _one_line(exc))
            finally:
                self._done()


_sender: _Sender | None = None
_sender_lock = threading.Lock()


def _get_sender() -> _Sender:
    global _sender
    with _sender_lock:
        # A forked child has the object but not the thread: it starts its own.
        if _sender is None or _sender.pid != os.getpid():
            _sender = _Sender()
        return _sender


def flush(timeout: float = _EXIT_WAIT) -> bool:
    """Wait (at most ``timeout`` seconds) for notifications handed to the background
    thread; True when none is left. Run at exit, so a command that notified from an
    event loop still delivers before the process ends."""
    sender = _sender
    if sender is None or sender.pid != os.getpid():
        return True
    left = sender.flush(timeout)
    if left:
        LOGGER.error(
            "%d notification(s) not sent after waiting %.0f s: a channel does not answer",
            left,
            timeout,
        )
    return not left


atexit.register(flush)


def notify(event: str, subject: str, body: str) -> None:
    """Send a notification through every channel, for what happens once by itself (a
    process ended); conditions that recur at every poll go through :func:`notify_once`.

    From a running event loop it returns at once and a background thread sends it;
    otherwise it is sent before returning. A failing channel is logged, never raised.
    """

    profile = get_profile()  # here: the thread must send for the profile active now
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _deliver(event, subject, body, profile)
        return
    if not _get_sender().submit(lambda: _deliver(event, subject, body, profile)):
        LOGGER.error(
            "notification %s (%s) dropped: %d are already waiting for a channel that does "
            "not answer",
            event,
            subject,
            _QUEUE_LIMIT,
        )


def notify_once(key: str, event: str, subject: str, body: str) -> bool:
    """Send the notification unless one was sent for ``key`` since :func:`clear_event`."""

    marker = _marker(get_profile(), key)
    if marker.exists():
        return False
    marker.parent.mkdir(parents=True, exist_ok=True)
    # Written before notify() hands the sending to the background thread: the next poll
    # finds the event told even while its message is still on the way.
    marker.write_text(subject)
    notify(event, subject, body)
    return True


def clear_event(key: str) -> bool:
    """The condition is over: the next occurrence notifies again. True for the one caller
    that ended it (of several workers seeing it end at once)."""

    try:
        _marker(get_profile(), key).unlink()
    except FileNotFoundError:
        return False
    return True


def event_pending(key: str) -> bool:

    return _marker(get_profile(), key).exists()
