"""The runner: one event loop, its transport queue and job pollers, and how processes run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from plumpy import run_until_complete

from veglia.engine.calcjob.file_batcher import FileBatcher
from veglia.engine.calcjob.job_poller import JobPoller
from veglia.engine.computer_settings import ComputerSettings
from veglia.engine.daemon.child_watcher import ChildWatcher
from veglia.engine.transport_queue import TransportLease, TransportQueue
from veglia.manage import get_profile
from veglia.orm.users import get_default_user

if TYPE_CHECKING:
    from veglia.engine.dehydration import Sleeps
    from veglia.orm.computers import Computer
    from veglia.orm.process_nodes import ProcessNode

__all__ = ["RunnableProcess", "Runner", "get_runner"]


class RunnableProcess(Protocol):
    """What the runner does with a process: a :class:`veglia.engine.process.Process`, which
    asks this module for the runner (so is named here by what it does)."""

    @property
    def node(self) -> ProcessNode | None: ...

    async def step_until_terminated(self) -> None: ...


P = TypeVar("P", bound=RunnableProcess)

_runner: Runner | None = None


class Runner:
    """Runs processes on one asyncio loop, sharing transports and pollers among them.

    The profile's options are read when used, and the computers' settings are checked
    again as jobs use them (``computers``), so a daemon worker follows `veglia config set`
    and `veglia computer configure` while it runs.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, communicator: Any = None):
        self.loop = loop or asyncio.new_event_loop()
        self.communicator = communicator
        self.transport_queue = TransportQueue()
        self.computers = ComputerSettings()
        self._pollers: dict[int, JobPoller] = {}
        self._file_batchers: dict[int, FileBatcher] = {}
        self.child_watcher = ChildWatcher()
        #: Processes stepping on this loop by pk (a daemon worker shares its own table).
        self.local_processes: dict[int, Any] = {}
        #: A daemon worker's dehydrated processes; None elsewhere: nothing dehydrates.
        self.sleeps: Sleeps | None = None

    @property
    def poll_interval(self) -> float:
        return float(get_profile().get_option("engine.poll_interval"))

    @property
    def default_safe_interval(self) -> float:
        return float(get_profile().get_option("transport.safe_interval"))

    @property
    def retry_interval(self) -> float:
        return float(get_profile().get_option("transport.retry_initial_interval"))

    @property
    def retry_attempts(self) -> int:
        return int(get_profile().get_option("transport.retry_attempts"))

    def current_computer(self, computer: Computer) -> Computer:
        """``computer`` with its settings as stored now."""
        return self.computers.current(computer).computer

    @asynccontextmanager
    async def lease_transport(self, computer: Computer) -> AsyncIterator[TransportLease]:
        state = self.computers.current(computer)
        current = state.computer
        safe = float(current.properties.get("safe_interval", self.default_safe_interval))
        key = (current.pk, get_default_user().pk)
        lease_of = self.transport_queue.lease(key, current.get_transport, safe, state.version)
        async with lease_of as lease:
            yield lease

    def poller(self, computer: Computer) -> JobPoller:
        assert computer.pk is not None
        current = self.current_computer(computer)
        # The computer's own interval when it has one, else the profile's default.
        interval = float(current.properties.get("minimum_poll_interval", self.poll_interval))
        poller = self._pollers.get(computer.pk)
        if poller is None:
            poller = self._pollers[computer.pk] = JobPoller(self, current, interval)
        else:
            poller.computer, poller.interval = current, interval
        return poller

    def file_batcher(self, computer: Computer) -> FileBatcher:
        """What reads the watched files of all jobs on ``computer``, one call per cycle."""
        assert computer.pk is not None
        batcher = self._file_batchers.get(computer.pk)
        if batcher is None:
            batcher = self._file_batchers[computer.pk] = FileBatcher(self, computer)
        batcher.computer = self.current_computer(computer)
        return batcher

    def instantiate(self, process_class: Callable[..., P], inputs: dict[str, Any]) -> P:
        return process_class(inputs=inputs, loop=self.loop, communicator=self.communicator)

    def start_local(self, process: RunnableProcess) -> None:
        """Step ``process`` on this loop, beside the caller that launched it."""
        assert process.node is not None
        pk = process.node.pk
        self.local_processes[pk] = process

        async def step() -> None:
            try:
                await process.step_until_terminated()
            finally:
                self.local_processes.pop(pk, None)

        self.loop.create_task(step())

    def run_until_terminated(self, process: RunnableProcess) -> None:
        run_until_complete(self.loop, process.step_until_terminated())

    def close(self) -> None:
        self.transport_queue.close()
        if not self.loop.is_running():
            self.loop.close()


def get_runner() -> Runner:
    """The runner of this Python process, made on first use."""
    global _runner
    if _runner is None or _runner.loop.is_closed():
        _runner = Runner()
    return _runner


def set_runner(runner: Runner | None) -> None:
    global _runner
    _runner = runner
