"""The daemon's intake: each enabled pipeline setup's source is listed every
``pipeline.poll_interval`` seconds, and a run is started for each new element (and for each
element whose content changed), at most ``max_active`` of a setup's runs at once.

It runs on the first worker of each daemon (``PRIMARY_ENV``), on that worker's loop: a
source on a computer is read through the worker's transport queue, the same pooled and
throttled connection its jobs use. Two daemons, on one host or several, may take in the
same setup: the rows of :mod:`veglia.pipeline_elements` (a unique key per element and
content, a compare-and-set claim) start each element once between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from typing import Any

from veglia.datasources import DataSource, Known, Listing, combined_checksum
from veglia.engine.daemon import leases
from veglia.engine.daemon.housekeeping import log_failure
from veglia.engine.launch import submit
from veglia.engine.metrics import METRICS
from veglia.engine.pipeline_setup_check import run_builder, source_of
from veglia.engine.process import NODE_ATTRIBUTES
from veglia.engine.runner import Runner
from veglia.exceptions import (
    PipelineSetupError,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
    VegliaError,
)
from veglia.manage import get_profile
from veglia.notifications import notify
from veglia.orm.attributes import PIPELINE_RUN
from veglia.orm.computers import Computer, load_computer
from veglia.orm.data import SinglefileData
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node
from veglia.pipeline_elements import (
    ElementRow,
    active_runs,
    claim_new,
    element_key,
    listing_digest,
    mark_notified_done,
    mark_refused,
    mark_started,
    pipeline_progress,
    record_listing,
    record_source_error,
    release_claims,
    rewind_stale_claims,
)
from veglia.pipeline_setups import PipelineSetup, list_pipeline_setups
from veglia.transports import Transport

__all__ = ["PipelineIntake"]

LOGGER = logging.getLogger("veglia.daemon")
#: Elements started per commit of their rows (and per read of their files).
START_BATCH = 100
#: A claim older than this whose run was not stored is taken to be its dead worker's.
STALE_CLAIM_SECONDS = 300.0


class PipelineIntake:
    """Lists the enabled setups' sources and starts their new elements' runs."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.worker = str(leases.this_worker())
        #: Each setup version's last listing cache: files unchanged are not read again.
        self._known: dict[int, Known] = {}

    @property
    def interval(self) -> float:
        return float(get_profile().get_option("pipeline.poll_interval"))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            began = time.monotonic()
            try:
                await self.look(stop)
            except Exception as exc:  # the database is away: look again next time
                log_failure("could not take in pipeline elements", exc)
            wait = max(0.0, self.interval - (time.monotonic() - began))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=wait)

    async def look(self, stop: asyncio.Event | None = None) -> int:
        """One look at every enabled setup; how many runs it started."""
        started = 0
        for setup in list_pipeline_setups():
            if not setup.enabled or (stop is not None and stop.is_set()):
                continue
            try:
                started += await self.take_in(setup, stop)
            except (VegliaError, OSError) as exc:
                message = " ".join(str(exc).split())
                LOGGER.warning("pipeline setup %s: %s", setup.name, message)
                record_source_error(setup.name, message)
        return started

    async def take_in(self, setup: PipelineSetup, stop: asyncio.Event | None = None) -> int:
        """List the setup's source, record what is new, start what may start."""
        assert setup.pk is not None
        source = source_of(setup)
        listing = await self._list(setup, source)
        self._known[setup.pk] = dict(listing.known)
        await asyncio.get_running_loop().run_in_executor(None, record_listing, setup, listing)
        rewind_stale_claims(setup.name, STALE_CLAIM_SECONDS, self._claimer_gone)
        started = await self._start(setup, source, stop)
        self._tell_if_done(setup, listing)
        return started

    async def _list(self, setup: PipelineSetup, source: DataSource) -> Listing:
        known = self._known.get(setup.pk or 0)
        if not source.needs_transport:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, source.elements, None, known)
        computer = load_computer(setup.source_computer or setup.computer or "")
        async with self.runner.lease_transport(computer) as lease:
            return await lease.run(source.elements, lease.transport, known)

    def _claimer_gone(self, worker: str | None) -> bool:
        """Whether a claim's worker no longer starts it: gone from this host, or this very
        worker, whose looks run one at a time (a claim of its own left over from a look cut
        short)."""
        if not worker or worker == self.worker:
            return True
        parts = worker.split("/")
        try:
            return leases.local_holder_gone(worker, int(parts[1]))
        except (IndexError, ValueError):
            return False

    async def _start(
        self, setup: PipelineSetup, source: DataSource, stop: asyncio.Event | None
    ) -> int:
        limit = None
        if setup.max_active is not None:
            limit = setup.max_active - active_runs(setup.name)
            if limit <= 0:
                return 0
        claimed = claim_new(setup, limit, self.worker)
        computer = None
        if source.needs_transport:
            computer = load_computer(setup.source_computer or setup.computer or "")
        started = 0
        for first in range(0, len(claimed), START_BATCH):
            if stop is not None and stop.is_set():
                release_claims([row.id for row in claimed[first:]], self.worker)
                break
            batch = claimed[first : first + START_BATCH]
            try:
                contents = await self._read(computer, batch)
            except TransportError:
                release_claims([row.id for row in claimed[first:]], self.worker)
                raise
            runs: list[tuple[int, int]] = []
            tried = 0
            try:
                for row in batch:
                    tried += 1
                    pk = self._start_one(setup, source, row, contents.get(row.id))
                    if pk is not None:
                        runs.append((row.id, pk))
            except BaseException:
                # The database or the broker went away mid-batch: the rows not tried go back
                # at once; the one under way may have its run stored (the next look sees).
                with contextlib.suppress(Exception):
                    untried = claimed[first + tried :]
                    release_claims([row.id for row in untried], self.worker)
                raise
            finally:
                # One commit for the batch: a run names its element already, so a worker
                # that dies before this commit leaves nothing a later look cannot finish.
                with contextlib.suppress(Exception):
                    mark_started(runs, self.worker)
            started += len(runs)
        METRICS.pipeline_runs_started += started
        return started

    async def _read(self, computer: Computer | None, rows: list[ElementRow]) -> dict[int, Any]:
        """Each element's file contents (or why they could not be read), in one call on the
        connection's thread: the bytes of each file, or why they could not be read."""
        if computer is None:
            return {}

        def read_all(transport: Transport) -> dict[int, Any]:
            read: dict[int, Any] = {}
            for row in rows:
                try:
                    read[row.id] = [transport.read_bytes(path) for path in row.files]
                except (TransportConnectionError, TransportTimeoutError):
                    raise  # the computer, not this element: all wait for the next look
                except (OSError, TransportError) as exc:
                    read[row.id] = exc
            return read

        async with self.runner.lease_transport(computer) as lease:
            return await lease.run(read_all, lease.transport)

    def _start_one(
        self, setup: PipelineSetup, source: DataSource, row: ElementRow, contents: Any
    ) -> int | None:
        """The pk of the run started for ``row``, or None (refused, or changed meanwhile)."""
        if isinstance(contents, Exception):
            mark_refused(row.id, f"its files could not be read: {contents}", self.worker)
            return None
        try:
            element_nodes = self._element_nodes(row, contents)
        except VegliaError as exc:
            mark_refused(row.id, f"its nodes could not be loaded: {exc}", self.worker)
            return None
        if element_nodes is None:
            # Its next listing has the new content (a new element); this one never runs.
            release_claims([row.id], self.worker)
            return None
        kind = "a file" if source.needs_transport else "a node"
        try:
            builder = run_builder(setup, element_nodes, kind)
        except PipelineSetupError as exc:
            mark_refused(row.id, str(exc), self.worker)
            LOGGER.warning("pipeline setup %s: element %s: %s", setup.name, row.identity, exc)
            return None
        attributes = {
            PIPELINE_RUN: {
                "setup": setup.name,
                "version": setup.version,
                "element": row.id,
                "identity": row.identity,
            }
        }
        token = NODE_ATTRIBUTES.set(attributes)
        try:
            return submit(builder).pk
        finally:
            NODE_ATTRIBUTES.reset(token)

    @staticmethod
    def _element_nodes(row: ElementRow, contents: list[bytes] | None) -> dict[str, Node] | None:
        """The element's files as SinglefileData by file name, or its nodes by UUID
        (``contents`` None: a source of nodes); None when the files changed since they were
        listed (their checksum is not the element's)."""
        if contents is None:
            return {uuid: load_node(uuid) for uuid in row.files}
        digests = [hashlib.sha256(content).hexdigest() for content in contents]
        if combined_checksum(digests) != row.checksum:
            return None
        nodes: dict[str, Node] = {}
        for path, content in zip(row.files, contents, strict=True):
            name = path.rsplit("/", 1)[-1]
            nodes[name] = SinglefileData(content, name)
        return nodes

    def _tell_if_done(self, setup: PipelineSetup, listing: Listing) -> None:
        """One notification when every element the source lists has a run that ended (and
        nothing is still being written); a new element, once done, makes a new one."""
        if listing.waiting or not listing.elements:
            return
        progress = pipeline_progress(setup.name, failed_limit=5)
        if not progress.all_ended:
            return
        digest = listing_digest([element_key(e.identity, e.checksum) for e in listing.elements])
        if not mark_notified_done(setup.name, digest):
            return
        failed = progress.failed_total
        lines = [
            f"Pipeline setup {setup.name} has run every element of its data source "
            f"({setup.source}): {progress.done} done, {failed} failed.",
        ]
        lines += [f"  {identity}: {why}" for identity, _, why in progress.failed]
        lines.append(f"\nSee `veglia pipeline show {setup.name}`.")
        notify(
            "pipeline_setup_done",
            f"pipeline {setup.name}: all {progress.seen} elements ended ({failed} failed)",
            "\n".join(lines),
        )
