"""The fake transport: a computer in a sandbox folder on this machine, recording every call."""

from __future__ import annotations

import functools
import os
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veglia.exceptions import TransportConnectionError, TransportError
from veglia.file_reads import read_per_file
from veglia.local_transport_base import LocalTransportBase
from veglia.transports import AuthOption, shown_command

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


class FakeTransport(LocalTransportBase):
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

    def _target(self, path: str | Path) -> str:
        return self._local(path)

    def read_files(self, payload: dict[str, Any]) -> list[Any]:
        """With ``lstat`` and ``read_bytes`` (the generic path), so it stays in the sandbox;
        those calls are what :attr:`calls` records."""
        return read_per_file(self, payload)

    def rmtree(self, path: str) -> None:
        if self._local(path) == str(self.root):
            raise TransportError("Refusing to remove the FakeTransport's whole sandbox.")
        super().rmtree(path)

    def home(self) -> str:
        """``<root>/home``, created when first asked."""
        home = self._local(self.root / "home")
        os.makedirs(home, exist_ok=True)
        return home

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
                f"FakeTransport has no answer for `{shown_command(command)}` and runs no shell "
                "(shell=False): register one with respond()."
            )
        home = self.home()
        return self._run_bash(
            command,
            cwd=directory or home,
            stdin=stdin,
            timeout=timeout,
            env={**os.environ, "HOME": home},
        )


for _name in _RECORDED:
    setattr(FakeTransport, _name, _recorded(getattr(FakeTransport, _name)))
del _name
