"""Monitors for the tests, used by import path (``monitor_helpers:raising``)."""

from __future__ import annotations

import asyncio
import time

from veglia.engine.calcjob.monitors import MonitorResult


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
