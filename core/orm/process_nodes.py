"""Process nodes: the record of a process (its state, exit status, checkpoint, logs and the
processes it called), of a calc job and of a workflow.

Their properties read what the engine wrote as the process ran; the attribute names are in
:mod:`veglia.orm.attributes`.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import (
    BLOCKED,
    CACHED_FROM,
    COMPUTER,
    GPU_METRICS,
    JOB_ID,
    JOB_OUTCOME,
    LAST_JOB_INFO,
    OPTIONS,
    PAUSED,
    PAUSED_REASON,
    REMOTE_WORKDIR,
    RESTART,
    RETRIEVE_LIST,
    RIGHT_SIZED,
    SCHEDULER_STATE,
    SIMILARITY_KEY,
    STARTED_AT,
    STOPPED_BY_MONITOR,
    SUBMITTED_AT,
    UNREACHABLE,
    USAGE,
    WAITING_FOR,
)
from veglia.orm.nodes import _NODE_BY_PK, _NODES, Node, shared_strings
from veglia.storage.tables import logs as logs_table

__all__ = ["TERMINAL_STATES", "CalcJobNode", "ProcessNode", "WorkflowNode"]

#: The states a process ends in.
TERMINAL_STATES = ("finished", "killed", "excepted")
_ABSENT = object()


_CHECKPOINT_OF = sa.select(_NODES.c.checkpoint).where(_NODES.c.id == sa.bindparam("pk"))
_LOG_INSERT = logs_table.insert()


class ProcessNode(Node):
    """The record of a process: its state, exit status, checkpoint, logs and links."""

    node_type = "process"
    _mutable_when_stored = True

    def __init__(self, process_type: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.process_type = process_type
        self.process_state: str | None = None
        self.exit_status: int | None = None
        self.exit_message: str | None = None
        self.computer_pk: int | None = None
        self._mtime: datetime | None = None

    def _decoded(
        self, column: dict[str, Any] | None, previous: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        # A worker holds thousands of process nodes: their strings are shared. A value equal
        # to the one the node held is kept, shared already: walking every value again at
        # each patch was a twentieth of a worker's CPU (the comparison runs in C).
        if not previous:
            result: dict[str, Any] = shared_strings(column or {})
            return result
        decoded = {}
        for key, value in (column or {}).items():
            held = previous.get(key, _ABSENT)
            same = type(held) is type(value) and held == value
            decoded[sys.intern(key)] = held if same else shared_strings(value)
        return decoded

    def _row_values(self) -> dict[str, Any]:
        return {
            "process_type": self.process_type,
            "process_state": self.process_state,
            "computer_id": self.computer_pk,
        }

    def _load_row(self, row: Any) -> None:
        self.process_type = row.process_type or ""
        self.process_state = row.process_state
        self.exit_status = row.exit_status
        self.exit_message = row.exit_message
        self.computer_pk = row.computer_id
        self._mtime = row.mtime

    def refresh(self) -> ProcessNode:
        """Re-read the state written by the engine (possibly in another process)."""
        with get_storage().connection() as connection:
            row = connection.execute(_NODE_BY_PK, {"key": self.pk}).first()
            assert row is not None
            self._attributes = self._decoded(row.attributes, self._attributes)
            self._extras = self._decoded(row.extras, self._extras)
            self._load_row(row)
        return self

    def set_exit(self, status: int | None, message: str | None) -> None:
        self.exit_status, self.exit_message = status, message
        self._update_row(exit_status=status, exit_message=message)

    def set_checkpoint(self, checkpoint: str | None) -> None:
        self._update_row(checkpoint=checkpoint)

    def set_state_and_checkpoint(
        self,
        state: str,
        checkpoint: str | None,
        exit_with: tuple[int | None, str | None] | None = None,
    ) -> None:
        """Both in one write (and the exit status and message ``exit_with``, when given):
        the engine does this at every state change."""
        self.process_state = state
        columns: dict[str, Any] = {"process_state": state, "checkpoint": checkpoint}
        if exit_with is not None:
            self.exit_status, self.exit_message = exit_with
            columns.update(exit_status=exit_with[0], exit_message=exit_with[1])
        self._update_row(**columns)

    def end_from_record(self, state: str, message: str, log_level: str, log: str) -> None:
        """End the process from its record alone, when its live process cannot be made (its
        class does not load): the end ``state`` with ``message`` as exit message, no
        checkpoint, and a log line, in one commit. The caller holds the process's lease."""
        if state not in TERMINAL_STATES:
            raise ValueError(f"{state!r} is no end state; use one of {TERMINAL_STATES}")
        with get_storage().transaction():
            self.set_state_and_checkpoint(state, None, (None, message))
            self.add_log(log_level, log)

    def get_checkpoint(self) -> str | None:
        with get_storage().connection() as connection:
            return connection.execute(_CHECKPOINT_OF, {"pk": self.pk}).scalar()

    @property
    def mtime(self) -> datetime | None:
        """When the record last changed, as of the last load or :meth:`refresh`."""
        return self._mtime

    @property
    def is_terminated(self) -> bool:
        return self.process_state in TERMINAL_STATES

    @property
    def is_finished(self) -> bool:
        return self.process_state == "finished"

    @property
    def is_finished_ok(self) -> bool:
        return self.is_finished and self.exit_status == 0

    @property
    def is_failed(self) -> bool:
        return self.is_finished and self.exit_status not in (0, None)

    @property
    def is_killed(self) -> bool:
        return self.process_state == "killed"

    @property
    def is_excepted(self) -> bool:
        return self.process_state == "excepted"

    @property
    def paused(self) -> bool:
        return bool(self.get_attribute(PAUSED, False))

    @property
    def paused_reason(self) -> str:
        """Why it was paused ("" when it was not, or no reason was given)."""
        return self.get_attribute(PAUSED_REASON) or ""

    @property
    def similarity_key(self) -> str | None:
        """Which finished processes are like this one (history, estimates, right-sizing)."""
        result: str | None = self.get_attribute(SIMILARITY_KEY)
        return result

    @property
    def called(self) -> list[ProcessNode]:
        return [n for _, _, n in self._linked(False, ("call",)) if isinstance(n, ProcessNode)]

    @property
    def caller(self) -> ProcessNode | None:
        found = [n for _, _, n in self._linked(True, ("call",)) if isinstance(n, ProcessNode)]
        return found[0] if found else None

    def add_log(self, level: str, message: str, **details: Any) -> None:
        row = {"node_id": self.pk, "levelname": level, "loggername": "veglia", "message": message}
        with get_storage().connection() as connection:  # the table: no unit of work to flush
            connection.execute(_LOG_INSERT, {**row, "details": details})

    @property
    def logs(self) -> list[sa.Row[Any]]:
        """Its log lines, oldest first: rows of the logs table (``time``, ``levelname``,
        ``message``, ``details``, ...)."""
        query = (
            sa.select(logs_table).where(logs_table.c.node_id == self.pk).order_by(logs_table.c.id)
        )
        with get_storage().connection() as connection:
            return list(connection.execute(query))


