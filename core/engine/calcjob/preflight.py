"""What is checked before a job is stored, so that a mistake found only when the daemon
runs it (an Excepted job that cannot be replayed) is an error at submission instead."""

from __future__ import annotations

from veglia.exceptions import ConfigurationError
from veglia.orm.computers import Computer
from veglia.orm.users import get_default_user

__all__ = ["check_computer"]


def check_computer(
    computer: Computer, known_configured: bool = False, known_enabled: bool = False
) -> None:
    """The computer is configured for the user, and not disabled for them (`veglia
    computer disable`); one that needs no configuration (``core.local``) is configured now.

    ``known_configured``, ``known_enabled``: a recent read found it so (a cache of the
    runner's, which this process's own changes clear): then it is not read again. Not
    configured or disabled is never taken from a cache, so `veglia computer configure` or
    `enable` in another shell takes at once.
    """
    _check_configured(computer, known_configured)
    if known_enabled or computer.is_enabled():
        return
    raise ConfigurationError(
        f"Computer {computer.label!r} is disabled for {get_default_user().email}: it takes "
        f"no new jobs. Run `veglia computer enable {computer.label}` first. Nothing was stored."
    )


def _check_configured(computer: Computer, known_configured: bool) -> None:
    if known_configured or computer.is_configured():
        return
    if computer.needs_no_configuration:
        computer.configure()
        return
    raise ConfigurationError(
        f"Computer {computer.label!r} is not configured for {get_default_user().email}: "
        f"run `veglia computer configure {computer.label}` first (`veglia computer test "
        f"{computer.label}` then checks it). Nothing was stored."
    )
