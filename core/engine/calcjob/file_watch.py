"""Monitors that declare the files they read, so the engine reads them for many jobs at once.

A monitor decorated with :func:`watch_files` names its files with :class:`FileWatch` (a
path, or a glob, that may use the monitor's keywords: ``"{path}"``) and takes a ``files``
keyword. At each cycle the engine reads what every such monitor of every job on a computer
needs in one transport call (one ``python3`` command over SSH, see ``veglia.file_reads``) and
hands each monitor a ``{path: FileSlice}`` mapping: the new bytes since the last cycle (the
offsets are kept on the job, across daemon restarts), the last bytes, or only the size.

Called directly (in a test, with a ``FakeTransport``), such a monitor reads its files itself
through the transport; given a ``state`` dict (even one it does not declare), it keeps its
offsets there (under ``watched_files``) and reads only new bytes at the next call, as in the
engine.
"""

from __future__ import annotations

import base64
import functools
import inspect
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from veglia.exceptions import MonitorError
from veglia.file_reads import DEFAULT_BUDGET

__all__ = ["FileSlice", "FileWatch", "links_in", "watch_files", "watches_of"]

F = TypeVar("F", bound=Callable[..., Any])
#: Where a monitor called directly with a ``state`` dict keeps its offsets in it.
DIRECT_OFFSETS = "watched_files"
MODES = ("new", "tail", "stat")
#: Known offsets of one monitor: absolute path -> [offset, inode or None].
Known = dict[str, list[Any]]


@dataclass(frozen=True)
class FileWatch:
    """A file a monitor reads at each cycle.

    :param path: relative to the job's work directory (or absolute); ``{name}`` is replaced
        by the monitor's keyword ``name`` (``"{path}"``).
    :param mode: ``new`` (the bytes written since the last cycle), ``tail`` (the last
        ``tail`` bytes) or ``stat`` (size and time only, no bytes).
    :param tail: bytes to read in ``tail`` mode.
    :param max_bytes: at most this many bytes of the file per cycle; in ``new`` mode the rest
        comes at the next cycles, none is skipped.
    :param lines: in ``new`` mode, hand over whole lines only: a line still being written
        waits for its newline (unless it alone fills ``max_bytes``).
    :param glob: ``path`` is a glob pattern (wildcards in its last part); each match is a
        file of its own (at most 200, in sorted order).
    """

    path: str
    mode: str = "new"
    tail: int = 0
    max_bytes: int = 1024 * 1024
    lines: bool = False
    glob: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise MonitorError(f"FileWatch mode {self.mode!r} is not one of {', '.join(MODES)}.")
        if self.mode == "tail" and self.tail <= 0:
            raise MonitorError("FileWatch in tail mode needs tail > 0 (the bytes to read).")
        if self.max_bytes <= 0:
            raise MonitorError(f"FileWatch max_bytes must be > 0, not {self.max_bytes!r}.")


@dataclass(frozen=True)
class FileSlice:
    """What a monitor gets of one watched file at a cycle."""

    #: The path as the monitor named it (a glob's match relative to the work directory).
    path: str
    #: Whether a regular file is there (a symlink, FIFO or folder is never read).
    exists: bool
    #: Its size in bytes (-1 when missing).
    size: int
    #: Its modification time (None when missing).
    mtime: float | None
    #: The bytes read: new ones, the tail, or none in ``stat`` mode.
    data: bytes = b""
    #: Where ``data`` starts in the file.
    offset: int = 0
    #: The file shrank or was replaced since the last cycle: ``data`` starts again at 0.
    reset: bool = False
    #: Something else than a regular file is at the path (or a link on the way to it).
    irregular: bool = False
    #: A folder on the way to the file, from the work dir down, that is a link (an absolute
    #: path): it is not followed, so the file is not read.
    link: str | None = None

    @property
    def text(self) -> str:
        """``data`` decoded as UTF-8 (undecodable bytes replaced)."""
        return self.data.decode(errors="replace")

    def lines(self) -> list[str]:
        """``text`` split into lines."""
        return self.text.splitlines()


