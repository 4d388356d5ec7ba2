"""The commands a calc job waits in, one checkpointed WAITING state each.

``upload``, ``submit``, ``update`` (poll until the job is gone) and ``retrieve`` do the
transport work of a step and end in the next command's WAITING state, so every step is
checkpointed before the next begins; ``blocked`` holds a job that needs a person.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from plumpy.process_states import PauseInterruption, ProcessState

from veglia.engine.calcjob.holds import BLOCKED, first_line
from veglia.engine.exit_codes import ExitCode
from veglia.engine.waiting import InterruptibleWaiting
from veglia.exceptions import TransportTaskFailed
from veglia.orm import attributes as attr

if TYPE_CHECKING:
    from pathlib import Path

    from veglia.orm.process_nodes import ProcessNode

__all__ = ["BLOCKED", "RETRIEVE", "SUBMIT", "UPDATE", "UPLOAD", "JobWaiting", "SteppingJob"]

UPLOAD, SUBMIT, UPDATE, RETRIEVE = "upload", "submit", "update", "retrieve"
_BLOCKED_MESSAGE = "Blocked until `veglia process unblock`"


class SteppingJob(Protocol):
    """What the commands call on the :class:`~veglia.engine.calcjob.process.CalcJob` that
    waits in them (which imports this module): its steps, and how it ends."""

    @property
    def node(self) -> ProcessNode | None: ...

    async def do_upload(self) -> str | None: ...

    async def do_submit(self) -> ExitCode | None: ...

    async def do_update(self) -> bool:
        """One poll; True when the job has left the scheduler or is done."""
        ...

    def dehydrate_if_idle(self) -> None:
        """Between two polls: leave the worker's memory when nothing is due soon (raises
        ``ProcessDehydrated``; see ``veglia.engine.dehydration``)."""
        ...

    async def do_retrieve(self) -> Path: ...

    def parse(self, folder: str) -> Any: ...

    def finish_with(self, code: ExitCode) -> ExitCode: ...

    def monitor_exit_code(self) -> ExitCode: ...

    def computer_unreachable(self, reason: str) -> None: ...


class JobWaiting(InterruptibleWaiting):
    """WAITING with the transport work of the current command; interruptible by kill/pause."""

    async def execute(self) -> Any:  # type: ignore[override]  # async, as plumpy's Waiting
        process: SteppingJob = self.process  # type: ignore[assignment]
        command = self.data
        try:
            if command == UPLOAD:
                result = await self._interruptible(process.do_upload(), finish_first=True)
                if result == BLOCKED:
                    return self._next(BLOCKED, _BLOCKED_MESSAGE)
                return self._next(SUBMIT, "Waiting to submit")
            if command == SUBMIT:
                result = await self._interruptible(process.do_submit(), finish_first=True)
                if isinstance(result, ExitCode):
                    return self.create_state(ProcessState.RUNNING, process.finish_with, result)
                if result == BLOCKED:
                    return self._next(BLOCKED, _BLOCKED_MESSAGE)
                return self._next(UPDATE, "Waiting for the scheduler")
            if command == BLOCKED:
                blocked = process.node.get_attribute(attr.BLOCKED) if process.node else None
                if blocked:  # paused here until unblocked (or played), then uploaded anew
                    raise PauseInterruption(f"blocked: {first_line(blocked['reason'])}")
                return self._next(UPLOAD, "Waiting to upload")
            if command == UPDATE:
                while not await self._interruptible(process.do_update(), finish_first=False):
                    process.dehydrate_if_idle()
                stop = process.node.get_attribute(attr.STOPPED_BY_MONITOR) if process.node else None
                if stop and not stop.get("retrieve"):
                    return self.create_state(
                        ProcessState.RUNNING, process.finish_with, process.monitor_exit_code()
                    )
                return self._next(RETRIEVE, "Waiting to retrieve")
            if command == RETRIEVE:
                folder = await self._interruptible(process.do_retrieve(), finish_first=True)
                return self.create_state(ProcessState.RUNNING, process.parse, str(folder))
            raise RuntimeError(f"unknown calc job command {command!r}")
        except TransportTaskFailed as exc:
            process.computer_unreachable(f"{command} failed on every attempt: {exc}")
            raise PauseInterruption(f"{command} failed on every attempt: {exc}") from None

    def _next(self, command: str, message: str) -> Any:
        return self.create_state(ProcessState.WAITING, None, msg=message, data=command)
