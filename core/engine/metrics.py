"""What this Python process's engine has done, counted for the daemon worker's status file
(``veglia daemon status`` and the benches in ``bench/`` read it).

One object of plain fields, incremented where the work is done: a counter costs an
attribute add on the hot path, with no lock (each is written from the runner's loop or by
one thread at a time, and a bench tolerates a count read mid-update) and no registry lookup.
"""

from __future__ import annotations

__all__ = ["METRICS", "Metrics"]


class Metrics:
    """Counts since the process started; the names are the status file's keys."""

    __slots__ = (
        "child_queries",
        "file_reads",
        "monitor_calls",
        "monitor_cycle_seconds",
        "monitor_cycles",
        "pipeline_runs_started",
        "scheduler_queries",
        "transport_opens",
    )

    def __init__(self) -> None:
        #: Connections opened, all computers together.
        self.transport_opens = 0
        #: Scheduler listings (one per poll of a computer, for all its jobs).
        self.scheduler_queries = 0
        #: Monitor calls handed to their lanes.
        self.monitor_calls = 0
        #: Batched file reads: one transport call each, for many jobs' requests.
        self.file_reads = 0
        #: Polls whose jobs' monitors all ran before the next poll, and the seconds from
        #: handing a poll's answers to the jobs to the end of their monitors, summed.
        self.monitor_cycles = 0
        self.monitor_cycle_seconds = 0.0
        #: Database queries of the workflows' child watcher.
        self.child_queries = 0
        #: Pipeline element runs the intake started.
        self.pipeline_runs_started = 0

    def as_status(self) -> dict[str, int | float]:
        """The counts by name, as the status file holds them."""
        return {name: getattr(self, name) for name in self.__slots__}


#: The process's counts: one daemon worker per process, so the worker's own.
METRICS = Metrics()
