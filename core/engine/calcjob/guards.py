"""Guards: a monitor's shell twin, run beside the job on the compute node (issue #32).

A monitor's Python side judges the job at each poll while the daemon runs. Its guard is bash
text the job script runs every ``guard_interval`` seconds beside the job (the ``core.guard``
plugin puts it there through the ``job_script_wrap`` hook), so a job that goes wrong while
no daemon is heard from is still stopped. A monitor declares one with :func:`guarded`::

    @guarded(Guard(shell='[[ -e "$1" ]] || return 0; echo "$1 appeared"; return 1',
                   arguments=lambda kwargs, node: [kwargs["path"]]))
    def file_appeared(node, transport, path: str) -> str | None: ...

The function's contract (called in the job's work directory with the ``arguments`` as its
positional parameters): return 0 to let the job go on; print a one-line reason on stdout
(any further lines are kept as evidence) and return 1 to stop it; any other status, or a
bash error, disables this guard for the job and says why in ``_veglia_guard.log``. It may
keep files under ``$VEGLIA_GUARD_STATE``, a directory of its own; ``$VEGLIA_GUARD_STARTED``
is the job's start (epoch seconds) and ``$VEGLIA_GUARD_NOW`` the time of this check.
See docs/monitors.md, "Guards".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from veglia.exceptions import MonitorError

__all__ = ["Guard", "guard_arguments", "guard_of", "guarded", "positive_kwarg"]

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "__veglia_guard__"


@dataclass(frozen=True)
class Guard:
    """A monitor's shell twin.

    :param shell: the body of a bash function (see the module's docstring for its contract).
    :param arguments: ``(kwargs, node) -> list[str]``: the monitor's kwargs as the function's
        positional arguments. Called at submission to refuse kwargs the guard cannot honour
        (raise :class:`MonitorError` with a one-line message), where ``node`` may be None
        (the builder checked before the job has a node), and again when the job script is
        written, with the job's node (``node.options``).
    :param always: act even while the daemon is heard from; for cheap, exact checks (wall
        time), where waiting for the next poll only wastes the job's time.
    """

    shell: str
    arguments: Callable[[dict[str, Any], Any], list[str]]
    always: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.shell, str) or not self.shell.strip():
            raise MonitorError("Guard shell must be the body of a bash function (a str).")
        if not callable(self.arguments):
            raise MonitorError("Guard arguments must be a function (kwargs, node) -> list[str].")
        if not isinstance(self.always, bool):
            raise MonitorError("Guard always must be True or False.")


def guarded(guard: Guard) -> Callable[[F], F]:
    """Attach ``guard`` to a monitor function (put it above ``watch_files``/``watch_trace``
    or below: their wrappers keep it)."""
    if not isinstance(guard, Guard):
        raise MonitorError(f"guarded takes a Guard, not {guard!r}.")

    def decorate(function: F) -> F:
        setattr(function, _ATTRIBUTE, guard)
        return function

    return decorate


def guard_of(function: Callable[..., Any]) -> Guard | None:
    """The guard attached to a monitor function, or None."""
    guard = getattr(function, _ATTRIBUTE, None)
    return guard if isinstance(guard, Guard) else None


def guard_arguments(
    name: str, entry_point: str, guard: Guard, kwargs: dict[str, Any], node: Any
) -> list[str]:
    """The guard's arguments for these kwargs; a :class:`MonitorError` naming the monitor
    when the guard cannot honour them (also when a third party's function breaks)."""
    where = f"Monitor {name!r} ({entry_point})"
    try:
        arguments = guard.arguments(dict(kwargs), node)
    except MonitorError as exc:
        raise MonitorError(
            f"{where}: its guard cannot honour the kwargs: {exc} Switch the guard off with "
            '"guard": False to keep the monitor alone.'
        ) from None
    except Exception as exc:  # a third party's code: say whose it is
        raise MonitorError(
            f"{where}: its guard's arguments function failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(arguments, list) or not all(isinstance(a, str) for a in arguments):
        raise MonitorError(f"{where}: its guard's arguments must be a list of str.")
    if any("\0" in a for a in arguments):
        raise MonitorError(f"{where}: its guard's arguments cannot hold a NUL byte.")
    return arguments


def positive_kwarg(kwargs: dict[str, Any], name: str, default: float) -> float:
    """``kwargs[name]`` (``default`` when absent) checked to be a number more than 0, for a
    guard's ``arguments``: a :class:`MonitorError` that says so otherwise."""
    value = kwargs.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise MonitorError(f"{name} must be a number more than 0, not {value!r}.")
    return value
