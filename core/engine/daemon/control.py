"""Kill, pause and play a process wherever it runs.

With a broker the request is an RPC to the worker holding the process. Without one it is
written on the node, and the daemon worker applies it within a second. When no daemon holds
the process, the request is carried out here, on the process loaded from its checkpoint
(a kill then also cancels the scheduler job).

A kill never waits for the computer: the process ends KILLED at once, and its scheduler job is
cancelled beside, by the daemon, as soon as the computer answers (``calcjob.kill``); what the
command prints says so while that cancel is pending.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Collection
from typing import Any

from veglia.engine.calcjob.kill import owe_cancel
from veglia.engine.daemon import DaemonFiles, leases
from veglia.engine.daemon.broker_tasks import get_controller, send_continue_task
from veglia.engine.daemon.rpc_queue import rpc_recipient
from veglia.engine.process import load_process, save_checkpoint
from veglia.engine.runner import get_runner
from veglia.exceptions import ControlError, ProcessClassError
from veglia.manage import get_profile, get_storage
from veglia.orm.attributes import CANCEL_PENDING, CONTROL_REQUEST, OPTIONS, UNREACHABLE
from veglia.orm.loading import load_node
from veglia.orm.process_nodes import CalcJobNode, ProcessNode
from veglia.orm.queries import has_attribute
from veglia.storage.models import Node

__all__ = [
    "ControlError",
    "apply_database_requests",
    "control_process",
    "request_kill",
    "unblock_process",
]

ACTIONS = ("kill", "pause", "play")


def _daemon_running() -> bool:

    return DaemonFiles(get_profile()).supervisor_pid() is not None


def _unwrap(future: Any, timeout: float) -> Any:
    result = future.result(timeout=timeout)
    while isinstance(result, concurrent.futures.Future):
        result = result.result(timeout=timeout)
    return result


def _done(node: ProcessNode, action: str) -> bool:
    node.refresh()
    if action == "kill":
        return node.is_terminated  # not before: a process that is not paused is not killed
    if action == "play" and node.is_terminated:
        return True  # played and already done
    if node.is_terminated:  # it ended before it could be paused: say so
        raise ControlError(
            f"Process {node.pk} terminated ({node.process_state}) before it could be paused."
        )
    return node.paused == (action == "pause")


def control_process(
    node: ProcessNode, action: str, message: str = "", timeout: float = 60.0
) -> str:
    """Carry out ``action`` on the process; return what happened, for the user."""
    said = _control(node, action, message, timeout)
    return _with_pending_cancel(node, said) if action == "kill" else said


def unblock_process(
    node: ProcessNode, options: dict[str, Any] | None = None, timeout: float = 60.0
) -> str:
    """Resume a calc job blocked by a submission error, with its job ``options`` changed
    first; it is uploaded and submitted again. :class:`ControlError` if it is not blocked."""
    if not isinstance(node, CalcJobNode) or not node.blocked:
        raise ControlError(f"Process {node.pk} is not blocked.")
    if options:
        node.set_attribute(OPTIONS, {**node.options, **options})
    control_process(node, "play", "", timeout)
    return f"Unblocked process {node.pk}"


def _with_pending_cancel(node: ProcessNode, said: str) -> str:
    """What a kill did, and what it left to do: the scheduler job still to be cancelled."""
    mark = node.refresh().get_attribute(CANCEL_PENDING)
    if not mark:
        return said
    who = "the daemon" if _daemon_running() else "the daemon once it runs (`veglia daemon start`)"
    return (
        f"{said}; its scheduler job {mark['job_id']} on {mark['computer']} is cancelled by "
        f"{who} as soon as the computer answers"
    )


def _control(node: ProcessNode, action: str, message: str, timeout: float) -> str:

    if action not in ACTIONS:
        raise ControlError(f"Unknown action {action!r}; use one of {', '.join(ACTIONS)}.")
    if node.is_terminated:
        raise ControlError(f"Process {node.pk} has terminated already ({node.process_state}).")
    if action == "pause" and node.paused and node.get_attribute(UNREACHABLE):
        # Paused for an outage, which the daemon ends by itself: now a person holds it.
        node.delete_attribute(UNREACHABLE)
        return (
            f"process {node.pk} was paused for an unreachable computer; it now waits for "
            "`veglia process play`"
        )
    if get_profile().broker_url and _daemon_running():
        controller = get_controller()
        to = _recipient(node.pk)
        calls: dict[str, Callable[[], Any]] = {
            "kill": lambda: controller.kill_process(to, message or "Killed through the CLI"),
            "pause": lambda: controller.pause_process(to, message or "Paused through the CLI"),
            "play": lambda: controller.play_process(to),
        }
        call = calls[action]
        try:
            _unwrap(call(), timeout)
            return f"{action} sent to the worker running process {node.pk}"
        except Exception as exc:  # no worker answered: the lease says whether one holds it
            _refuse_if_held(node, action, exc, timeout)
            if action == "play" and not node.paused:
                send_continue_task(get_profile().broker_url, node.pk)
                return f"process {node.pk} was held by no worker: queued it for the daemon"
    elif _daemon_running():
        _write_request(node, action, message)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _done(node, action):
                return f"{action} carried out by the daemon for process {node.pk}"
            time.sleep(0.05)
        raise ControlError(
            f"The daemon did not {action} process {node.pk} within {timeout:.0f} s; see "
            "`veglia daemon logs`."
        )
    return _control_here(node, action, message)


def _recipient(pk: int) -> str:
    """Where the RPCs to process ``pk`` go: its worker's queue, named by the process's
    lease. With no lease, a key that routes nowhere, as no worker runs the process."""
    lease = leases.holder(pk, float(get_profile().get_option("daemon.lease_timeout")))
    return rpc_recipient(pk, lease.worker) if lease is not None else str(pk)


def _refuse_if_held(node: ProcessNode, action: str, exc: BaseException, timeout: float) -> None:
    """A live lease means a worker runs the process: acting on its checkpoint here would
    race that worker, so say what happened instead of guessing."""

    lease = leases.holder(node.pk, float(get_profile().get_option("daemon.lease_timeout")))
    if lease is None or not lease.live:
        return
    if isinstance(exc, TimeoutError | concurrent.futures.TimeoutError):
        what = f"did not answer within {timeout:.0f} s"
    else:
        what = f"could not be reached ({type(exc).__name__}: {exc})"
    raise ControlError(
        f"Process {node.pk} is run by worker {lease.pid} on {lease.host}, which {what}; "
        f"nothing was done. Try again, or see `veglia daemon logs`."
    )


def request_kill(node: ProcessNode, message: str) -> None:
    """Ask for a kill without waiting for it: safe from inside the engine's own loop (a
    workflow killing its steps), where :func:`control_process` would wait on itself."""

    local = get_runner().local_processes.get(node.pk)
    if local is not None:
        local.kill(message)
    elif get_profile().broker_url:
        get_controller().kill_process(_recipient(node.pk), message)
    else:
        _write_request(node, "kill", message)


def _write_request(node: ProcessNode, action: str, message: str) -> None:
    """Write the request where the daemon worker without broker finds it within a second,
    dehydrated or not (see ``apply_database_requests``)."""
    node.set_attribute(CONTROL_REQUEST, {"action": action, "message": message})
    DaemonFiles(get_profile()).control_requested.touch()


def _control_here(node: ProcessNode, action: str, message: str) -> str:

    # Hold the lease while acting, so no worker takes the process up meanwhile.
    me = leases.this_worker()
    if not leases.acquire(node.pk, me, float(get_profile().get_option("daemon.lease_timeout"))):
        raise ControlError(
            f"Process {node.pk} was just taken up by a daemon worker; run the command again."
        )
    try:
        try:
            process = load_process(node, loop=get_runner().loop)
        except ProcessClassError:
            if action != "kill":
                raise
            return _kill_unloadable(node, message)
        if action == "kill":
            process.kill(message or "Killed through the CLI")
        elif action == "pause":
            process.pause(message or "Paused through the CLI")
            save_checkpoint(process)
        else:
            process.play()
            save_checkpoint(process)
    finally:
        leases.release(node.pk, me)
    return f"{action} carried out for process {node.pk} (no daemon holds it)"


_NO_CLASS = "its class cannot be loaded"


def _kill_unloadable(node: ProcessNode, message: str) -> str:
    """End Killed from its record a process whose class cannot be loaded (whose lease the
    caller holds). A scheduler job it may have is left to the daemon: its cancel needs the
    job's computer and scheduler, so the node says it is owed (``cancel_pending``)."""
    text = message or "Killed through the CLI"
    with get_storage().transaction():
        if isinstance(node, CalcJobNode):
            owe_cancel(node)
        node.end_from_record(
            "killed", text, "REPORT", f"Killed: {text} (ended from its record: {_NO_CLASS})"
        )
    return f"kill carried out for process {node.pk} from its record ({_NO_CLASS})"


def apply_database_requests(
    live: Collection[int] | None,
    holds: Callable[[int], bool],
    deliver: Callable[[int, str, str | None], None],
) -> None:
    """In a worker without broker: take the requests written on the processes in ``live``
    (None: on every active process, asleep or not) that it ``holds``, and hand each to
    ``deliver(pk, action, message)``."""
    import sqlalchemy as sa

    query = sa.select(Node.id).where(has_attribute(CONTROL_REQUEST))
    if live is not None:
        if not live:
            return
        query = query.where(Node.id.in_(list(live)))
    else:
        query = query.where(Node.process_state.in_(leases.ACTIVE_STATES))
    with get_storage().session() as session:
        pks = [pk for pk in session.scalars(query).all() if holds(pk)]
    for pk in pks:
        node = load_node(pk)
        request = node.get_attribute(CONTROL_REQUEST) or {}
        node.delete_attribute(CONTROL_REQUEST)
        if request and request.get("action") in ACTIONS:
            deliver(pk, request["action"], request.get("message") or None)
