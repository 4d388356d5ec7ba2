"""Launching processes: in the foreground (``run``) or through the daemon (``submit``),
handed to it by a broker task, or by the database alone."""

from __future__ import annotations

import asyncio
import importlib.machinery
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from plumpy import run_until_complete

from veglia.engine.builder import ProcessBuilder
from veglia.engine.daemon.broker_tasks import send_continue_task
from veglia.engine.daemon.installed_code import old_code_message
from veglia.engine.daemon.presence import daemon_running, no_daemon_message
from veglia.engine.daemon.task_pipeline import get_pipeline
from veglia.engine.persistence import WHERE_PROCESS_CLASSES_GO
from veglia.engine.process import CALLED_BY, TO_DAEMON, Process
from veglia.engine.runner import get_runner
from veglia.manage import get_profile, get_storage
from veglia.orm.attributes import CALL_KEY, DAEMON
from veglia.orm.loading import load_node
from veglia.orm.process_nodes import ProcessNode
from veglia.storage import models

__all__ = ["run", "run_get_node", "submit", "watching"]

LOGGER = logging.getLogger("veglia.engine")
#: Seconds between two warnings that no daemon runs (a loop of submissions gets one).
NO_DAEMON_WARNING_EVERY = 60.0
_warned_at = float("-inf")
#: When the running daemon's plugin versions were last compared with the installed ones.
_code_checked_at = float("-inf")


def _split(
    process: type[Process] | ProcessBuilder[Process], inputs: dict[str, Any]
) -> tuple[type[Process], dict[str, Any]]:
    if isinstance(process, ProcessBuilder):
        return process.process_class, {**process.to_dict(), **inputs}
    return process, inputs


def run_get_node(
    process: type[Process] | ProcessBuilder[Process], /, **inputs: Any
) -> tuple[dict[str, Any], ProcessNode]:
    """Run in this Python process until it ends; return its outputs and its node."""

    process_class, all_inputs = _split(process, inputs)
    runner = get_runner()
    instance = runner.instantiate(process_class, all_inputs)
    watch = _WATCH.get()
    with _killed_on_interrupt(runner.loop, instance):
        if watch is None:
            runner.run_until_terminated(instance)
        else:
            run_until_complete(runner.loop, _watched(instance, *watch))
    assert instance.node is not None
    node = instance.node.refresh()
    if instance.is_excepted:
        raise instance.exception()  # type: ignore[misc]
    return dict(instance.outputs), node


#: The message a process killed by Ctrl-C during its run ends with.
INTERRUPTED_MESSAGE = "interrupted (Ctrl-C) while it ran in the foreground"


