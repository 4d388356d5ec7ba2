"""A daemon worker: runs processes until they terminate, each under its lease.

With a broker the worker takes process tasks from the profile's RabbitMQ queue; a task is
acknowledged only when its process terminates, so the processes of a worker that dies are
delivered to another. Without a broker there is a single worker, which takes every
unfinished submitted process from the database, at start and as they are submitted.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import gc
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import kiwipy
from plumpy.communications import LoopCommunicator, convert_to_comm

from veglia.config.profile import Profile
from veglia.engine.calcjob.kill import PendingCancelSweeper, owe_cancel
from veglia.engine.daemon import leases
from veglia.engine.daemon.broker_tasks import create_communicator
from veglia.engine.daemon.control import apply_database_requests
from veglia.engine.daemon.files import DaemonFiles, write_json
from veglia.engine.daemon.housekeeping import PRIMARY_ENV, Housekeeper, log_failure
from veglia.engine.daemon.live_config import INTERVAL as CONFIG_INTERVAL
from veglia.engine.daemon.live_config import follow_config
from veglia.engine.daemon.outages import OutageWatcher
from veglia.engine.daemon.pipeline_intake import PipelineIntake
from veglia.engine.daemon.rpc_queue import PROCESS_GONE, SharedRpcQueue
from veglia.engine.daemon.task_bridge import task_bridge
from veglia.engine.dehydration import PausedSleep, Sleeps, Wake
from veglia.engine.metrics import METRICS
from veglia.engine.process import load_process
from veglia.engine.runner import Runner, set_runner
from veglia.entry_points import plugin_distributions
from veglia.exceptions import NotExistent, ProcessClassError, ProcessDehydrated, StepAbandoned
from veglia.manage import get_storage
from veglia.notifications import notify
from veglia.orm.loading import load_node
from veglia.orm.process_nodes import CalcJobNode, ProcessNode
from veglia.orm.queries import active_process_pks
from veglia.storage.outage import is_storage_outage, wait_for_storage

__all__ = ["QuietCommunicator", "Worker"]

LOGGER = logging.getLogger("veglia.daemon")


def _carry_out(process: Any, action: str, message: str | None) -> None:
    if action == "kill":
        process.kill(message or "Killed through the CLI")
    elif action == "pause":
        process.pause(message or "Paused through the CLI")
    elif action == "play":
        process.play()


def _except_unloadable(node: ProcessNode, exc: ProcessClassError) -> None:
    """End the process Excepted from its record, as a process that raised would be (exit
    message, report line, notification), and say so in the daemon's log in one line. A
    scheduler job it has is cancelled (``cancel_pending``): veglia no longer follows it."""
    with get_storage().transaction():
        if isinstance(node, CalcJobNode):
            owe_cancel(node)
        node.end_from_record(
            "excepted", f"{type(exc).__name__}: {exc}", "ERROR", f"The process excepted: {exc}"
        )
    LOGGER.error("%s", exc)
    notify(
        "process_excepted",
        f"process {node.pk} ({node.process_type}) excepted",
        f"Process {node.pk} cannot be loaded by the daemon:\n\n{exc}\n\nSee `veglia process "
        f"report {node.pk}`.",
    )


# -- worker -----------------------------------------------------------------------------------
class QuietCommunicator(LoopCommunicator):
    """plumpy's loop communicator without broadcasts, one RPC queue per worker, and tasks
    handed to the worker's loop without plumpy's chain of futures.

    plumpy broadcasts every state change and waits for the broker to take it; nothing in
    veglia listens (states are in the database), and the wait cost a tenth of a worker's time.
    What it keeps per process (RPC wrappers, a taken task's futures) is kept small: a worker
    holds thousands of waiting jobs (see ``bench/daemon_memory.py``).
    """

    def __init__(
        self,
        communicator: Any,
        loop: asyncio.AbstractEventLoop,
        fallback: Callable[[str], Any] = lambda key: None,
    ) -> None:
        super().__init__(communicator, loop)
        # Its processes' RPCs come with the token of its leases (see rpc_queue); those of
        # its dehydrated processes wake them (``fallback``).
        self._rpc = SharedRpcQueue(
            communicator,
            leases.this_worker().token,
            lambda s: convert_to_comm(s, loop),
            lambda key: (lambda s: None if s is None else convert_to_comm(s, loop))(fallback(key)),
        )

    # Never called by veglia; plumpy's says it returns a future (kiwipy's, untyped).
    def broadcast_send(self, *args: Any, **kwargs: Any) -> bool:  # type: ignore[override]
        return True

    # Nothing in veglia broadcasts to processes (control is by RPC): a subscription per
    # process would only cost memory and a broker round trip at each start.
    def add_broadcast_subscriber(self, subscriber: Any, identifier: Any = None) -> Any:
        return identifier

    def remove_broadcast_subscriber(self, identifier: Any) -> None:
        return None

    def add_rpc_subscriber(self, subscriber: Any, identifier: Any = None) -> Any:
        return self._rpc.add(subscriber, identifier)

    # A task is held until its process ends: see task_bridge for why not plumpy's way.
    def add_task_subscriber(self, subscriber: Any, identifier: Any = None) -> Any:
        bridged = task_bridge(subscriber, self._loop)
        return self._communicator.add_task_subscriber(bridged, identifier)

    def remove_rpc_subscriber(self, identifier: Any) -> None:
        self._rpc.remove(identifier)

    def listen_for_sleepers(self) -> None:
        """Take the RPCs of processes this worker holds without having loaded them."""
        self._rpc.listen()


#: Allocations between two young-generation collections in a worker (Python's default: 700).
GC_THRESHOLD = 10_000
#: Processes leaving a worker between two full collections (see ``_collect_now_and_then``).
COLLECT_EVERY = 1000
#: Seconds between two looks at a paused process kept awake while a kill, pause or play is
#: delivered to it (``Worker.awake``): it sleeps again once the delivery is over.
DELIVERY_LOOK = 0.05


def _tune_garbage_collection() -> None:
    """Fewer, cheaper cyclic collections in a worker: what it imported to start (modules,
    tables, the engine) stays for its life, so collections stop walking it; and the young
    generation is collected every 10,000 allocations, not 700. A job's steps allocate
    thousands of short-lived objects, nearly all freed by reference counting: the default
    made the collector about 3% of a busy worker's CPU (bench/throughput.py prints it).
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, older, oldest)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``; None elsewhere."""
    import ctypes  # Lazy: only a worker that frees many processes needs it.
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _return_free_memory() -> None:
    """Give the pages malloc holds free back to the system: a worker that stepped a
    thousand processes at once, then dehydrated them, otherwise keeps its peak for good."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class Worker:
    """Runs the processes handed to it, each until it terminates."""

    def __init__(self, profile: Profile) -> None:

        self.profile = profile
        #: The plugin packages this worker imports, as installed when it started.
        self.plugin_versions = plugin_distributions()
        self.files = DaemonFiles(profile)
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.communicator: Any = None
        if profile.broker_url:
            slots = int(profile.get_option("daemon.worker_prefetch"))
            self._thread_communicator = create_communicator(
                profile, task_prefetch_count=slots, takes_tasks=True
            )
            self.communicator = QuietCommunicator(
                self._thread_communicator, self.loop, self._rpc_for_sleeper
            )
        self.runner = Runner(loop=self.loop, communicator=self.communicator)
        set_runner(self.runner)
        self.active: dict[int, Any] = self.runner.local_processes
        #: Its dehydrated processes: held (their leases renewed), not in memory.
        self.sleeps = Sleeps(self._rehydrate)
        if profile.get_option("daemon.dehydrate"):
            self.runner.sleeps = self.runner.child_watcher.sleeps = self.sleeps
        #: Futures of callers waiting for a woken process to be live (``awake``).
        self._live_waiters: dict[int, asyncio.Future[Any]] = {}
        #: Woken processes waiting their turn to load, and how many are loaded (stepping).
        self._to_wake: collections.deque[int] = collections.deque()
        self._queued: set[int] = set()  # those of _to_wake still to start
        self._waking = 0
        self._left = 0  # processes gone since the last full collection
        self.wake_limit = int(profile.get_option("daemon.worker_prefetch"))
        self._stop = asyncio.Event()
        self.me = leases.this_worker()
        #: Processes whose lease went with the commit of their end (see _release_at_end).
        self._released: set[int] = set()
        self.lease_timeout = float(profile.get_option("daemon.lease_timeout"))
        # Read once, and not handed down to the jobs this worker starts.
        primary = os.environ.pop(PRIMARY_ENV, None) == "1"
        self.housekeeper = None
        self.intake: PipelineIntake | None = None
        if primary:

            def write_now() -> None:
                # `daemon status` counts a repair at once, not once the process has ended.
                self.loop.call_soon_threadsafe(self._status_now)

            self.housekeeper = Housekeeper(profile, on_repair=write_now)

    def run(self) -> None:
        _tune_garbage_collection()
        on_signals(
            self.loop,
            {
                signal.SIGTERM: self._stop.set,
                signal.SIGINT: self._stop.set,
                signal.SIGUSR1: _log_task_stacks,
            },
        )
        if self.communicator is not None:
            self.communicator.add_task_subscriber(self._on_task)
        else:
            self.loop.create_task(self._take_from_database())
        self.loop.create_task(self._write_status())
        self.loop.create_task(self._follow_config())
        self.loop.create_task(self._renew_leases())
        self.loop.create_task(OutageWatcher(self.active).run(self._stop))
        if self.housekeeper is not None:
            self.housekeeper.start()
            # On this loop: the cancels go through this worker's transport queue.
            self.loop.create_task(PendingCancelSweeper(self.runner).run(self._stop))
            self.intake = PipelineIntake(self.runner)
            self.loop.create_task(self.intake.run(self._stop))
        try:
            self.loop.run_until_complete(self._stop.wait())
        finally:
            if self.housekeeper is not None:
                self.housekeeper.stop()
            self.files.worker_status(os.getpid()).unlink(missing_ok=True)
            if self.communicator is not None:
                self._thread_communicator.close()
            self.runner.transport_queue.close()

    async def _on_task(self, _communicator: Any, task: dict[str, Any]) -> bool:
        return await self.continue_process(int(task["pid"]))

    async def continue_process(self, pk: int, *, woken: bool = False) -> bool:
        """Load the process from its checkpoint and step it until it terminates, or until
        it waits dehydrated (see ``veglia.engine.dehydration``): either way its broker task
        is then acknowledged, and a dehydrated process keeps its lease. ``woken``: a process
        of this worker woken from dehydration, whose lease it holds.

        When the database goes away under a step, the process is dropped as it stands and
        loaded again from its checkpoint once the database answers, still under this
        worker's lease (which its renewals keep, or this worker stops: see ``_fence``).
        """
        if not woken and self._holds(pk):
            return True  # a duplicate task: this worker holds the process already
        follow_config(log=False)  # a new process starts with the options as they are now
        held, ended, asleep = woken, False, False
        try:
            while True:
                try:
                    # The node read to take the process is the one it starts from; after an
                    # outage it is read again.
                    node = None if held else await self._take(pk)
                    held = held or node is not None
                    if not held:
                        return True
                    await self._step(pk, node)
                    ended = True
                    return True
                except ProcessDehydrated as exc:
                    self._drop(pk)
                    self.sleeps.add(exc.sleep)  # type: ignore[arg-type]  # one of dehydration.Sleep
                    asleep = True
                    return True
                except StepAbandoned as exc:
                    LOGGER.warning("%s", exc)
                except asyncio.CancelledError:
                    # The task's broker channel closed: the broker delivers the task again.
                    self._drop(pk)
                    raise
                except Exception as exc:
                    if not is_storage_outage(exc):
                        LOGGER.exception("process %s failed in the worker", pk)
                        return True
                    LOGGER.warning("process %s: the database did not answer (%s)", pk, exc)
                self._drop(pk)
                await wait_for_storage()
        finally:
            if self.active.pop(pk, None) is not None:
                self._collect_now_and_then()
            waiter = self._live_waiters.pop(pk, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)  # it did not come back: the caller says so
            # Released in the commit of its end, unless that commit did not happen here.
            released = pk in self._released and ended
            self._released.discard(pk)
            if held and not released and not asleep:
                try:
                    leases.release(pk, self.me)
                except Exception:  # it expires by itself
                    LOGGER.exception("could not release the lease on process %s", pk)

    def _collect_now_and_then(self) -> None:
        """A process left this worker (it ended or dehydrated): every ``COLLECT_EVERY``
        of them, a full cyclic collection. A process is a web of references (its states,
        runtime and node point back at it) that only the cyclic collector frees, and one
        that lived a few polls has reached the oldest generation, which CPython collects
        rarely: a worker that dehydrated 8,000 jobs held them all, 12 kB each."""
        self._left += 1
        if self._left >= COLLECT_EVERY:
            self._left = 0
            gc.collect()
            _return_free_memory()

    def _drop(self, pk: int) -> None:
        """Stop stepping the process here as it stands (its checkpoint is its state)."""
        stale = self.active.get(pk)
        if stale is not None:
            stale.close()  # its RPC subscription must not outlive it

    async def _take(self, pk: int) -> ProcessNode | None:
        """The process's node when this worker now holds it (it is unfinished and no other
        live worker runs it), else None."""

        with get_storage().transaction():  # the read and the lease: one commit
            try:
                node = load_node(pk)
            except NotExistent:
                node = None
            if not isinstance(node, ProcessNode):  # deleted since it was queued, or forged
                LOGGER.warning("task dropped: there is no process %s (deleted?)", pk)
                return None
            if node.is_terminated:
                return None
            # A task delivered again (after a broker restart, or a repair) while another
            # live worker runs the process: that worker finishes it; if it dies, its lease
            # expires and the daemon's reconciler queues the process again.
            if not leases.acquire(pk, self.me, self.lease_timeout):
                LOGGER.info("process %s is held by another live worker: task dropped", pk)
                return None
        return node

    async def _step(self, pk: int, node: ProcessNode | None = None) -> None:
        if node is None:
            node = load_node(pk)  # type: ignore[assignment]
        assert node is not None
        if node.is_terminated:
            return
        sleeps = self.runner.sleeps
        paused = PausedSleep.of(node) if sleeps is not None and sleeps.may_sleep(pk) else None
        if paused is not None:
            # Not even loaded: it does nothing until played. Its RPCs come here all the same.
            if self.communicator is not None:
                self.communicator.listen_for_sleepers()
            raise ProcessDehydrated(paused)
        try:
            process = load_process(
                node,
                loop=self.loop,
                communicator=self.communicator,
            )
        except ProcessClassError as exc:
            # No worker can load it either: it ends here, once, rather than going round.
            _except_unloadable(node, exc)
            return
        if node.paused:
            process.pause(node.paused_reason or None)
        elif process.paused:  # played after a checkpoint that does not say so (older ones)
            process.play()
        process.write_when_terminated(functools.partial(self._release_at_end, pk))
        self.active[pk] = process
        waiter = self._live_waiters.pop(pk, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(process)
        await self._step_until_terminated(pk, process)

    async def _step_until_terminated(self, pk: int, process: Any) -> None:
        """plumpy's ``step_until_terminated``, but a process paused for a person leaves
        memory (a ``PausedSleep``) once its pause has taken effect (which checkpoints it) and
        nothing is being delivered to it, rather than waiting in its next step for a play.
        (What ``CalcJob.step_until_terminated`` adds is for runs outside the daemon.)"""
        sleeps = self.runner.sleeps
        if sleeps is None:  # daemon.dehydrate off: a paused process waits live
            await process.step_until_terminated()
            return
        while not process.has_terminated():
            paused = PausedSleep.of(process.node) if process.paused else None
            if paused is None:
                await process.step()
            elif sleeps.may_sleep(pk):
                raise ProcessDehydrated(paused)
            else:  # the kill, pause or play being delivered acts first
                await asyncio.sleep(DELIVERY_LOOK)

    def _rehydrate(self, pk: int, urgent: bool) -> None:
        """``Sleeps``' way back: step the woken process again, from its checkpoint. At most
        ``daemon.worker_prefetch`` woken processes are loaded at once, the rest waiting
        their turn as a pk each (a poll may wake 100,000 jobs that ended together);
        ``urgent`` ones (a kill, pause or play waits) go at once."""
        if urgent:
            self._start_woken(pk)
            return
        self._to_wake.append(pk)
        self._queued.add(pk)
        self._woken_done(None)

    def _start_woken(self, pk: int) -> None:
        self.active[pk] = None  # held: not claimed again before its task runs
        self._waking += 1
        task = self.loop.create_task(self.continue_process(pk, woken=True))
        task.add_done_callback(self._woken_done)

    def _woken_done(self, task: asyncio.Task[Any] | None) -> None:
        """A woken process left (``task`` done), or one more waits: start those whose turn
        came."""
        if task is not None:
            self._waking -= 1
        while self._to_wake and self._waking < self.wake_limit:
            pk = self._to_wake.popleft()
            if pk in self._queued:  # not taken out of turn since
                self._queued.discard(pk)
                self._start_woken(pk)

    @contextlib.asynccontextmanager
    async def awake(self, pk: int, timeout: float = 30.0) -> AsyncIterator[Any]:
        """Process ``pk`` stepping in this worker for the block, woken first if it sleeps
        and kept from dehydrating until the block ends (a kill, pause or play is delivered
        in it); None when this worker does not hold it, or it did not come back in time."""
        self.sleeps.keep_awake(pk)
        try:
            process = self.active.get(pk)
            if process is None and self._holds(pk):
                waiter = self._live_waiters.get(pk)
                if waiter is None:
                    waiter = self._live_waiters[pk] = self.loop.create_future()
                if pk in self._queued:  # woken, waiting its turn: now
                    self._queued.discard(pk)
                    self._start_woken(pk)
                else:
                    self.sleeps.wake(pk, Wake(), urgent=True)
                with contextlib.suppress(asyncio.TimeoutError):
                    process = await asyncio.wait_for(asyncio.shield(waiter), timeout)
            yield process
        finally:
            self.sleeps.let_sleep(pk)

    def _rpc_for_sleeper(self, key: str) -> Any:
        """The RPC subscriber of a process this worker holds dehydrated (``key``, its pk):
        it wakes the process and hands it the message. None for any other key."""
        pk = int(key) if key.isdigit() else None
        if pk is None or not self._holds(pk):
            return None

        async def deliver(communicator: Any, message: Any) -> Any:
            async with self.awake(pk) as process:
                if process is None:
                    raise kiwipy.RemoteException(PROCESS_GONE)
                return process.message_receive(communicator, message)

        return deliver

    def _release_at_end(self, pk: int) -> None:
        # In the commit of the process's end: no moment where it has ended yet is held.
        leases.release(pk, self.me)
        self._released.add(pk)

    async def _take_from_database(self) -> None:
        """Without a broker: every unfinished submitted process is ours. New ones are looked
        for every half second; all of them, and every request written on them, less often
        the more there are (a worker may hold 100,000). At most ``daemon.worker_prefetch``
        are live at once, as with a broker; the others wait their turn in the database."""
        newest, swept, every = 0, float("-inf"), 0.5
        looked, control_seen = float("-inf"), 0.0
        while not self._stop.is_set():
            try:
                if time.monotonic() - looked >= 0.5:
                    looked = time.monotonic()
                    sweep = looked - swept >= every
                    pks = active_process_pks(daemon=True, after=None if sweep else newest)
                    if sweep:
                        swept, every = looked, max(0.5, len(pks) / 10_000)
                    for pk in pks:
                        if pk not in self.active and not self._holds(pk):
                            # As a broker's prefetch would: the rest wait their turn.
                            if len(self.active) >= self.wake_limit:
                                break
                            self.active[pk] = None
                            self.loop.create_task(self._continue_claimed(pk))
                        newest = max(newest, pk)
                    control_seen = self._apply_control_requests(control_seen, everywhere=sweep)
                elif self._control_written() != control_seen:  # a request: at once
                    control_seen = self._apply_control_requests(control_seen, everywhere=True)
            except Exception as exc:
                if not is_storage_outage(exc):
                    raise
                LOGGER.warning("cannot look for submitted processes: %s", exc)
                await wait_for_storage()
            await asyncio.sleep(0.1)

    async def _continue_claimed(self, pk: int) -> None:
        self.active.pop(pk, None)
        await self.continue_process(pk)

    def _apply_control_requests(self, seen: float, *, everywhere: bool) -> float:
        """Kill, pause and play requests written on the nodes (no broker): those of live
        processes at each look; those of sleeping ones when a request was written since
        ``seen`` (the mtime of ``control_requested``) or ``everywhere``. The mtime seen."""
        written = self._control_written()
        look_everywhere = everywhere or written != seen
        live = None if look_everywhere else [pk for pk, p in self.active.items() if p is not None]
        apply_database_requests(live, self._holds, self._deliver_request)
        return written

    def _control_written(self) -> float:
        """When a request was last written for the daemon (``control_requested``)."""
        try:
            return self.files.control_requested.stat().st_mtime
        except OSError:
            return 0.0

    def _holds(self, pk: int) -> bool:
        """Whether this worker holds process ``pk``: live, asleep, or being woken."""
        return (
            pk in self.active or pk in self.sleeps or pk in self._live_waiters or pk in self._queued
        )

    def _deliver_request(self, pk: int, action: str, message: str | None) -> None:
        process = self.active.get(pk)
        if process is not None:
            _carry_out(process, action, message)
            return

        async def woken() -> None:
            async with self.awake(pk) as process:
                if process is not None:
                    _carry_out(process, action, message)

        self.loop.create_task(woken())

    async def _renew_leases(self) -> None:
        """Say every few seconds that this worker still runs its processes; stop at once when
        it may no longer (a lease lost, or none renewed for the whole lease timeout)."""
        interval = max(0.5, self.lease_timeout / 6)
        renewed = time.monotonic()
        while not self._stop.is_set():
            await asyncio.sleep(interval)
            running = [pk for pk, process in self.active.items() if process is not None]
            running += [*self.sleeps.sleeping, *self._queued]
            try:
                lost = set(running) - leases.renew(self.me, running)
                renewed = time.monotonic()
            except Exception as exc:  # the database is away: the timeout is the margin
                log_failure("could not renew the process leases", exc)
                lost = set() if time.monotonic() - renewed < self.lease_timeout else set(running)
            if lost:
                self._fence(sorted(lost))

    def _fence(self, lost: list[int]) -> None:
        """Another worker may run these processes now. Going on would race it; stopping a
        process cleanly would write its state. So this worker ends here, touching neither
        its processes nor their jobs: the supervisor starts another, and the processes it
        still held go to whichever worker takes their tasks or their expired leases."""
        LOGGER.error(
            "lost the lease on process(es) %s (not renewed within %.0f s): another worker may "
            "run them; this worker stops now",
            lost,
            self.lease_timeout,
        )
        logging.shutdown()
        os._exit(3)

    async def _follow_config(self) -> None:
        """`veglia config set` while the worker runs: the options are read again (the
        supervisor logs what changed)."""
        while not self._stop.is_set():
            try:
                follow_config(log=False)
            except Exception:  # never the end of the worker
                LOGGER.exception("could not read the profile's options again")
            await asyncio.sleep(CONFIG_INTERVAL)

    async def _write_status(self) -> None:
        while not self._stop.is_set():
            self._status_now()
            await asyncio.sleep(1)

    def _status_now(self) -> None:
        repaired = self.housekeeper.repaired if self.housekeeper is not None else None
        counts = METRICS.as_status()
        if self.intake is None:  # only the worker that runs the intake starts pipeline runs
            del counts["pipeline_runs_started"]
        write_json(
            self.files.worker_status(os.getpid()),
            {
                **({} if repaired is None else {"repaired": repaired}),
                "pid": os.getpid(),
                # Woken ones waiting their turn to load (_queued) are still dehydrated.
                "active": len(self.active) + len(self.sleeps) + len(self._queued),
                "live": sum(1 for process in self.active.values() if process is not None),
                "dehydrated": len(self.sleeps) + len(self._queued),
                "time": time.time(),
                "plugins": self.plugin_versions,
                **counts,
            },
        )


def on_signals(loop: asyncio.AbstractEventLoop, handlers: dict[int, Callable[[], Any]]) -> None:
    """Call each handler on ``loop`` when its signal comes (from the main thread).

    Not ``loop.add_signal_handler``: the loop hears of such a signal only through a byte in
    its self-pipe, which the wake-ups of a busy worker (``call_soon_threadsafe`` from its
    threads, faster than the loop reads them) can fill. The byte is then dropped ("Exception
    ignored when trying to write to the signal wakeup fd") and the signal with it: a
    ``daemon stop`` unheard under a 100,000-job intake. Python's own handler runs whatever
    the pipe holds: a waiting ``select`` is interrupted, the handler runs, and it is retried.
    """
    for signum, callback in handlers.items():
        signal.signal(signum, lambda *_, callback=callback: loop.call_soon_threadsafe(callback))


def _log_task_stacks() -> None:
    """On SIGUSR1: every task of the worker's loop and where it waits, in the daemon log.
    What a process stuck in a live worker waits for, which no thread dump shows."""
    tasks = asyncio.all_tasks()
    lines = []
    for task in tasks:
        lines.append(f"{task.get_name()} waits for {task._fut_waiter!r}:")  # type: ignore[attr-defined]
        awaited: Any = task.get_coro()
        while awaited is not None:  # down the chain of awaits, where the task is now
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is not None:
                code = frame.f_code
                lines.append(f"  {code.co_filename}:{frame.f_lineno} {code.co_name}")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    LOGGER.warning("%d tasks (SIGUSR1)\n%s", len(tasks), "\n".join(lines))
