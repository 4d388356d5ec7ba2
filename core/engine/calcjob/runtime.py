"""What a calc job keeps in memory while a process of this Python runs it.

None of it is checkpointed: a process loaded from its checkpoint (another worker, a restart)
starts with a fresh :class:`CalcJobRuntime` and reads again what it needs from its node. Each
field was once an attribute set on the process where it was first needed; here they are
named, typed and made in one place (``CalcJob.__init__`` and ``load_instance_state``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from veglia.engine.calcjob.live_trace import JobLiveTrace
from veglia.engine.calcjob.queue_move import QueueMoves

if TYPE_CHECKING:
    from veglia.engine.calcjob.monitor_runner import MonitorCall
    from veglia.engine.calcjob.monitors import MonitorSpec
    from veglia.engine.calcjob.process import CalcJob
    from veglia.orm.computers import Computer

__all__ = ["CalcJobRuntime"]


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

    @classmethod
    def of(cls, job: CalcJob) -> CalcJobRuntime:
        """A fresh runtime for ``job``."""
        return cls(live_trace=JobLiveTrace(job), queue_moves=QueueMoves(job))
