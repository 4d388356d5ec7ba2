"""The Transport base class: how the engine reaches a computer's files and shell.

A transport is opened once and shared (the engine's transport queue pools one per computer
and user), so implementations keep no per-job state. Paths may be absolute, or relative to
``cwd`` (the engine sets it to the job's work directory before calling monitors).

``core.local`` (``veglia.plugins.transports.local``) is the reference implementation.
"""

from __future__ import annotations

import posixpath
import shlex
import stat as stat_module
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from veglia import file_reads
from veglia.exceptions import CommandOutputTooLarge, TransportError

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "AuthOption",
    "FileStat",
    "Transport",
    "shown_command",
    "shown_output",
]

_T = TypeVar("_T", bound="Transport")  # what `with SomeTransport(...) as t` gives

#: The most veglia reads of a command's stdout, and of its stderr, in bytes: the default of
#: the profile option ``transport.max_command_output``.
DEFAULT_MAX_OUTPUT = 64 * 1024 * 1024


#: The most of a command's output an error message quotes, in characters.
SHOWN_OUTPUT = 2000


def shown_output(*texts: str) -> str:
    """The first of ``texts`` (a command's stderr, then its stdout) that is not blank,
    stripped and cut to :data:`SHOWN_OUTPUT` characters, for an error message: a command
    may print megabytes, and the message goes into the job's report."""
    text = next((t.strip() for t in texts if t and t.strip()), "(no output)")
    if len(text) <= SHOWN_OUTPUT:
        return text
    return f"{text[:SHOWN_OUTPUT]}... ({len(text) - SHOWN_OUTPUT} more characters)"


#: The most of a command an error message quotes, in characters.
SHOWN_COMMAND = 80


def shown_command(command: str) -> str:
    """``command`` for a transport's error message, in one short line: its first line, cut
    to :data:`SHOWN_COMMAND` characters, with ``...`` where anything was left out. veglia
    runs whole Python programs as ``python3 -c '...'``: kilobytes that would bury what went
    wrong (such a program's first line is a comment naming it)."""
    first, newline, _ = command.strip().partition("\n")
    if len(first) > SHOWN_COMMAND:
        return first[: SHOWN_COMMAND - 3] + "..."
    return first + "..." if newline else first