class CalcJobNode(ProcessNode):
    """The record of a calc job; its properties read what the engine wrote as it ran (the
    names are in :mod:`veglia.orm.attributes`)."""

    node_type = "process.calcjob"

    @property
    def options(self) -> dict[str, Any]:
        result: dict[str, Any] = self.get_attribute(OPTIONS, {})
        return result

    @property
    def computer_label(self) -> str | None:
        result: str | None = self.get_attribute(COMPUTER)
        return result

    @property
    def job_id(self) -> str | None:
        """The scheduler's id of the job, once submitted."""
        result: str | None = self.get_attribute(JOB_ID)
        return result

    @property
    def scheduler_state(self) -> str | None:
        """The job's state as last polled (a ``JobState`` value: queued, running, done...)."""
        result: str | None = self.get_attribute(SCHEDULER_STATE)
        return result

    @property
    def last_job_info(self) -> dict[str, Any] | None:
        """The scheduler's last view of the job (a ``JobInfo`` as a dict)."""
        result: dict[str, Any] | None = self.get_attribute(LAST_JOB_INFO)
        return result

    @property
    def submitted_at(self) -> float | None:
        result: float | None = self.get_attribute(SUBMITTED_AT)
        return result

    @property
    def started_at(self) -> float | None:
        """When a poll first saw the job run (None if none did)."""
        result: float | None = self.get_attribute(STARTED_AT)
        return result

    @property
    def remote_workdir(self) -> str | None:
        result: str | None = self.get_attribute(REMOTE_WORKDIR)
        return result

    @property
    def retrieve_list(self) -> list[str]:
        result: list[str] = self.get_attribute(RETRIEVE_LIST, [])
        return result

    @property
    def blocked(self) -> dict[str, Any] | None:
        """{"reason", "time", "computer"} while held until ``veglia process unblock``."""
        result: dict[str, Any] | None = self.get_attribute(BLOCKED)
        return result

    @property
    def unreachable(self) -> dict[str, Any] | None:
        """{"computer", "since", "next_probe"} while paused for an outage of its computer."""
        result: dict[str, Any] | None = self.get_attribute(UNREACHABLE)
        return result

    @property
    def stopped_by_monitor(self) -> dict[str, Any] | None:
        """{"name", "message", "time", ...} of the monitor that stopped the job."""
        result: dict[str, Any] | None = self.get_attribute(STOPPED_BY_MONITOR)
        return result

    @property
    def cached_from(self) -> dict[str, Any] | None:
        """{"pk", "uuid"} of the finished job whose outputs this one reused."""
        result: dict[str, Any] | None = self.get_attribute(CACHED_FROM)
        return result

    @property
    def job_outcome(self) -> dict[str, Any]:
        """What retrieving found: exit status, failure, usage ({} before retrieval)."""
        return self.get_attribute(JOB_OUTCOME) or {}

    @property
    def attempt(self) -> int:
        """Which attempt of a restart policy this job is (1 for the first, or without one)."""
        restart = self.get_attribute(RESTART) or {}
        return int(restart.get("attempt") or 1)

    @property
    def usage(self) -> dict[str, Any] | None:
        """What the job used, as measured: {"peak_memory_kb", "runtime_seconds", "source"}."""
        result: dict[str, Any] | None = self.get_attribute(USAGE)
        return result

    @property
    def right_sized(self) -> dict[str, Any] | None:
        """{option: {"from", "to"}} of the requests right-sizing changed."""
        result: dict[str, Any] | None = self.get_attribute(RIGHT_SIZED)
        return result

    @property
    def gpu_metrics(self) -> dict[str, Any] | None:
        """The GPU block of the trace record, when a plugin put one there."""
        result: dict[str, Any] | None = self.get_attribute(GPU_METRICS)
        return result


class WorkflowNode(ProcessNode):
    node_type = "process.workflow"

    @property
    def waiting_for(self) -> list[int]:
        """The pks of the children it waits for, while it waits."""
        return self.get_attribute(WAITING_FOR) or []