@contextmanager
def _killed_on_interrupt(loop: asyncio.AbstractEventLoop, process: Process) -> Iterator[None]:
    """While a run waits, a first Ctrl-C kills the process as `veglia process kill` does (its
    scheduler job cancelled, the run waiting for that), and the run then ends with
    KeyboardInterrupt; a second Ctrl-C interrupts at once. Without this, the interrupt left
    the process waiting with no worker and its job running.

    Only in the main thread, and only when Python's own handler is in place (a program
    with a handler of its own keeps it)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    interrupted = False

    def on_interrupt(_signum: int, _frame: object) -> None:
        nonlocal interrupted
        if interrupted:
            raise KeyboardInterrupt
        interrupted = True
        loop.call_soon_threadsafe(process.kill, INTERRUPTED_MESSAGE)

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if interrupted:
        raise KeyboardInterrupt


#: What :func:`watching` asked for in this context: the callback and its interval.
_WATCH: ContextVar[tuple[Callable[[Process], None], float] | None] = ContextVar(
    "veglia_run_watch", default=None
)


@contextmanager
def watching(callback: Callable[[Process], None], every: float = 0.25) -> Iterator[None]:
    """While a :func:`run` or :func:`run_get_node` in this block waits, call
    ``callback(process)`` every ``every`` seconds on the runner's loop, between the steps
    (the node is as the process left it: no query needed), and once more when the run ends
    (``process.has_terminated()``, or the run failed). The CLI's live status line uses it.
    A callback that raises is logged and called no more; the run goes on."""
    token = _WATCH.set((callback, every))
    try:
        yield
    finally:
        _WATCH.reset(token)


async def _watched(process: Process, callback: Callable[[Process], None], every: float) -> None:
    async def ticks() -> None:
        while True:
            try:
                callback(process)
            except Exception:
                LOGGER.exception("Watching process %s failed; the run goes on", process.pid)
                return
            await asyncio.sleep(every)

    ticker = asyncio.ensure_future(ticks())
    try:
        await process.step_until_terminated()
    finally:
        ticker.cancel()
        try:
            callback(process)  # once more, ended (or failed): a status line goes
        except Exception:
            LOGGER.exception("Watching process %s failed", process.pid)


def run(process: type[Process] | ProcessBuilder[Process], /, **inputs: Any) -> dict[str, Any]:
    """Run in this Python process until it ends; return its outputs."""
    return run_get_node(process, **inputs)[0]


def submit(process: type[Process] | ProcessBuilder[Process], /, **inputs: Any) -> ProcessNode:
    """Store the process and hand it to the daemon; return its node at once.

    When no daemon runs for the profile, a warning says so (logged on ``veglia.engine``,
    at most once a minute): the process waits, created, until one starts. A daemon that runs
    older plugin code than is installed (a plugin upgraded under it) is warned of the same way.

    The node, its checkpoint and its daemon flag are committed when this returns; its
    broker task may still wait for the broker's confirmation, which the next ``submit``
    (or the end of this Python process) checks: a task the broker did not take is sent
    again then, or a ``BrokerError`` (a logged error at exit) names the process.
    """
    # An earlier submission's task the broker refused is sent again (or raised) first,
    # before anything new is stored.
    check_handed_over()
    warn_if_unimportable(_split(process, inputs)[0])
    node = _to_daemon(process, inputs, caller=None, wait=False)
    _warn_if_no_daemon()
    return node


def _warn_if_no_daemon() -> None:
    global _warned_at, _code_checked_at
    if time.monotonic() - _warned_at < NO_DAEMON_WARNING_EVERY:
        return
    if not daemon_running():
        _warned_at = time.monotonic()
        LOGGER.warning("%s; the process waits until it runs", no_daemon_message())
    elif time.monotonic() - _code_checked_at >= NO_DAEMON_WARNING_EVERY:
        # A plugin upgraded under the running daemon: the process runs on the old code.
        _code_checked_at = time.monotonic()
        old_code = old_code_message(get_profile())
        if old_code:
            _warned_at = time.monotonic()
            LOGGER.warning("%s", old_code)


# -- handing over to the daemon: a broker task, or the database alone ---------------------
def notify_daemon(node: ProcessNode, wait: bool = True) -> None:
    """Tell the daemon about a new process.

    With a broker, a task message (acknowledged only when the process ends, so a dead
    worker's processes go to another); without one, the node in the database is the task:
    the single daemon worker picks up every unfinished process.

    ``wait=False`` does not wait for the broker's confirmation of the task: it is checked
    later (see :mod:`~veglia.engine.daemon.task_pipeline`), and a task the broker did not
    take is sent again then, or reported.
    """

    url = get_profile().broker_url
    if not url:
        return
    if wait:
        send_continue_task(url, node.pk)
    else:
        get_pipeline().send(url, node.pk)


def check_handed_over() -> None:
    """Send again each task of an earlier submission the broker did not take; a
    ``BrokerError`` when one cannot be handed over."""
    get_pipeline().check()


def warn_if_unimportable(process_class: type) -> None:
    """Warn (on ``veglia.engine``, once per class in this Python process) when a daemon
    worker will not be able to import ``process_class``: the daemon would end its processes
    Excepted."""
    if process_class in _checked:
        return
    _checked.add(process_class)
    problem = daemon_import_problem(process_class)
    if problem is not None:
        LOGGER.warning("%s", problem)


_checked: set[type] = set()


def daemon_import_problem(process_class: type) -> str | None:
    """Why a daemon worker cannot import ``process_class`` by its module's name, or None.

    A worker is a new interpreter: it has the installed packages and the PYTHONPATH, not
    the script that submits, nor modules only that script's folder holds. The check looks at
    where the class's module came from (about 30 µs); importing the class in a new
    interpreter would cost from 50 ms to over a second (veglia's own imports).
    """
    name = f"{process_class.__module__}:{process_class.__qualname__}"
    where: str | None = None
    if process_class.__module__ == "__main__":
        where = "it is defined in the script being run"
    elif "<locals>" in process_class.__qualname__:
        where = "it is defined inside a function"
    else:
        folder = _script_folder()
        if _found_in(process_class.__module__, folder) and folder not in _pythonpath():
            where = f"its module is found only in {folder}, the folder of the script being run"
    if where is None:
        return None
    return (
        f"Process class {name} cannot be imported by a daemon worker ({where}): the daemon "
        f"will end its processes Excepted. To run it in the daemon, {WHERE_PROCESS_CLASSES_GO}."
    )


def _found_in(module_name: str, folder: str) -> bool:
    """Whether the module's top-level package, as imported here, is the one ``folder``
    holds (rather than one an installed package, or an editable install, provides)."""
    top = sys.modules.get(module_name.partition(".")[0])
    spec = getattr(top, "__spec__", None)
    if spec is None or not spec.has_location or not spec.origin:
        return False
    in_folder = importlib.machinery.PathFinder.find_spec(spec.name, [folder])
    if in_folder is None or not in_folder.origin:
        return False
    same: bool = os.path.realpath(in_folder.origin) == os.path.realpath(spec.origin)
    return same


def _script_folder() -> str:
    """What Python put first on ``sys.path`` as it started: the script's folder, or the
    current folder (``python -c``, ``python -m``, the interactive prompt)."""
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    if main_file and getattr(main, "__spec__", None) is None:
        folder: str = os.path.dirname(os.path.realpath(main_file))
        return folder
    return os.path.realpath(os.getcwd())


def _pythonpath() -> set[str]:
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return {os.path.realpath(entry) for entry in entries if entry}


def _instantiate(
    process: type[Process] | ProcessBuilder[Process],
    inputs: dict[str, Any],
    caller: ProcessNode | None,
    call_key: str | None = None,
    to_daemon: bool = False,
) -> Process:
    """The process, stored, with its ``call`` link from the caller when there is one, and
    flagged for the daemon when ``to_daemon``."""

    process_class, all_inputs = _split(process, inputs)
    token = CALLED_BY.set((caller, call_key) if caller is not None else None)
    daemon_token = TO_DAEMON.set(to_daemon)
    try:
        instance = get_runner().instantiate(process_class, all_inputs)
    finally:
        TO_DAEMON.reset(daemon_token)
        CALLED_BY.reset(token)
    assert instance.node is not None
    return instance


def _to_daemon(
    process: type[Process] | ProcessBuilder[Process],
    inputs: dict[str, Any],
    caller: ProcessNode | None,
    call_key: str | None = None,
    wait: bool = True,
) -> ProcessNode:
    """Stored and handed to the daemon; ``wait``: for the broker's confirmation too."""
    # The node is stored with its daemon flag (one commit): it only needs handing over.
    instance = _instantiate(process, inputs, caller, call_key, to_daemon=True)
    node = instance.node
    assert node is not None
    instance.close()
    notify_daemon(node, wait=wait)
    return node


def _hand_to_daemon(node: ProcessNode) -> None:
    """An existing process to the daemon: flagged, then a task for it."""
    node.set_attribute(DAEMON, True)
    notify_daemon(node)


def launch_child(
    caller: ProcessNode,
    process: type[Process] | ProcessBuilder[Process],
    inputs: dict[str, Any],
    call_key: str | None = None,
    resumed: bool = False,
) -> ProcessNode:
    """A process called by a workflow, linked to it: run in the daemon when the caller is,
    else beside the caller on this runner's loop.

    A ``resumed`` caller (continued from its checkpoint after its worker died) may be
    repeating a step that already launched this child: the child with the same
    ``call_key`` is then returned, and handed to the daemon again in case the first hand-over
    was lost (a duplicate task is dropped by the worker that gets it).
    """

    if resumed and call_key is not None:
        existing = find_called(caller, call_key)
        if existing is not None:
            if caller.get_attribute(DAEMON) and not existing.is_terminated:
                _hand_to_daemon(existing)
            return existing
    if caller.get_attribute(DAEMON):
        return _to_daemon(process, inputs, caller, call_key)
    instance = _instantiate(process, inputs, caller, call_key)
    get_runner().start_local(instance)
    assert instance.node is not None
    return instance.node


def find_called(caller: ProcessNode, call_key: str) -> ProcessNode | None:
    """The process ``caller`` launched under ``call_key``, if it did."""
    import sqlalchemy as sa

    with get_storage().session() as session:
        pk = session.scalars(
            sa.select(models.Link.output_id)
            .join(models.Node, models.Node.id == models.Link.output_id)
            .where(
                models.Link.input_id == caller.pk,
                models.Link.link_type == "call",
                models.Node.attributes[CALL_KEY].as_string() == call_key,
            )
            .limit(1)
        ).first()
    return None if pk is None else load_node(pk)  # type: ignore[return-value]
