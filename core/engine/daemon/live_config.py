"""The daemon follows `veglia config set` while it runs.

The supervisor and each worker look at the configuration files about every half second
(one stat each); when they changed, the profile's options are read again, in place, so the
next job step, notification or report uses the new values. Options read once at start
(``Option.needs_restart``: the database, the broker, a worker's slots and lease timeout)
are said to wait for `veglia daemon restart`, in the daemon log.
"""

from __future__ import annotations

import logging

from veglia.config.options import get_option
from veglia.exceptions import InvalidOptionError
from veglia.manage import refresh_profile

__all__ = ["INTERVAL", "follow_config", "needs_restart"]

LOGGER = logging.getLogger("veglia.daemon")
#: Seconds between two looks at the configuration files.
INTERVAL = 0.5


def needs_restart(name: str) -> bool:
    """Whether a running daemon only takes option ``name`` at `veglia daemon restart`."""
    try:
        return get_option(name).needs_restart
    except InvalidOptionError:  # an option of a plugin not loaded here: nothing reads it
        return False


def follow_config(*, log: bool = True) -> list[str]:
    """Read the profile's options again if they changed; the names of those that did.

    ``log``: say so in the daemon log (the supervisor does, for the whole daemon).
    """
    changed = refresh_profile()
    if changed and log:
        later = [name for name in changed if needs_restart(name)]
        now = [name for name in changed if name not in later]
        if now:
            LOGGER.warning("option(s) %s changed: in effect now", ", ".join(now))
        if later:
            LOGGER.warning(
                "option(s) %s changed: in effect at `veglia daemon restart`", ", ".join(later)
            )
    return changed
