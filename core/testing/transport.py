"""The fake transport: a computer in a sandbox folder on this machine, recording every call."""

from __future__ import annotations

import errno
import functools
import getpass
import os
import re
import shlex
import shutil
import signal
import stat as stat_module
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from veglia.exceptions import TransportConnectionError, TransportError, TransportTimeoutError
from veglia.file_reads import read_per_file
from veglia.transports import AuthOption, FileStat, Transport

__all__ = ["Call", "CommandHandler", "CommandResult", "FakeTransport"]

#: What a command handler returns: (exit code, stdout, stderr).
CommandResult = tuple[int, str, str]
#: A function answering a command: ``(command, workdir, stdin) -> (exit code, stdout, stderr)``.
CommandHandler = Callable[[str, str | None, bytes | None], CommandResult]


@dataclass
class Call:
    """One call a :class:`FakeTransport` received: the method's name and its arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


#: The Transport methods a FakeTransport records (and can be told to fail).
_RECORDED = (
    "putfile", "getfile", "read_bytes", "write_bytes", "listdir", "stat", "lstat", "makedirs",
    "remove", "rmtree", "symlink", "exec_command", "gotocomputer_command", "exists", "isdir",
    "isfile", "is_real_dir", "get_regular", "puttree", "gettree", "put", "get", "home",
    "whoami",
)  # fmt: skip


def _recorded(method: Callable[..., Any]) -> Callable[..., Any]:
    """Record the call (unless another recorded method of the transport made it) and raise
    the failure the test asked for, if any (also inside another method)."""

    @functools.wraps(method)
    def wrapper(self: FakeTransport, *args: Any, **kwargs: Any) -> Any:
        local = self._local_state
        with self._lock:
            if not getattr(local, "depth", 0):
                self.calls.append(Call(method.__name__, args, dict(kwargs)))
            failures = self._failures.get(method.__name__)
            failure = failures.pop(0) if failures else None
        if failure is not None:
            raise failure
        local.depth = getattr(local, "depth", 0) + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            local.depth -= 1

    return wrapper


class FakeTransport(Transport):
    """A computer in a sandbox folder on this machine, recording every call.

    Paths are this machine's own paths, absolute or relative to :attr:`cwd` (the sandbox,
    :attr:`root`, until changed), so commands see the same files the methods do. File
    methods refuse paths outside the sandbox with a :class:`TransportError`, so a plugin
    under test cannot touch the real machine by mistake (commands are not confined: this
    is a convenience, not a security boundary). :meth:`home` is ``<root>/home``,
    :meth:`whoami` the local user.

    Like ``core.ssh``, it must be opened (``with FakeTransport() as transport:``): a plugin
    that forgets it fails here rather than on a real computer.

    - :attr:`calls` lists every call in order (:class:`Call`; a call a recorded method made
      itself, as :meth:`get_regular` calling :meth:`getfile`, is not listed);
      :attr:`commands` the command lines run.
    - :meth:`respond` answers commands matching a pattern; others run with bash in the
      sandbox (``HOME`` set to :meth:`home`), or, with ``shell=False``, raise
      :class:`TransportError`.
    - :meth:`fail` makes the next calls of a method raise, to test error handling.
    - The test sets files up directly under :attr:`root` (a :class:`~pathlib.Path`),
      without recording them.

    ``root`` and ``shell`` are also connection parameters, so a stored computer can be
    configured with them (``computer.configure(root=...)``): the engine makes a new
    transport per connection, and they must share a sandbox. Without ``root`` each
    transport gets a new temporary folder, removed with it.
    """

    auth_options = (
        AuthOption("root", "Sandbox folder standing for the computer (default: a new one)."),
        AuthOption("shell", "Run unanswered commands with bash (else refuse them).", bool, True),
    )

    def __init__(self, hostname: str = "fake", **auth_params: Any) -> None:
        super().__init__(hostname, **auth_params)
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        if self.auth_params["root"]:
            root = Path(self.auth_params["root"]).expanduser().resolve()
            root.mkdir(parents=True, exist_ok=True)
        else:
            self._tempdir = tempfile.TemporaryDirectory(prefix="veglia-fake-")
            root = Path(self._tempdir.name).resolve()
        #: The sandbox folder; tests may create and read files under it directly.
        self.root = root
        self.cwd = str(root)
        #: Every call received, in order.
        self.calls: list[Call] = []
        self._responses: list[tuple[re.Pattern[str], CommandResult | CommandHandler]] = []
        self._failures: dict[str, list[BaseException]] = {}
        self._open = False
        self._lock = threading.Lock()
        self._local_state = threading.local()

    # -- what tests use -------------------------------------------------------------------
    @property
    def commands(self) -> list[str]:
        """The command lines :meth:`exec_command` received, in order."""
        calls = [call for call in self.calls if call.name == "exec_command"]
        return [call.args[0] if call.args else call.kwargs["command"] for call in calls]

    def respond(self, pattern: str, result: CommandResult | CommandHandler) -> None:
        """Answer commands matching the regex ``pattern`` (searched; the latest registered
        wins) with ``result``: an ``(exit code, stdout, stderr)`` tuple, or a function of
        ``(command, workdir, stdin)`` returning one."""
        self._responses.insert(0, (re.compile(pattern), result))

    def fail(self, method: str, error: BaseException | None = None, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` raise ``error`` (by default a
        :class:`TransportConnectionError`, as when the connection drops), also when another
        method makes them (:meth:`exists` calling :meth:`stat`)."""
        if method not in _RECORDED:
            raise ValueError(f"FakeTransport cannot fail {method!r}: use one of {_RECORDED}")
        error = error or TransportConnectionError(f"{method} failed on {self.hostname} (fake)")
        self._failures.setdefault(method, []).extend([error] * times)

    # -- connection -------------------------------------------------------------------------
    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def _local(self, path: str | Path, *, confined: bool = True) -> str:
        """``path`` made absolute; an error unless open, and (``confined``) in the sandbox."""
        if not self._open:
            raise TransportConnectionError(
                f"The FakeTransport to {self.hostname} is not open: use `with "
                "FakeTransport() as transport:` or call open() first, as for any transport."
            )
        absolute = self.path(path)
        root = str(self.root)
        if confined and absolute != root and not absolute.startswith(root.rstrip("/") + "/"):
            raise TransportError(
                f"{absolute} is outside the FakeTransport's sandbox {root}: a test must not "
                "reach the real machine's files."
            )
        return absolute

    def _os_error(self, action: str, path: str, exc: OSError) -> TransportError:
        return TransportError(
            f"Could not {action} {path} on {self.hostname}: {exc.strerror or exc}"
        )

    def _open_regular(self, source: str) -> BinaryIO:
        """The file opened for reading, refused unless it is a regular file (checked on the
        descriptor: no symlink followed, no FIFO waited on), as the real transports do."""
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            fd = None
        if fd is None or not stat_module.S_ISREG(os.fstat(fd).st_mode):
            if fd is not None:
                os.close(fd)
            raise TransportError(
                f"{source} on {self.hostname} is not a regular file (a link, FIFO or device): "
                "veglia reads only regular files from a job's folder."
            )
        return os.fdopen(fd, "rb")

    # -- files ------------------------------------------------------------------------------
    def putfile(self, localpath: str | Path, remotepath: str) -> None:
        target = self._local(remotepath)
        try:
            shutil.copyfile(localpath, target)
        except OSError as exc:
            raise self._os_error("copy a file to", target, exc) from None

    def getfile(self, remotepath: str, localpath: str | Path) -> None:
        source = self._local(remotepath)
        try:
            with self._open_regular(source) as handle, open(localpath, "wb") as target:
                shutil.copyfileobj(handle, target)
        except OSError as exc:
            Path(localpath).unlink(missing_ok=True)
            raise self._os_error("copy a file from", source, exc) from None

    def read_bytes(self, remotepath: str, offset: int = 0, size: int | None = None) -> bytes:
        source = self._local(remotepath)
        try:
            with self._open_regular(source) as handle:
                handle.seek(offset)
                return handle.read() if size is None else handle.read(size)
        except OSError as exc:
            raise self._os_error("read", source, exc) from None

    def read_files(self, payload: dict[str, Any]) -> list[Any]:
        """With ``lstat`` and ``read_bytes`` (the generic path), so it stays in the sandbox;
        those calls are what :attr:`calls` records."""
        return read_per_file(self, payload)

    def write_bytes(self, remotepath: str, data: bytes) -> None:
        target = self._local(remotepath)
        try:
            Path(target).write_bytes(data)
        except OSError as exc:
            raise self._os_error("write", target, exc) from None

    def listdir(self, path: str = ".") -> list[str]:
        folder = self._local(path)
        try:
            return sorted(os.listdir(folder))
        except OSError as exc:
            raise self._os_error("list", folder, exc) from None

    def stat(self, path: str) -> FileStat:
        return self._stat(path, os.stat)

    def lstat(self, path: str) -> FileStat:
        return self._stat(path, os.lstat)

    def _stat(self, path: str, how: Callable[[str], os.stat_result]) -> FileStat:
        target = self._local(path)
        try:
            result = how(target)
        except OSError as exc:
            raise self._os_error("stat", target, exc) from None
        return FileStat(size=result.st_size, mtime=result.st_mtime, mode=result.st_mode)

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        target = self._local(path)
        try:
            os.makedirs(target, exist_ok=exist_ok)
        except OSError as exc:
            raise self._os_error("create the folder", target, exc) from None

    def remove(self, path: str) -> None:
        target = self._local(path)
        try:
            os.remove(target)
        except OSError as exc:
            raise self._os_error("remove", target, exc) from None

    def rmtree(self, path: str) -> None:
        target = self._local(path)
        if target == str(self.root):
            raise TransportError("Refusing to remove the FakeTransport's whole sandbox.")
        try:
            shutil.rmtree(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._os_error("remove the folder", target, exc) from None

    def symlink(self, source: str, link: str) -> None:
        target = self._local(link)
        try:
            os.symlink(self.path(source), target)
        except OSError as exc:
            raise self._os_error("create the symlink", target, exc) from None

    def home(self) -> str:
        """``<root>/home``, created when first asked."""
        home = self._local(self.root / "home")
        os.makedirs(home, exist_ok=True)
        return home

    def whoami(self) -> str:
        return getpass.getuser()

    # -- commands ---------------------------------------------------------------------------
    def exec_command(
        self,
        command: str,
        *,
        workdir: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        """The answer :meth:`respond` registered for ``command``, else its run with bash in
        ``workdir`` (by default :meth:`home`); raises :class:`TransportTimeoutError` past
        ``timeout`` seconds."""
        directory = self._local(workdir, confined=False) if workdir else None
        for pattern, result in self._responses:
            if pattern.search(command):
                return result(command, directory, stdin) if callable(result) else result
        if not self.auth_params["shell"]:
            raise TransportError(
                f"FakeTransport has no answer for `{command}` and runs no shell (shell=False): "
                "register one with respond()."
            )
        home = self.home()
        try:
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=directory or home,
                env={**os.environ, "HOME": home},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise self._os_error("run a command in", directory or home, exc) from None
        try:
            stdout, stderr = process.communicate(stdin or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise TransportTimeoutError(
                f"`{command}` on {self.hostname} ran past its timeout of {timeout} s."
            ) from None
        return process.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")

    def gotocomputer_command(self, workdir: str) -> str:
        return f"cd {shlex.quote(self.path(workdir))} && exec bash -l"


for _name in _RECORDED:
    setattr(FakeTransport, _name, _recorded(getattr(FakeTransport, _name)))
del _name
