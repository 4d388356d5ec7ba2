"""A process as one row: its state and status text, the monitor that stopped it, and the
columns of ``veglia process list``; the CLI, the web pages and ``/api`` all read these.

Built on :func:`veglia.orm.queries.list_processes` rows (one query for a whole list,
reading only the attributes the columns name); no ORM object, no per-row query.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from veglia.orm.attributes import (
    BACKOFF,
    CANCEL_PENDING,
    COMPUTER,
    DAEMON,
    GPU_METRICS,
    JOB_ID,
    MONITOR_STATE,
    PAUSED,
    PAUSED_REASON,
    PIPELINE_RUN,
    REMOTE_WORKDIR,
    SCHEDULER_STATE,
    STOPPED_BY_MONITOR,
    WAITING_FOR,
)
from veglia.orm.queries import ACTIVE_STATES, ProcessRow, cancel_pending_pks, list_processes
from veglia.storage.times import as_utc

__all__ = [
    "DEFAULT_LIST_PROJECTION",
    "MAX_PAST_DAYS",
    "PROCESS_LIST_COLUMNS",
    "ROW_ATTRIBUTES",
    "STATUS_ATTRIBUTES",
    "ListColumn",
    "ProcessRowView",
    "as_tree",
    "backoff_text",
    "format_state",
    "iso_time",
    "kind_of",
    "monitor_notes",
    "process_row",
    "process_rows",
    "process_status",
    "select_processes",
    "stopped_by",
    "url_of",
]

#: The attributes a process row reads (a list query asks for these alone).
ROW_ATTRIBUTES = (
    BACKOFF,
    CANCEL_PENDING,
    COMPUTER,
    DAEMON,
    JOB_ID,
    MONITOR_STATE,
    PAUSED,
    PAUSED_REASON,
    REMOTE_WORKDIR,
    SCHEDULER_STATE,
    STOPPED_BY_MONITOR,
    WAITING_FOR,
)
#: The attributes :func:`process_status` reads.
STATUS_ATTRIBUTES = (
    BACKOFF, CANCEL_PENDING, COMPUTER, DAEMON, JOB_ID, PAUSED, PAUSED_REASON, REMOTE_WORKDIR,
    SCHEDULER_STATE, WAITING_FOR,
)  # fmt: skip


def iso_time(value: datetime | None) -> str | None:
    """A stored time as ISO-8601 in UTC, or None."""
    return as_utc(value).isoformat() if value else None


# -- status text -------------------------------------------------------------------------------
def format_state(
    state: str | None, exit_status: int | None, paused: bool = False, stopped_by: str | None = None
) -> str:
    """``⏵ Waiting``, ``✔ Finished [0]``, ``⨯ Finished [400]``, ``✘ Excepted``, ...; a job a
    monitor stopped says so: ``✔ Finished [0] (stopped by monitor X)``, as its command was
    killed even when the parser's exit code was kept."""
    if paused and state in ACTIVE_STATES:
        return "⏸ Paused"
    if state == "finished":
        by = f" (stopped by monitor {stopped_by})" if stopped_by else ""
        return f"{'✔' if exit_status == 0 else '⨯'} Finished [{exit_status}]{by}"
    symbol = {"excepted": "✘", "killed": "☠", "created": "⏹"}.get(state or "", "⏵")
    return f"{symbol} {(state or 'unknown').capitalize()}"


def process_status(state: str | None, attributes: dict[str, Any], now: float | None = None) -> str:
    """What a process is doing, never "" while it is active: why it is paused, a transport
    step's back-off, its job's scheduler state, the children it waits for, or the step it is
    at; of a killed one, that its scheduler job is still to be cancelled. ``now``: seconds
    since the epoch (the back-off's "next in")."""
    pending = attributes.get(CANCEL_PENDING)
    if pending:
        return f"cancel pending: job {pending['job_id']} on {pending['computer']}"
    if state not in ACTIVE_STATES:
        return ""
    if attributes.get(PAUSED):
        return attributes.get(PAUSED_REASON) or "paused"
    backoff = attributes.get(BACKOFF)
    if isinstance(backoff, dict):
        return backoff_text(backoff, time.time() if now is None else now)
    if attributes.get(SCHEDULER_STATE):
        return f"scheduler: {attributes[SCHEDULER_STATE]}"
    if attributes.get(WAITING_FOR):
        return "waiting for " + ", ".join(map(str, attributes[WAITING_FOR]))
    return _step_text(state, attributes)


def backoff_text(backoff: dict[str, Any], now: float) -> str:
    """``upload attempt 3/5 failed; next in 40 s``: a transport step waiting to try again."""
    text = f"{backoff.get('step', 'transport')} attempt {backoff.get('attempt')}/"
    text += f"{backoff.get('attempts')} failed"
    next_try = backoff.get("next_try")
    if next_try is None:
        return text
    left = round(next_try - now)
    return text + (f"; next in {left} s" if left > 0 else "; trying again")


