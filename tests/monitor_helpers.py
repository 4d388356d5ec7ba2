"""Monitors for the tests, used by import path (``monitor_helpers:raising``)."""

from __future__ import annotations

import asyncio
import threading
import time

from veglia.engine.calcjob.guards import Guard, guarded
from veglia.engine.calcjob.monitors import MonitorResult, Regex


def raising(node, transport):
    """Always raises."""
    raise RuntimeError("monitor bug")


def hanging(node, transport, seconds: float = 30):
    """Sleeps past any sensible timeout."""
    time.sleep(seconds)


def wrong_type(node, transport):
    """Returns what a monitor must not."""
    return 42


def counting(node, transport, state):
    """Counts its calls in its state."""
    state["calls"] = state.get("calls", 0) + 1


async def async_pattern(node, transport, path: str, word: str):
    """An async monitor: kills when ``word`` is in ``path``."""
    await asyncio.sleep(0)
    try:
        text = (await transport.read_bytes(path)).decode()
    except Exception:
        return None
    return f"{word} seen" if word in text else None


def stop_and_keep(node, transport):
    """Stops at once, retrieving and parsing, keeping the parser's exit code."""
    return MonitorResult("stop but keep", retrieve=True, parse=True, override_exit_code=False)


def disable_me(node, transport, state):
    state["calls"] = state.get("calls", 0) + 1
    return MonitorResult("enough", action="disable-self", outputs={"note": "seen once"})


#: Released by the tests at teardown, so no thread of a blocked monitor outlives its test.
RELEASE = threading.Event()
#: Calls of ``blocked`` started, by the monitor's name.
STARTED: dict[str, int] = {}


def blocked(node, transport, name: str):
    """Hangs until the test releases it (a monitor whose remote call never returns)."""
    STARTED[name] = STARTED.get(name, 0) + 1
    RELEASE.wait()


async def blocking_async(node, transport, seconds: float = 40):
    """An async monitor that blocks instead of awaiting (a sync call inside async def)."""
    RELEASE.wait(seconds)


def trace_seen(node, transport, samples: int = 3, trace=None):
    """Stops the job once its live trace has ``samples`` samples, naming their rss."""
    if trace is not None and len(trace.series) >= samples:
        return "saw samples at rss " + ", ".join(str(s.rss) for s in trace.series)
    return None


def _broken_arguments(kwargs, node):
    return [kwargs.get("path", "out.log")]


@guarded(Guard(shell='[[ -e "$1" ]]\nveglia_no_such_command "$1"', arguments=_broken_arguments))
def broken_guard(node, transport, path: str = "out.log"):
    """A monitor whose guard fails on the node (a command it lacks): the guard is switched
    off for the job, the job goes on."""
    return None


@guarded(Guard(shell="if then fi", arguments=lambda kwargs, node: []))
def unparsable_guard(node, transport):
    """A monitor whose guard is not bash: switched off for the job before its first check."""
    return None


def regex_pattern(node, transport, pattern: Regex, label: Regex | None = None):
    """Takes a regular expression (the public annotation) and an optional one."""
    return None


def reads_missing(node, transport, path: str = "never.log"):
    """Reads a file the job never writes: a TransportError at every call."""
    transport.read_bytes(path)


def declares_files(node, transport, path: str = "x", files: dict | None = None):
    """Declares ``files`` without ``watch_files``: the engine never fills it, nor may a user."""
    return None
