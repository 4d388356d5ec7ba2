"""The simplest monitors, useful to test that monitoring works end to end."""

from __future__ import annotations

from typing import Any

__all__ = ["always_kill"]


def always_kill(node: Any, transport: Any, message: str = "Killed by core.always_kill.") -> str:
    """Kill the job at the first scheduler poll.

    Use it to check that a computer's monitoring path works: the job must end with exit
    STOPPED_BY_MONITOR and this message.

    :param message: the message recorded on the node.
    """
    return message
