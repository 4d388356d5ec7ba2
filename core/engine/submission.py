"""Handing submitted processes to the daemon: a broker task, or the database alone."""

from __future__ import annotations

import importlib.machinery
import logging
import os
import sys

from veglia.engine.daemon.broker_tasks import send_continue_task
from veglia.engine.daemon.task_pipeline import get_pipeline
from veglia.manage import get_profile
from veglia.orm.process_nodes import ProcessNode

__all__ = ["check_handed_over", "daemon_import_problem", "notify_daemon", "warn_if_unimportable"]

LOGGER = logging.getLogger("veglia.engine")


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
    # Lazy: persistence imports the engine's process module, which imports this one.
    from veglia.engine.persistence import WHERE_PROCESS_CLASSES_GO

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
    return os.path.realpath(in_folder.origin) == os.path.realpath(spec.origin)


def _script_folder() -> str:
    """What Python put first on ``sys.path`` as it started: the script's folder, or the
    current folder (``python -c``, ``python -m``, the interactive prompt)."""
    main = sys.modules.get("__main__")
    main_file = getattr(main, "__file__", None)
    if main_file and getattr(main, "__spec__", None) is None:
        return os.path.dirname(os.path.realpath(main_file))
    return os.path.realpath(os.getcwd())


def _pythonpath() -> set[str]:
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return {os.path.realpath(entry) for entry in entries if entry}