def _step_text(state: str | None, attributes: dict[str, Any]) -> str:
    """An active process with nothing else to say: the step it is at, as far as its
    attributes tell (a calc job's work dir and job id are written as each step ends)."""
    if state == "created":
        return "waiting for a daemon worker" if attributes.get(DAEMON) else "not started yet"
    computer = attributes.get(COMPUTER)
    if computer and state == "waiting":
        if not attributes.get(REMOTE_WORKDIR):
            return f"uploading to {computer}"
        if not attributes.get(JOB_ID):
            return f"submitting to {computer}"
    return str(state)


# -- monitors ----------------------------------------------------------------------------------
def monitor_notes(attributes: dict[str, Any]) -> str | None:
    """One line per monitor that is disabled, or failing without being disabled yet."""
    lines = []
    for name, state in sorted((attributes.get(MONITOR_STATE) or {}).items()):
        if state.get("disabled"):
            lines.append(f"monitor {name} disabled: {state.get('disabled_reason') or '?'}")
        elif state.get("failures"):
            lines.append(
                f"monitor {name} failing: {state['failures']} fault(s) in a row, the last: "
                f"{state.get('last_fault') or '?'}"
            )
    return "\n".join(lines) or None


def stopped_by(attributes: dict[str, Any]) -> str | None:
    """The name of the monitor that stopped the job, if one did."""
    stop = attributes.get(STOPPED_BY_MONITOR)
    return stop.get("name") if isinstance(stop, dict) else None


# -- the row -----------------------------------------------------------------------------------
def kind_of(node_type: str) -> str:
    """``"calcjob"``, ``"workflow"``, or ``"process"`` for any other process node."""
    return node_type.rsplit(".", 1)[-1] if node_type.startswith("process.") else "process"


def url_of(pk: int, kind: str) -> str:
    """The web page of a process (a calc job's, a workflow's) or of any other node."""
    return {"calcjob": f"/job/{pk}", "workflow": f"/workflow/{pk}"}.get(kind, f"/node/{pk}")


@dataclass(frozen=True)
class ProcessRowView:
    """One process as every list shows it (the facts and columns of ``process list``)."""

    pk: int
    uuid: str
    label: str
    kind: str
    process_type: str
    state: str | None
    state_text: str
    status: str
    exit_status: int | None
    exit_message: str | None
    paused: bool
    ctime: str | None
    mtime: str | None
    computer: str | None
    job_id: str | None
    scheduler_state: str | None
    parent_pk: int | None
    stopped_by: str | None
    monitor_notes: str | None
    url: str

    def as_dict(self) -> dict[str, Any]:
        # Every field is a plain value: a shallow copy, not asdict's deep one (a tenth of
        # the time, which a list of thousands of rows feels).
        return dict(self.__dict__)


def process_row(row: ProcessRow) -> dict[str, Any]:
    """The row of one :class:`ProcessRow` (read with at least :data:`ROW_ATTRIBUTES`)."""
    attributes = row.attributes
    paused = bool(attributes.get(PAUSED))
    by = stopped_by(attributes)
    kind = kind_of(row.node_type)
    return ProcessRowView(
        pk=row.pk,
        uuid=row.uuid,
        label=row.label,
        kind=kind,
        process_type=row.process_type,
        state=row.process_state,
        state_text=format_state(row.process_state, row.exit_status, paused, by),
        status=process_status(row.process_state, attributes),
        exit_status=row.exit_status,
        exit_message=row.exit_message,
        paused=paused,
        ctime=iso_time(row.ctime),
        mtime=iso_time(row.mtime),
        computer=row.computer,
        job_id=attributes.get(JOB_ID),
        scheduler_state=attributes.get(SCHEDULER_STATE),
        parent_pk=row.caller_pk,
        stopped_by=by,
        monitor_notes=monitor_notes(attributes),
        url=url_of(row.pk, kind),
    ).as_dict()


#: The most days a search looks back (``past_days``): a century, past any node, and within
#: what dates can hold.
MAX_PAST_DAYS = 36_500


def select_processes(
    states: Iterable[str] | None = ACTIVE_STATES,
    *,
    attribute_keys: Iterable[str] | None = ROW_ATTRIBUTES,
    order_by: str = "ctime",
    descending: bool = False,
    **filters: Any,
) -> list[ProcessRow]:
    """What ``process list`` lists: :func:`list_processes` with ``states`` and ``filters``,
    and, when only active processes are asked for, the ended ones whose scheduler job is
    still to be cancelled (that job still runs)."""
    rows = list_processes(
        states, attribute_keys=attribute_keys, order_by=order_by, descending=descending, **filters
    )
    if states is not None and tuple(states) == ACTIVE_STATES:
        pending = cancel_pending_pks()
        if pending:
            rows += list_processes(
                None,
                pks=pending,
                attribute_keys=attribute_keys,
                order_by=order_by,
                descending=descending,
                **filters,
            )
            rows.sort(key=lambda row: getattr(row, order_by), reverse=descending)
    return rows


