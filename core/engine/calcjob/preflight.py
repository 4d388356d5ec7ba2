"""What is checked before a job is stored, so that a mistake found only when the daemon
runs it (an Excepted job that cannot be replayed) is an error at submission instead."""

from __future__ import annotations

from veglia.exceptions import ConfigurationError
from veglia.orm.computers import Computer
from veglia.orm.users import get_default_user

__all__ = ["check_computer"]


def check_computer(computer: Computer) -> None:
    """The computer is configured for the user; one that needs no configuration
    (``core.local``) is configured now."""
    if computer.is_configured():
        return
    if computer.needs_no_configuration:
        computer.configure()
        return
    raise ConfigurationError(
        f"Computer {computer.label!r} is not configured for {get_default_user().email}: "
        f"run `veglia computer configure {computer.label}` first (`veglia computer test "
        f"{computer.label}` then checks it). Nothing was stored."
    )
