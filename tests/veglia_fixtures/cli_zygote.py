"""Run `veglia` commands as new processes without paying for Python's start each time.

The `veglia` console script spends most of its start importing SQLAlchemy, rich, click and
the like. The suite runs it hundreds of times, so this script imports those once and then
forks a child per command: the child is a new process with the command's own arguments,
environment, working folder, stdin, stdout and stderr, and imports veglia itself afresh,
exactly as the console script would. Nothing of veglia is imported here, so nothing veglia
reads from the environment at import time can leak from one command to the next.

Protocol (one JSON object per line on stdin; answers on stdout):
``{"args", "env", "cwd", "stdin", "stdout", "stderr", "script"}`` (the last four are
paths) is answered by ``{"pid": N}`` once forked, then ``{"status": CODE}``.

Set ``VEGLIA_TEST_CLI=subprocess`` to run the console script itself instead.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import site
import sys

#: Third-party modules every command imports; none reads veglia's environment.
PRELOAD = (
    "click",
    "rich.console",
    "rich.table",
    "rich.text",
    "sqlalchemy",
    "sqlalchemy.orm",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.ext.mutable",
    "pluggy",
    "platformdirs",
    "yaml",
)


def _preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _text_stream(fd: int, errors: str, line_buffering: bool):
    import io

    raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
    buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffered, encoding="utf-8", errors=errors, line_buffering=line_buffering
    )


def _run_command(request: dict) -> None:
    """In the child: become the command's process, run it, exit with its status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, request["stdin"], os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = sys.__stdin__ = _text_stream(0, "strict", False)
    sys.stdout = sys.__stdout__ = _text_stream(1, "strict", False)
    sys.stderr = sys.__stderr__ = _text_stream(2, "backslashreplace", True)
    # sys.path as the console script's interpreter would have it: its folder, then
    # PYTHONPATH, then the site folders (with .pth files of packages installed since).
    script_dir = os.path.dirname(request["script"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [script_dir, *extra, *[p for p in sys.path[1:] if p not in extra]]
    for folder in site.getsitepackages():
        site.addsitedir(folder)
    importlib.invalidate_caches()
    sys.argv = [request["script"], *request["args"]]
    status = 0
    try:
        from veglia.cli.main import main

        main(request["args"])
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException:  # what the interpreter would print for an uncaught exception
        import traceback

        traceback.print_exc()
        status = 1
    _finish(status)


def _finish(status: int) -> None:
    import atexit
    import threading

    with contextlib.suppress(Exception):  # join non-daemon threads, as an exit would
        threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def serve() -> None:
    _preload()
    requests, answers = sys.stdin, sys.stdout
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _run_command(request)
            finally:
                os._exit(70)
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, wait_status = os.waitpid(pid, 0)
        answers.write(json.dumps({"status": os.waitstatus_to_exitcode(wait_status)}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