def process_rows(
    states: Iterable[str] | None = ACTIVE_STATES, **filters: Any
) -> list[dict[str, Any]]:
    """The rows ``process list`` shows for these ``states`` and ``filters`` (those of
    :func:`list_processes`), each called process right after its caller with its
    ``depth``."""
    rows = select_processes(states, **filters)
    return [{**process_row(row), "depth": depth} for row, depth in as_tree(rows)]


def as_tree(rows: list[ProcessRow]) -> Iterator[tuple[ProcessRow, int]]:
    """Rows with their depth, each called process right under its caller."""
    pks = {row.pk for row in rows}
    children: dict[int, list[ProcessRow]] = {}
    for row in rows:
        if row.caller_pk in pks:
            children.setdefault(row.caller_pk, []).append(row)

    def walk(row: ProcessRow, depth: int) -> Iterator[tuple[ProcessRow, int]]:
        yield row, depth
        for child in children.get(row.pk, []):
            yield from walk(child, depth + 1)

    for row in rows:
        if row.caller_pk not in pks:
            yield from walk(row, 0)


# -- the columns of `process list` -------------------------------------------------------------
@dataclass(frozen=True)
class ListColumn:
    """A column of ``veglia process list``: its header, its cell (the fact; the terminal may
    show some shorter, a time as "2m ago"), and the attributes its cells read (``None``: it
    may read any, so every row brings them all)."""

    header: str
    value: Callable[[ProcessRow], Any]
    reads: tuple[str, ...] | None = None


_GPU = (GPU_METRICS,)


def _gpu(row: Any, key: str) -> Any:
    return (row.attributes.get(GPU_METRICS) or {}).get(key)


def _element(row: Any) -> Any:
    run = row.attributes.get(PIPELINE_RUN)
    return run.get("identity") if isinstance(run, dict) else None


#: Columns ``-P/--project`` can choose from; add yours (``PROCESS_LIST_COLUMNS["gpu"] = ...``),
#: naming in ``reads`` the attributes it reads, so that a long list reads only those.
PROCESS_LIST_COLUMNS: dict[str, ListColumn] = {
    "pk": ListColumn("PK", lambda r: r.pk, ()),
    "uuid": ListColumn("UUID", lambda r: r.uuid, ()),
    "ctime": ListColumn("Created", lambda r: iso_time(r.ctime), ()),
    "mtime": ListColumn("Modified", lambda r: iso_time(r.mtime), ()),
    "label": ListColumn("Label", lambda r: r.label, ()),
    # The element of its pipeline setup's source a run is for (``process list --setup``).
    "element": ListColumn("Element", _element, (PIPELINE_RUN,)),
    "process_type": ListColumn("Process type", lambda r: r.process_type, ()),
    "node_type": ListColumn("Node type", lambda r: r.node_type, ()),
    "state": ListColumn(
        "State",
        lambda r: format_state(
            r.process_state,
            r.exit_status,
            bool(r.attributes.get(PAUSED)),
            stopped_by(r.attributes),
        ),
        (PAUSED, STOPPED_BY_MONITOR),
    ),
    "process_state": ListColumn("Process state", lambda r: r.process_state, ()),
    "status": ListColumn(
        "Status",
        lambda r: process_status(r.process_state, r.attributes),
        STATUS_ATTRIBUTES,
    ),
    "exit_status": ListColumn("Exit", lambda r: r.exit_status, ()),
    "exit_message": ListColumn("Exit message", lambda r: r.exit_message, ()),
    "computer": ListColumn("Computer", lambda r: r.computer, ()),
    "job_id": ListColumn("Job id", lambda r: r.attributes.get(JOB_ID), (JOB_ID,)),
    "scheduler_state": ListColumn(
        "Scheduler state", lambda r: r.attributes.get(SCHEDULER_STATE), (SCHEDULER_STATE,)
    ),
    "paused": ListColumn("Paused", lambda r: bool(r.attributes.get(PAUSED)), (PAUSED,)),
    # The trace record's GPU block (``gpu_metrics``), in the Nextflow/Platform field names.
    "gpu_name": ListColumn("GPU", lambda r: _gpu(r, "name"), _GPU),
    "gpu_pct": ListColumn("GPU %", lambda r: _gpu(r, "pct"), _GPU),
    "gpu_peak": ListColumn("GPU peak %", lambda r: _gpu(r, "peak"), _GPU),
    "gpu_mem": ListColumn("GPU memory (MiB)", lambda r: _gpu(r, "mem"), _GPU),
    "gpu_pct_mem": ListColumn("GPU mem %", lambda r: _gpu(r, "pct_mem"), _GPU),
    "gpu_peak_mem": ListColumn("GPU peak mem %", lambda r: _gpu(r, "peak_mem"), _GPU),
    "gpu_active_time": ListColumn("GPU active (ms)", lambda r: _gpu(r, "active_time"), _GPU),
}
DEFAULT_LIST_PROJECTION = ("pk", "ctime", "label", "process_type", "state", "status", "exit_status")
