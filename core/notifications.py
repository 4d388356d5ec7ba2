"""Telling people, through the ``notify`` hook: once per event, not once per poll."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

__all__ = ["clear_event", "event_pending", "notify", "notify_once"]

LOGGER = logging.getLogger("veglia.notify")


def _marker(profile: Any, key: str) -> Path:
    return Path(profile.folder) / "notified" / key.replace("/", "_")


def notify(event: str, subject: str, body: str) -> None:
    """Send a notification through every channel, for what happens once by itself (a
    process ended); conditions that recur at every poll go through :func:`notify_once`."""
    from veglia.manage import get_profile
    from veglia.plugin_manager import call_each

    profile = get_profile()
    recipients = [
        a.strip() for a in str(profile.get_option("notify.email")).split(",") if a.strip()
    ]
    for plugin, exc in call_each(
        "notify", event=event, subject=subject, body=body, recipients=recipients, profile=profile
    ):
        LOGGER.error("notification channel %s failed: %s", plugin, exc)


def notify_once(key: str, event: str, subject: str, body: str) -> bool:
    """Send the notification unless one was sent for ``key`` since :func:`clear_event`."""
    from veglia.manage import get_profile

    marker = _marker(get_profile(), key)
    if marker.exists():
        return False
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(subject)
    notify(event, subject, body)
    return True


def clear_event(key: str) -> bool:
    """The condition is over: the next occurrence notifies again. True for the one caller
    that ended it (of several workers seeing it end at once)."""
    from veglia.manage import get_profile

    try:
        _marker(get_profile(), key).unlink()
    except FileNotFoundError:
        return False
    return True


def event_pending(key: str) -> bool:
    from veglia.manage import get_profile

    return _marker(get_profile(), key).exists()