def watch_files(*watches: FileWatch) -> Callable[[F], F]:
    """Declare the files a monitor reads; the engine then hands them over as ``files``.

    The monitor must be a plain ``def`` taking ``files: dict[str, FileSlice] | None = None``.
    """

    for watch in watches:
        if not isinstance(watch, FileWatch):
            raise MonitorError(f"watch_files takes FileWatch objects, not {watch!r}.")

    def decorate(function: F) -> F:
        if inspect.iscoroutinefunction(function):
            raise MonitorError(
                f"{function.__name__}: a watch_files monitor gets its bytes handed over and "
                "needs no transport calls; make it a plain def."
            )
        signature = inspect.signature(function)
        if "files" not in signature.parameters:
            raise MonitorError(
                f"{function.__name__}: a watch_files monitor takes a `files` keyword "
                "(files: dict[str, FileSlice] | None = None)."
            )

        takes_state = "state" in signature.parameters
        function.__veglia_watches__ = watches  # type: ignore[attr-defined]

        @functools.wraps(function)  # which copies __veglia_watches__ too
        def monitor(node: Any, transport: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("files") is None:  # called directly: read them now
                state = kwargs.get("state") if takes_state else kwargs.pop("state", None)
                given = signature.bind_partial(node, transport, *args, **kwargs).arguments
                state = given.get("state", state)
                offsets = state.setdefault(DIRECT_OFFSETS, {}) if isinstance(state, dict) else {}
                kwargs["files"] = read_directly(function, transport, given, offsets)
            return function(node, transport, *args, **kwargs)

        return monitor  # type: ignore[return-value]

    return decorate


def watches_of(function: Any) -> tuple[FileWatch, ...] | None:
    """The FileWatches a monitor declared, or None for a plain monitor."""
    return getattr(function, "__veglia_watches__", None)


@functools.lru_cache(maxsize=256)
def _defaults(function: Callable[..., Any]) -> dict[str, Any]:
    parameters = inspect.signature(function).parameters.items()
    return {name: p.default for name, p in parameters if p.default is not p.empty}


def _keywords(function: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The monitor's keywords with their defaults, to fill the paths' ``{name}`` fields."""
    return {**_defaults(function), **kwargs}


def requests_for(
    function: Callable[..., Any], kwargs: dict[str, Any], workdir: str, known: Known
) -> list[dict[str, Any]]:
    """The read requests (``veglia.file_reads``) of one monitor of one job."""
    values = _keywords(function, kwargs)
    requests = []
    for watch in watches_of(function) or ():
        try:
            path = watch.path.format(**values)
        except (KeyError, IndexError) as exc:
            raise MonitorError(f"FileWatch path {watch.path!r} names no keyword {exc}.") from None
        absolute = posixpath.normpath(posixpath.join(workdir, path))
        requests.append(
            {
                "path": absolute,
                # No link followed from the work dir down (the job could make one).
                "below": workdir,
                "glob": watch.glob,
                "mode": watch.mode,
                "max": watch.max_bytes,
                "tail": watch.tail,
                "known": {p: v for p, v in known.items() if p == absolute or watch.glob},
            }
        )
    return requests


def slices_from(
    function: Callable[..., Any],
    kwargs: dict[str, Any],
    workdir: str,
    known: Known,
    answers: list[Any],
) -> tuple[dict[str, FileSlice], Known]:
    """The monitor's ``files`` from the answers to its requests, and the offsets to keep
    once it has seen them."""
    values = _keywords(function, kwargs)
    files: dict[str, FileSlice] = {}
    kept: Known = {}
    for watch, entries in zip(watches_of(function) or (), answers, strict=True):
        declared = watch.path.format(**values)
        for path, kind, size, mtime, inode, start, encoded in entries:
            name = declared
            if watch.glob:
                relative = not posixpath.isabs(declared)
                name = posixpath.relpath(path, workdir) if relative else path
            if kind == "l":
                files[name] = FileSlice(name, False, size, mtime, irregular=True, link=encoded)
                continue
            if kind != "f":
                files[name] = FileSlice(name, False, size, mtime, irregular=kind == "x")
                continue
            data = base64.b64decode(encoded)
            if watch.mode == "new" and watch.lines and data:
                cut = data.rfind(b"\n")
                if cut >= 0:
                    data = data[: cut + 1]
                elif len(data) < watch.max_bytes:
                    data = b""  # a line being written: wait for its end
            previous = known.get(path)
            reset = watch.mode == "new" and previous is not None and start != previous[0]
            files[name] = FileSlice(name, True, size, mtime, data, start, reset)
            if watch.mode == "new":
                kept[path] = [start + len(data), inode]
    return files, kept


def links_in(answers: list[Any]) -> dict[str, str]:
    """The paths of the answers to one monitor's requests that were not read because of a
    link on the way to them, and that link."""
    return {path: link for entries in answers for path, kind, *_, link in entries if kind == "l"}


def read_directly(
    function: Callable[..., Any], transport: Any, kwargs: Any, offsets: Known
) -> dict[str, FileSlice]:
    """The files of a monitor called outside the engine, read through its transport; the
    offsets are kept in ``offsets`` (from the ``state`` dict the caller passed, if any)."""
    workdir = getattr(transport, "cwd", "/")
    requests = requests_for(function, kwargs, workdir, offsets)
    answers = transport.read_files({"budget": DEFAULT_BUDGET, "requests": requests})
    files, kept = slices_from(function, kwargs, workdir, offsets, answers)
    offsets.clear()
    offsets.update(kept)
    return files
