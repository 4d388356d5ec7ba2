"""The overview: how many processes are in each state, what runs now, what ended in the
last day, the computers and daemon workers, what needs someone, and the plugins' panels.

A handful of queries whatever the size of the database: counts are grouped in the
database, lists are limited, and no node is loaded as an object.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from veglia.manage import get_profile
from veglia.orm.attributes import (
    BLOCKED,
    CANCEL_PENDING,
    PAUSED,
    PAUSED_REASON,
    SCHEDULER_STATE,
    STOPPED_BY_MONITOR,
    UNREACHABLE,
)
from veglia.orm.queries import (
    ACTIVE_STATES,
    ProcessRow,
    active_jobs_by_computer,
    computer_summaries,
    count_by_state,
    list_processes,
)
from veglia.views.panels import plugin_panels
from veglia.views.problems import problem_of
from veglia.views.rows import ROW_ATTRIBUTES, process_row

__all__ = ["ACTIVE_LIMIT", "RECENT_LIMIT", "overview_view"]

#: At most this many active processes, the newest (the counts have them all).
ACTIVE_LIMIT = 200
#: At most this many of each kind of trouble (blocked or paused, cancels still to do).
ATTENTION_LIMIT = 200
#: At most this many processes ended in the last day, the latest first.
RECENT_LIMIT = 50
#: A worker whose status file is older than this is taken for dead (it writes it each second).
WORKER_SILENT_SECONDS = 30
_QUEUED = {"queued", "queued_held"}
_ENDED = ("finished", "excepted", "killed")


def overview_view() -> dict[str, Any]:
    """The overview's dict (``counts``, ``active``, ``recent``, ``computers``, ``workers``,
    ``attention``, ``panels``)."""
    now = datetime.now(timezone.utc)
    day_ago = now - timedelta(days=1)
    active = list_processes(
        ACTIVE_STATES, attribute_keys=ROW_ATTRIBUTES, limit=ACTIVE_LIMIT, descending=True
    )
    recent = list_processes(
        _ENDED,
        attribute_keys=ROW_ATTRIBUTES,
        modified_after=day_ago,
        order_by="mtime",
        descending=True,
        limit=RECENT_LIMIT,
    )
    stopped = list_processes(
        _ENDED,
        attribute_keys=(STOPPED_BY_MONITOR,),
        modified_after=day_ago,
        with_any_attribute=(STOPPED_BY_MONITOR,),
        order_by="mtime",
        descending=True,
        limit=RECENT_LIMIT,
    )
    keys = (BLOCKED, PAUSED, PAUSED_REASON, UNREACHABLE)
    blocked = list_processes(
        ACTIVE_STATES, attribute_keys=keys, with_any_attribute=(BLOCKED,), limit=ATTENTION_LIMIT
    )
    paused = list_processes(ACTIVE_STATES, attribute_keys=keys, paused=True, limit=ATTENTION_LIMIT)
    seen = {row.pk for row in blocked}
    troubled = [*blocked, *(row for row in paused if row.pk not in seen)]
    # Only killed and excepted processes leave a cancel to do (as `cancel_pending_pks`
    # knows): not reading the finished ones, most of the table, halves this query.
    pending = list_processes(
        ("killed", "excepted"),
        attribute_keys=(CANCEL_PENDING,),
        with_any_attribute=(CANCEL_PENDING,),
        limit=ATTENTION_LIMIT,
    )
    return {
        "now": now.isoformat(),
        "counts": count_by_state(),
        "active": [process_row(row) for row in active],
        "recent": [process_row(row) for row in recent],
        "computers": computers(troubled),
        "workers": workers(),
        "attention": attention(troubled, stopped, pending),
        "panels": plugin_panels(),
    }


def _epoch_iso(seconds: float | None) -> str | None:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat() if seconds else None


def computers(troubled: list[ProcessRow]) -> list[dict[str, Any]]:
    """Every computer, with its outage (from the marks the engine put on the jobs it paused)
    and its unfinished jobs by scheduler state."""
    outages: dict[str, tuple[dict[str, Any], str]] = {}
    for row in troubled:
        mark = row.attributes.get(UNREACHABLE)
        if isinstance(mark, dict) and mark.get("computer") and row.attributes.get(PAUSED):
            since = outages.get(mark["computer"])
            if since is None or mark.get("since", 0) < since[0].get("since", 0):
                outages[mark["computer"]] = (mark, row.attributes.get(PAUSED_REASON) or "")
    jobs = active_jobs_by_computer(SCHEDULER_STATE)
    result = []
    for label, hostname, transport, scheduler in computer_summaries():
        mine = {state: n for (name, state), n in jobs.items() if name == label}
        queued = sum(n for state, n in mine.items() if state in _QUEUED)
        running = mine.get("running", 0)
        outage = outages.get(label)
        # Unfinished jobs the engine polls without an outage mark: it reaches the computer.
        reachable = False if outage else (True if mine else None)
        result.append(
            {
                "label": label,
                "hostname": hostname,
                "transport": transport,
                "scheduler": scheduler,
                "reachable": reachable,
                "outage_since": _epoch_iso(outage[0].get("since")) if outage else None,
                "outage_error": (outage[1] or None) if outage else None,
                "jobs_queued": queued,
                "jobs_running": running,
            }
        )
    return result


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def workers() -> list[dict[str, Any]]:
    """The daemon's workers as its status files tell (on this host, where it runs)."""
    # Lazy: the daemon package, only to know where its files are.
    from veglia.engine.daemon.files import DaemonFiles

    files = DaemonFiles(get_profile())
    if files.supervisor_pid() is None:
        return []
    host = socket.gethostname()
    result = []
    for worker in files.read_status().get("workers", []):
        pid = int(worker["pid"])
        try:
            written = files.worker_status(pid).stat().st_mtime
        except OSError:
            written = None
        fresh = written is not None and time.time() - written < WORKER_SILENT_SECONDS
        result.append(
            {
                "pid": pid,
                "host": host,
                "started": _epoch_iso(worker.get("started")),
                "alive": _pid_alive(pid) and fresh,
            }
        )
    return result


def attention(*lists: list[ProcessRow]) -> list[dict[str, Any]]:
    """What needs someone, once each: blocked and paused processes, computer outages, jobs
    a monitor stopped in the last day, scheduler jobs still to be cancelled."""
    items, seen = [], set()
    for row in (row for rows in lists for row in rows):
        problem = None if row.pk in seen else problem_of(process_row(row), row.attributes)
        if problem is not None:
            seen.add(row.pk)
            items.append(problem)
    return items
