"""Computers that went away and came back: probing them, and playing what their outage paused.

A job whose transport tasks fail on every attempt is paused and marked ``unreachable``
(``CalcJob.mark_unreachable``). Each daemon worker probes the computers of the jobs it
holds so paused, one probe per computer at a time, after 5 s and then ever less often (up
to every 3 minutes); once a probe connects, the worker plays those jobs. A job a person
paused carries no such mark and stays paused.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import UNREACHABLE
from veglia.orm.computers import load_computer
from veglia.orm.queries import has_attribute
from veglia.storage.models import Node

__all__ = ["OutageWatcher", "probe"]

LOGGER = logging.getLogger("veglia.daemon")
FIRST_PROBE = 5.0
MAX_PROBE = 180.0


def probe(label: str) -> str | None:
    """Connect to the computer and ask who we are there; None when it answers, else why not."""

    try:
        with load_computer(label).get_transport() as transport:
            transport.whoami()
    except Exception as exc:  # whatever keeps us out, the computer is not back
        return f"{type(exc).__name__}: {exc}"
    return None


class OutageWatcher:
    """One worker's probes; ``active`` is its processes by pk."""

    def __init__(self, active: dict[int, Any]) -> None:
        self.active = active
        self.next_probe: dict[str, float] = {}
        self.failures: dict[str, int] = {}

    def _paused_for_outage(self) -> dict[str, list[int]]:

        paused = [pk for pk, p in self.active.items() if p is not None and p.paused]
        if not paused:
            return {}
        with get_storage().session() as session:
            rows = session.execute(
                sa.select(Node.id, Node.attributes[UNREACHABLE]).where(
                    Node.id.in_(paused), has_attribute(UNREACHABLE)
                )
            ).all()
        by_computer: dict[str, list[int]] = {}
        for pk, mark in rows:
            if isinstance(mark, dict) and mark.get("computer"):
                by_computer.setdefault(mark["computer"], []).append(pk)
        return by_computer

    async def step(self) -> None:
        now = time.time()
        for label, pks in self._paused_for_outage().items():
            if label not in self.next_probe:
                self._schedule(label, pks, now + FIRST_PROBE)
                continue
            if now < self.next_probe[label]:
                continue
            why = await asyncio.get_running_loop().run_in_executor(None, probe, label)
            if why is None:
                self.next_probe.pop(label, None)
                self.failures.pop(label, None)
                LOGGER.warning("computer %s answers again: playing %d job(s)", label, len(pks))
                for pk in pks:
                    process = self.active.get(pk)
                    if process is not None and process.paused:
                        process.report(f"computer {label} answers again: going on")
                        process.play()
                continue
            failures = self.failures[label] = self.failures.get(label, 0) + 1
            delay = min(MAX_PROBE, FIRST_PROBE * 2**failures)
            LOGGER.info(
                "computer %s still unreachable (%s); next probe in %.0f s", label, why, delay
            )
            self._schedule(label, pks, time.time() + delay)

    def _schedule(self, label: str, pks: list[int], when: float) -> None:
        self.next_probe[label] = when
        for pk in pks:  # for `veglia process show`
            process = self.active.get(pk)
            node = getattr(process, "node", None)
            mark = node.get_attribute(UNREACHABLE) if node is not None else None
            if node is not None and mark:
                node.set_attribute(UNREACHABLE, {**mark, "next_probe": when})

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(1)
            try:
                await self.step()
            except Exception:  # the database is away: look again
                LOGGER.exception("could not probe the unreachable computers")
