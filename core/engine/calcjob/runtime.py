"""What a calc job keeps in memory while a process of this Python runs it.

None of it is checkpointed: a process loaded from its checkpoint (another worker, a restart)
starts with a fresh :class:`CalcJobRuntime` and reads again what it needs from its node. Each
field was once an attribute set on the process where it was first needed; here they are
named, typed and made in one place (``CalcJob.__init__`` and ``load_instance_state``).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veglia.engine.calcjob.live_trace import JobLiveTrace
from veglia.engine.calcjob.queue_move import QueueMoves

if TYPE_CHECKING:
    from veglia.engine.calcjob.file_watch import Known
    from veglia.engine.calcjob.monitors import MonitorSpec
    from veglia.engine.calcjob.owner import OwningJob
    from veglia.orm.computers import Computer

__all__ = ["CalcJobRuntime", "FaultLog", "MonitorCall"]


@dataclass
class FaultLog:
    """How a monitor's faults were last logged on the job's node: the first in full, then
    at most one line per ``FAULT_LOG_INTERVAL`` counting the faults not written since (a
    monitor raising at every poll wrote ten rows a second)."""

    #: time.monotonic() when a fault was last written.
    written: float
    #: Faults since then that were not written, and the last of them.
    unwritten: int = 0
    last: str = ""


@dataclass
class MonitorCall:
    """A monitor call in flight on its lane; it may outlive the cycle that started it."""

    future: Future[Any]
    #: time.monotonic() when it was handed to its lane.
    started: float
    timeout: float
    #: The copy of the monitor's state it was given, kept when it answers in time.
    data: dict[str, Any]
    #: The offsets of its watched files to keep once it answered without a fault.
    files: Known | None
    #: Timeouts it has run past, each counted as a fault.
    overruns: int = 0

    def overdue(self, at: float) -> bool:
        """Whether it has run past one more timeout than has been counted."""
        return at - self.started >= (self.overruns + 1) * self.timeout


@dataclass
class CalcJobRuntime:
    """A calc job's in-memory state, one per process object."""

    #: The live trace this process last read and when it last wrote it.
    live_trace: JobLiveTrace
    #: The queue moves decided for this job, and what deciding them read once.
    queue_moves: QueueMoves
    #: The job's computer as last read (``CalcJob.computer`` follows changed settings).
    computer: Computer | None = None
    #: Scheduler polls that failed in a row (reset by one that answers).
    update_failures: int = 0
    #: When a running job's clock alone was last written (``poll_writes.write_poll``).
    clock_written: dict[str, float] = field(default_factory=dict)
    #: The job's monitors, read from its node once: they are fixed at submission.
    monitor_specs: list[MonitorSpec] | None = None
    #: The monitor calls in flight, by monitor name: a call may outlive the cycle that
    #: started it.
    monitor_calls: dict[str, MonitorCall] = field(default_factory=dict)
    #: (monitor, link) pairs already reported: a link in a watched file's way is said once.
    links_reported: set[tuple[str, str]] = field(default_factory=set)
    #: How each monitor's faults were last logged, by monitor name (rate-limited rows).
    fault_logs: dict[str, FaultLog] = field(default_factory=dict)
    #: The monitors whose recorded version this process has checked against its own code.
    versions_checked: set[str] = field(default_factory=set)
    #: Polls in a row that found the job's state unchanged: one makes it idle.
    quiet_polls: int = 0
    #: Whether this process was woken from dehydration by a poll's answer: it may sleep
    #: again once that answer is written.
    woken_by_poll: bool = False

    @classmethod
    def of(cls, job: OwningJob) -> CalcJobRuntime:
        """A fresh runtime for ``job``."""
        return cls(live_trace=JobLiveTrace(job), queue_moves=QueueMoves(job))
