"""Telling people, through the ``notify`` hook: once per event, not once per poll."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

__all__ = ["clear_event", "notify_once"]

LOGGER = logging.getLogger("veglia.notify")


def _marker(profile: Any, key: str) -> Path:
    return Path(profile.folder) / "notified" / key.replace("/", "_")


def notify_once(key: str, event: str, subject: str, body: str) -> bool:
    """Send the notification unless one was sent for ``key`` since :func:`clear_event`."""
    from veglia.manage import get_profile
    from veglia.plugin_manager import call_each

    profile = get_profile()
    marker = _marker(profile, key)
    if marker.exists():
        return False
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(subject)
    recipients = [
        a.strip() for a in str(profile.get_option("notify.email")).split(",") if a.strip()
    ]
    for plugin, exc in call_each(
        "notify", event=event, subject=subject, body=body, recipients=recipients, profile=profile
    ):
        LOGGER.error("notification channel %s failed: %s", plugin, exc)
    return True


def clear_event(key: str) -> None:
    """The condition is over: the next occurrence notifies again."""
    from veglia.manage import get_profile

    _marker(get_profile(), key).unlink(missing_ok=True)


def event_pending(key: str) -> bool:
    from veglia.manage import get_profile

    return _marker(get_profile(), key).exists()