@dataclass(frozen=True)
class FileStat:
    """What :meth:`Transport.stat` tells about a path."""

    size: int
    mtime: float
    mode: int

    @property
    def is_dir(self) -> bool:
        return stat_module.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return stat_module.S_ISREG(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat_module.S_ISLNK(self.mode)


@dataclass(frozen=True)
class AuthOption:
    """A connection parameter a transport accepts (shown by ``veglia computer configure``)."""

    name: str
    description: str
    type: type = str
    default: Any = None
    #: The smallest and largest value a number may take (None: no bound).
    minimum: float | None = None
    maximum: float | None = None


class Transport(ABC):
    """Files and commands on one computer.

    Subclasses implement the abstract methods; everything else is built on them. Errors are
    raised as :class:`veglia.exceptions.TransportError` subclasses, never as bare OSError
    from a remote library, so callers can back off and retry on one exception type.

    Example, with the local transport::

        with TransportFactory("core.local")("localhost") as transport:
            transport.makedirs("/tmp/job")
            transport.write_bytes("/tmp/job/in.txt", b"hello")
            code, out, err = transport.exec_command("cat in.txt", workdir="/tmp/job")
    """

    #: Connection parameters this transport accepts.
    auth_options: ClassVar[tuple[AuthOption, ...]] = ()

    def __init__(self, hostname: str = "localhost", **auth_params: Any) -> None:
        unknown = set(auth_params) - {option.name for option in self.auth_options}
        if unknown:
            allowed = ", ".join(o.name for o in self.auth_options) or "none"
            raise TransportError(
                f"{type(self).__name__} does not accept {', '.join(sorted(unknown))} "
                f"(allowed: {allowed})."
            )
        self.hostname = hostname
        self.auth_params = {
            option.name: auth_params.get(option.name, option.default)
            for option in self.auth_options
        }
        self.cwd = "/"
        #: The most :meth:`exec_command` reads of each of a command's stdout and stderr, in
        #: bytes; a command that prints more is stopped with :class:`CommandOutputTooLarge`.
        #: ``Computer.get_transport`` sets it from ``transport.max_command_output``.
        self.max_output = DEFAULT_MAX_OUTPUT

    # -- connection -------------------------------------------------------------------
    @abstractmethod
    def open(self) -> None:
        """Open the connection (a no-op for local)."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection; the transport may be opened again later."""

    @property
    @abstractmethod
    def is_open(self) -> bool:
        """Whether the connection is open and usable."""

    def __enter__(self: _T) -> _T:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def path(self, path: str | Path) -> str:
        """``path`` made absolute against :attr:`cwd`."""
        return posixpath.normpath(posixpath.join(self.cwd, str(path)))

    # -- files ------------------------------------------------------------------------
    @abstractmethod
    def putfile(self, localpath: str | Path, remotepath: str) -> None:
        """Copy a local file to ``remotepath`` (overwriting)."""

    @abstractmethod
    def getfile(self, remotepath: str, localpath: str | Path) -> None:
        """Copy a remote file to ``localpath`` (overwriting)."""

    @abstractmethod
    def read_bytes(self, remotepath: str, offset: int = 0, size: int | None = None) -> bytes:
        """Read ``size`` bytes (all when None) of a remote file from ``offset`` on."""

    @abstractmethod
    def write_bytes(self, remotepath: str, data: bytes) -> None:
        """Write ``data`` to a remote file (overwriting)."""

    @abstractmethod
    def listdir(self, path: str = ".") -> list[str]:
        """Names in a remote folder, sorted."""

    @abstractmethod
    def stat(self, path: str) -> FileStat:
        """Size, mtime and mode of a path; raises TransportError when it does not exist."""

    @abstractmethod
    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        """Create a folder and its parents."""

    @abstractmethod
    def remove(self, path: str) -> None:
        """Remove one file or symlink."""

    @abstractmethod
    def rmtree(self, path: str) -> None:
        """Remove a folder and everything in it; no error when it does not exist."""

    @abstractmethod
    def symlink(self, source: str, link: str) -> None:
        """Create symlink ``link`` pointing at ``source``."""

    # -- commands ---------------------------------------------------------------------
    @abstractmethod
    def exec_command(
        self,
        command: str,
        *,
        workdir: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        """Run ``command`` with bash in ``workdir``; return (exit code, stdout, stderr).

        Raises :class:`TransportTimeoutError` when it runs past ``timeout`` seconds, and
        :class:`CommandOutputTooLarge` (see :meth:`output_too_large`) when it prints more
        than :attr:`max_output` bytes on stdout or on stderr: the command is stopped then,
        and no more than that is ever held in memory. An error that quotes the command
        quotes it through :func:`shown_command`.
        """

    def output_too_large(self, command: str, stream: str) -> CommandOutputTooLarge:
        """The error of a command that printed more than :attr:`max_output` on ``stream``."""
        cap = self.max_output
        size = f"{cap // 2**20} MB" if cap % 2**20 == 0 else f"{cap} bytes"
        raised = max(2 * cap // 2**20, 1)
        return CommandOutputTooLarge(
            f"`{shown_command(command)}` on {self.hostname} printed more than {size} on its "
            f"{stream}, the cap on what veglia reads of a command: it was stopped. Raise the cap "
            f"if that is expected: `veglia config set transport.max_command_output {raised}M`."
        )

    @abstractmethod
    def gotocomputer_command(self, workdir: str) -> str:
        """A shell command line that opens an interactive shell in ``workdir``."""

    # -- built on the above ------------------------------------------------------------
    def exists(self, path: str) -> bool:

        try:
            self.stat(path)
        except TransportError:
            return False
        return True

    def lstat(self, path: str) -> FileStat:
        """Like :meth:`stat`, but of a symlink itself rather than what it points to.

        Plugins override it (the default follows links); veglia reads from a job's work dir
        only what ``lstat`` calls a regular file.
        """
        return self.stat(path)

    def isdir(self, path: str) -> bool:
        return self.exists(path) and self.stat(path).is_dir

    def read_files(self, payload: dict[str, Any]) -> list[Any]:
        """Slices of many files at once (the batched monitors' reads; the format is in
        :mod:`veglia.file_reads`): one ``python3`` command on the computer, or, where it has
        no ``python3`` or the transport runs no commands, ``lstat`` and ``read_bytes`` per
        file. A transport that can read faster overrides it (``core.local`` reads in
        process)."""
        if not self.__dict__.get("_no_python"):
            try:
                answers = file_reads.read_via_command(self, payload)
            except NotImplementedError:
                answers = None
            if answers is not None:
                return answers
            self.__dict__["_no_python"] = True  # asked once per transport
        return file_reads.read_per_file(self, payload)

    def is_real_dir(self, path: str) -> bool:
        """A folder, and not a symlink to one."""

        try:
            return self.lstat(path).is_dir
        except TransportError:
            return False

    def lstat_mode(self, path: str) -> int | None:
        """The ``st_mode`` of ``path`` itself (a link is not followed); None when missing."""
        try:
            return self.lstat(path).mode
        except TransportError:
            return None

    def linked_part(self, folder: str, relative: str) -> str | None:
        """The first part of ``relative`` below ``folder`` that is a symlink (as a path
        relative to ``folder``), or None. Each part is looked at with ``lstat``, from the
        top down: a link anywhere along a path could lead out of ``folder``. A missing part
        ends the walk (None): there is nothing to follow."""
        return file_reads.linked_part(self.lstat_mode, folder, relative)

    def link_above(self, workdir: str, path: str) -> str | None:
        """The link (an absolute path) among the folders from ``workdir`` (itself included)
        down to the one holding ``path`` (relative to :attr:`cwd` or absolute), or None:
        what veglia checks before it reads a file of a job's own, the file itself being
        read without following a link."""
        return file_reads.link_above(self.lstat_mode, self.path(workdir), self.path(path))

    def get_regular(self, remotepath: str, localpath: str | Path, name: str = "") -> list[str]:
        """Copy a regular file, or a folder's regular files recursively; return the names
        (under ``name``) of what was not copied: symlinks, FIFOs, devices, sockets."""
        name = name or posixpath.basename(remotepath)
        info = self.lstat(remotepath)
        if info.is_file:
            self.getfile(remotepath, localpath)
            return []
        if not info.is_dir:
            return [name]
        local = Path(localpath)
        local.mkdir(parents=True, exist_ok=True)
        skipped = []
        for entry in self.listdir(remotepath):
            source = posixpath.join(self.path(remotepath), entry)
            skipped += self.get_regular(source, local / entry, posixpath.join(name, entry))
        return skipped

    def isfile(self, path: str) -> bool:
        return self.exists(path) and self.stat(path).is_file

    def puttree(self, localpath: str | Path, remotepath: str) -> None:
        """Copy a local folder's content into ``remotepath``, recursively."""
        local = Path(localpath)
        self.makedirs(remotepath)
        for item in sorted(local.iterdir()):
            target = posixpath.join(self.path(remotepath), item.name)
            if item.is_dir():
                self.puttree(item, target)
            else:
                self.putfile(item, target)

    def gettree(self, remotepath: str, localpath: str | Path) -> None:
        """Copy a remote folder's regular files into ``localpath``, recursively (links and
        special files are left out)."""
        self.get_regular(remotepath, localpath)

    def put(self, localpath: str | Path, remotepath: str) -> None:
        """Copy a file or a folder."""
        if Path(localpath).is_dir():
            self.puttree(localpath, remotepath)
        else:
            self.putfile(localpath, remotepath)

    def get(self, remotepath: str, localpath: str | Path) -> None:
        """Copy a file or a folder."""
        if self.isdir(remotepath):
            self.gettree(remotepath, localpath)
        else:
            self.getfile(remotepath, localpath)

    def home(self) -> str:
        """The home folder of the user commands run as (asked once)."""

        if "_home" not in self.__dict__:
            code, out, err = self.exec_command('printf "%s" "$HOME"', timeout=30)
            if code != 0 or not out.startswith("/"):
                raise TransportError(
                    f"Could not learn the home folder on {self.hostname}: {shown_output(err, out)}"
                )
            self.__dict__["_home"] = out
        home: str = self.__dict__["_home"]
        return home

    def whoami(self) -> str:
        """The user name the transport runs commands as."""

        code, out, err = self.exec_command("whoami", timeout=30)
        if code != 0:
            raise TransportError(f"`whoami` on {self.hostname} failed: {shown_output(err)}")
        return out.strip()

    @staticmethod
    def _bash(command: str, workdir: str | None) -> str:
        """The command line run by bash, in ``workdir`` when given."""
        prefix = f"cd {shlex.quote(workdir)} && " if workdir else ""
        return f"bash -c {shlex.quote(prefix + command)}"
