"""The daemon: a supervisor that keeps N worker processes alive, and the workers.

With a broker each worker takes process tasks from the profile's RabbitMQ queue; a task is
acknowledged only when its process terminates, so the processes of a worker that dies are
delivered to another. Without a broker there is a single worker, which takes every
unfinished submitted process from the database, at start and as they are submitted.

Run as ``python -m veglia.engine.daemon supervise N`` / ``worker`` (``veglia daemon`` does).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from plumpy.communications import LoopCommunicator

from veglia.config.private_paths import private_file, private_folder
from veglia.config.profile import Profile
from veglia.engine import leases
from veglia.engine.monitor_runner import CALLS as MONITOR_CALLS
from veglia.engine.outages import OutageWatcher
from veglia.exceptions import StepAbandoned
from veglia.orm.queries import ACTIVE_STATES, active_process_pks
from veglia.storage.outage import is_storage_outage, wait_for_storage

__all__ = ["ACTIVE_STATES", "DaemonFiles", "Worker", "supervise"]

LOGGER = logging.getLogger("veglia.daemon")
#: How often the supervisor looks for stranded processes (two looks before it repairs one).
RECONCILE_SECONDS = 5.0


class DaemonFiles:
    """Where a profile's daemon keeps its pid, status and log."""

    def __init__(self, profile: Profile) -> None:
        self.folder = profile.daemon_folder
        self.pid = self.folder / "supervisor.pid"
        self.status = self.folder / "status.json"
        self.log = self.folder / "daemon.log"

    def worker_status(self, pid: int) -> Path:
        return self.folder / f"worker-{pid}.json"

    def supervisor_pid(self) -> int | None:
        """The supervisor's pid when it is alive."""
        try:
            pid = int(self.pid.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def read_status(self) -> dict[str, Any]:
        try:
            return json.loads(self.status.read_text())
        except (OSError, json.JSONDecodeError):
            return {}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


# -- supervisor -----------------------------------------------------------------------------
def supervise(profile: Profile, workers: int) -> None:
    """Start ``workers`` workers and restart any that dies, until SIGTERM."""
    files = DaemonFiles(profile)
    private_folder(files.folder)
    files.pid.write_text(str(os.getpid()))
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def spawn() -> subprocess.Popen:
        log = open(private_file(files.log), "ab")  # noqa: SIM115 - the child keeps it open
        return subprocess.Popen(
            [sys.executable, "-m", "veglia.engine.daemon", "worker"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "VEGLIA_PROFILE": profile.name},
        )

    slots = [{"process": spawn(), "restarts": 0, "started": time.time()} for _ in range(workers)]

    reconciler = None
    if profile.broker_url:
        from veglia.engine.reconcile import Reconciler

        reconciler = Reconciler(profile)
    next_look = time.time() + RECONCILE_SECONDS

    def write_status() -> None:
        _write_json(
            files.status,
            {
                "supervisor": os.getpid(),
                "started": started,
                "repaired": reconciler.repaired if reconciler else 0,
                "workers": [
                    {"pid": s["process"].pid, "restarts": s["restarts"], "started": s["started"]}
                    for s in slots
                ],
            },
        )

    started = time.time()
    write_status()
    _call_daemon_hook("daemon_started", profile)
    LOGGER.warning("daemon started with %d worker(s)", workers)
    while not stopping:
        time.sleep(0.2)
        if reconciler is not None and time.time() >= next_look:
            next_look = time.time() + RECONCILE_SECONDS
            try:
                if reconciler.step():
                    write_status()
            except Exception as exc:  # the broker or the database is away: look again later
                _log_failure("could not look for stranded processes", exc)
        for slot in slots:
            code = slot["process"].poll()
            if code is None or stopping or time.time() < slot.get("retry_at", 0):
                continue
            if "retry_at" not in slot:
                files.worker_status(slot["process"].pid).unlink(missing_ok=True)
                # A worker that dies at start (a broken setting) is retried ever more slowly.
                quick = time.time() - slot["started"] < 10
                slot["quick_deaths"] = slot.get("quick_deaths", 0) + 1 if quick else 0
                if quick:
                    delay = min(2 ** slot["quick_deaths"], 60)
                    LOGGER.warning(
                        "worker %d exited with %s at start; retrying in %d s",
                        slot["process"].pid,
                        code,
                        delay,
                    )
                    slot["retry_at"] = time.time() + delay
                    continue
            slot.pop("retry_at", None)
            LOGGER.warning("worker %d exited with %s; starting another", slot["process"].pid, code)
            slot.update(process=spawn(), restarts=slot["restarts"] + 1, started=time.time())
            write_status()
    _call_daemon_hook("daemon_stopping", profile)
    for slot in slots:
        slot["process"].terminate()
    deadline = time.time() + 30
    for slot in slots:
        try:
            slot["process"].wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            slot["process"].kill()
        files.worker_status(slot["process"].pid).unlink(missing_ok=True)
    files.status.unlink(missing_ok=True)
    files.pid.unlink(missing_ok=True)
    LOGGER.warning("daemon stopped")


def _log_failure(what: str, exc: Exception) -> None:
    """One line for a database that is away (it is expected, and said often); the whole
    traceback for anything else."""
    if is_storage_outage(exc):
        LOGGER.warning("%s: the database does not answer (%s)", what, str(exc).splitlines()[0])
    else:
        LOGGER.error("%s", what, exc_info=exc)


def _call_daemon_hook(name: str, profile: Profile) -> None:
    """A daemon hook, each implementation on its own: a failing plugin never keeps the
    daemon from running jobs, nor the other plugins from starting."""
    from veglia.plugin_manager import call_each

    for plugin, exc in call_each(name, profile=profile):
        LOGGER.error("plugin %s failed in %s: %s", plugin, name, exc)


# -- worker -----------------------------------------------------------------------------------
class QuietCommunicator(LoopCommunicator):
    """plumpy's loop communicator without state-change broadcasts.

    plumpy broadcasts every state change and waits for the broker to take it; nothing in
    veglia listens (states are in the database), and the wait cost a tenth of a worker's time.
    """

    def broadcast_send(self, *args: Any, **kwargs: Any) -> bool:
        return True


class Worker:
    """Runs the processes handed to it, each until it terminates."""

    def __init__(self, profile: Profile) -> None:
        from veglia.engine.runner import Runner, set_runner

        self.profile = profile
        self.files = DaemonFiles(profile)
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.communicator: Any = None
        if profile.broker_url:
            from veglia.engine.broker_tasks import create_communicator

            slots = int(profile.get_option("daemon.worker_process_slots"))
            self._thread_communicator = create_communicator(
                profile, task_prefetch_count=slots, takes_tasks=True
            )
            self.communicator = QuietCommunicator(self._thread_communicator, self.loop)
        self.runner = Runner(loop=self.loop, communicator=self.communicator)
        set_runner(self.runner)
        self.active: dict[int, Any] = self.runner.local_processes
        self._stop = asyncio.Event()
        self.me = leases.this_worker()
        self.lease_timeout = float(profile.get_option("daemon.lease_timeout"))

    def run(self) -> None:
        self.loop.add_signal_handler(signal.SIGTERM, self._stop.set)
        self.loop.add_signal_handler(signal.SIGINT, self._stop.set)
        if self.communicator is not None:
            self.communicator.add_task_subscriber(self._on_task)
        else:
            self.loop.create_task(self._take_from_database())
        self.loop.create_task(self._write_status())
        self.loop.create_task(self._renew_leases())
        self.loop.create_task(OutageWatcher(self.active).run(self._stop))
        try:
            self.loop.run_until_complete(self._stop.wait())
        finally:
            self.files.worker_status(os.getpid()).unlink(missing_ok=True)
            if self.communicator is not None:
                self._thread_communicator.close()
            self.runner.transport_queue.close()

    async def _on_task(self, _communicator: Any, task: dict[str, Any]) -> bool:
        return await self.continue_process(int(task["pid"]))

    async def continue_process(self, pk: int) -> bool:
        """Load the process from its checkpoint and step it until it terminates.

        When the database goes away under a step, the process is dropped as it stands and
        loaded again from its checkpoint once the database answers, still under this
        worker's lease (which its renewals keep, or this worker stops: see ``_fence``).
        """
        if self.active.get(pk) is not None:  # a duplicate task: the running one will ack
            return True
        held = False
        try:
            while True:
                try:
                    held = held or await self._take(pk)
                    if not held:
                        return True
                    await self._step(pk)
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
            self.active.pop(pk, None)
            if held:
                try:
                    leases.release(pk, self.me)
                except Exception:  # it expires by itself
                    LOGGER.exception("could not release the lease on process %s", pk)

    def _drop(self, pk: int) -> None:
        """Stop stepping the process here as it stands (its checkpoint is its state)."""
        stale = self.active.get(pk)
        if stale is not None:
            stale.close()  # its RPC subscription must not outlive it

    async def _take(self, pk: int) -> bool:
        """Whether this worker now holds the process (it is unfinished and no other live
        worker runs it)."""
        from veglia.exceptions import NotExistent
        from veglia.orm.nodes import ProcessNode, load_node

        try:
            node = load_node(pk)
        except NotExistent:
            node = None
        if not isinstance(node, ProcessNode):  # deleted since it was queued, or a forged task
            LOGGER.warning("task dropped: there is no process %s (deleted?)", pk)
            return False
        if node.is_terminated:
            return False
        # A task delivered again (after a broker restart, or a repair) while another live
        # worker runs the process: that worker finishes it; if it dies, its lease expires
        # and the daemon's reconciler queues the process again.
        if not leases.acquire(pk, self.me, self.lease_timeout):
            LOGGER.info("process %s is held by another live worker: task dropped", pk)
            return False
        return True

    async def _step(self, pk: int) -> None:
        from veglia.engine.persistence import load_process
        from veglia.orm.nodes import load_node

        node = load_node(pk)
        if node.is_terminated:  # type: ignore[attr-defined]
            return
        process = load_process(
            node,
            loop=self.loop,
            communicator=self.communicator,  # type: ignore[arg-type]
        )
        if node.paused:  # type: ignore[attr-defined]
            process.pause(node.paused_reason or None)  # type: ignore[attr-defined]
        self.active[pk] = process
        await process.step_until_terminated()

    async def _take_from_database(self) -> None:
        """Without a broker: every unfinished submitted process is ours."""
        while not self._stop.is_set():
            try:
                for pk in active_process_pks(daemon=True):
                    if pk not in self.active:
                        self.active[pk] = None
                        self.loop.create_task(self._continue_claimed(pk))
                self._apply_control_requests()
            except Exception as exc:
                if not is_storage_outage(exc):
                    raise
                LOGGER.warning("cannot look for submitted processes: %s", exc)
                await wait_for_storage()
            await asyncio.sleep(0.5)

    async def _continue_claimed(self, pk: int) -> None:
        self.active.pop(pk, None)
        await self.continue_process(pk)

    def _apply_control_requests(self) -> None:
        from veglia.engine.control import apply_database_requests

        apply_database_requests(self.active)

    async def _renew_leases(self) -> None:
        """Say every few seconds that this worker still runs its processes; stop at once when
        it may no longer (a lease lost, or none renewed for the whole lease timeout)."""
        interval = max(0.5, self.lease_timeout / 6)
        renewed = time.monotonic()
        while not self._stop.is_set():
            await asyncio.sleep(interval)
            running = [pk for pk, process in self.active.items() if process is not None]
            try:
                lost = set(running) - leases.renew(self.me, running)
                renewed = time.monotonic()
            except Exception as exc:  # the database is away: the timeout is the margin
                _log_failure("could not renew the process leases", exc)
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

    async def _write_status(self) -> None:
        while not self._stop.is_set():
            _write_json(
                self.files.worker_status(os.getpid()),
                {
                    "pid": os.getpid(),
                    "active": len(self.active),
                    "time": time.time(),
                    "transport_opens": self.runner.transport_queue.total_opens(),
                    "scheduler_queries": sum(p.queries for p in self.runner.pollers()),
                    "monitor_calls": MONITOR_CALLS["count"],
                    "child_queries": self.runner.child_watcher.queries,
                },
            )
            await asyncio.sleep(1)


def main(argv: list[str]) -> None:
    from veglia.manage import load_profile

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    profile = load_profile(os.environ.get("VEGLIA_PROFILE"))
    if argv[:1] == ["supervise"]:
        supervise(profile, int(argv[1]) if len(argv) > 1 else 1)
    elif argv[:1] == ["worker"]:
        Worker(profile).run()
    else:
        raise SystemExit("usage: python -m veglia.engine.daemon supervise N | worker")


if __name__ == "__main__":
    main(sys.argv[1:])
