"""How a long operation says how far it has got, for a caller that shows it (the CLI's
progress bars, on a terminal only; see ``veglia.cli.progress_bars``).

The operation calls ``progress(what, done, total)`` as it goes: ``what`` names the part
under way ("checking files"), ``done`` counts its items so far, ``total`` is how many there
are (None when not known ahead). It must cost next to nothing when nobody watches:
:func:`no_progress` is every operation's default.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ProgressReport", "no_progress"]

ProgressReport = Callable[[str, int, "int | None"], None]


def no_progress(what: str, done: int, total: int | None) -> None:
    """Nobody watches."""
