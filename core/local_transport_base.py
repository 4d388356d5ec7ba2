"""The base of transports that act on this machine's own files and shell.

``core.local`` is one; :class:`veglia.testing.FakeTransport` is another, confined to a
sandbox. They share every file operation here, so what a plugin's test sees on the fake is
what the real local transport does.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import getpass
import os
import select
import selectors
import shlex
import shutil
import signal
import stat as stat_module
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from veglia.exceptions import TransportError, TransportTimeoutError
from veglia.transports import FileStat, Transport, shown_command

__all__ = ["LocalTransportBase"]


@functools.cache
def _bash() -> str:
    # Found once: otherwise each command's child tries every PATH entry before bash's.
    return shutil.which("bash") or "bash"


class LocalTransportBase(Transport):
    """File operations and commands on this machine. Subclasses decide where a path leads
    (:meth:`_target`), what the open state is, and where commands run (:meth:`_run_bash`'s
    arguments)."""

    def _target(self, path: str | Path) -> str:
        """The local path a file operation on ``path`` acts on."""
        return self.path(path)

    def _os_error(self, action: str, path: str, exc: OSError) -> TransportError:
        return TransportError(
            f"Could not {action} {path} on {self.hostname}: {exc.strerror or exc}"
        )

    def _open_regular(self, source: str) -> BinaryIO:
        """The file opened for reading, refused unless it is a regular file: checked on the
        open descriptor (no symlink followed, a FIFO not waited on), so a job cannot swap in
        something else between a check and the read."""
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ELOOP:  # ELOOP: the last part is a symlink
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
        target = self._target(remotepath)
        try:
            shutil.copyfile(localpath, target)
        except OSError as exc:
            raise self._os_error("copy a file to", target, exc) from None

    def getfile(self, remotepath: str, localpath: str | Path) -> None:
        source = self._target(remotepath)
        try:
            with self._open_regular(source) as handle, open(localpath, "wb") as target:
                shutil.copyfileobj(handle, target, 1024 * 1024)
        except OSError as exc:
            # A half-written copy must not pass for the file.
            Path(localpath).unlink(missing_ok=True)
            raise self._os_error("copy a file from", source, exc) from None

    def read_bytes(self, remotepath: str, offset: int = 0, size: int | None = None) -> bytes:
        source = self._target(remotepath)
        try:
            with self._open_regular(source) as handle:
                handle.seek(offset)
                return handle.read() if size is None else handle.read(size)
        except OSError as exc:
            raise self._os_error("read", source, exc) from None

    def write_bytes(self, remotepath: str, data: bytes) -> None:
        target = self._target(remotepath)
        try:
            Path(target).write_bytes(data)
        except OSError as exc:
            raise self._os_error("write", target, exc) from None

    def listdir(self, path: str = ".") -> list[str]:
        folder = self._target(path)
        try:
            return sorted(os.listdir(folder))
        except OSError as exc:
            raise self._os_error("list", folder, exc) from None

    def stat(self, path: str) -> FileStat:
        return self._stat(path, os.stat)

    def lstat(self, path: str) -> FileStat:
        return self._stat(path, os.lstat)

    def _stat(self, path: str, how: Callable[[str], os.stat_result]) -> FileStat:
        target = self._target(path)
        try:
            result = how(target)
        except OSError as exc:
            raise self._os_error("stat", target, exc) from None
        return FileStat(size=result.st_size, mtime=result.st_mtime, mode=result.st_mode)

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        target = self._target(path)
        try:
            os.makedirs(target, exist_ok=exist_ok)
        except OSError as exc:
            raise self._os_error("create the folder", target, exc) from None

    def remove(self, path: str) -> None:
        target = self._target(path)
        try:
            os.remove(target)
        except OSError as exc:
            raise self._os_error("remove", target, exc) from None

    def rmtree(self, path: str) -> None:
        target = self._target(path)
        try:
            shutil.rmtree(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._os_error("remove the folder", target, exc) from None

    def symlink(self, source: str, link: str) -> None:
        target = self._target(link)
        try:
            os.symlink(self.path(source), target)
        except OSError as exc:
            raise self._os_error("create the symlink", target, exc) from None

    def whoami(self) -> str:
        return getpass.getuser()

    def home(self) -> str:
        return os.path.expanduser("~")

    # -- commands ---------------------------------------------------------------------------
    def _run_bash(
        self,
        command: str,
        *,
        cwd: str | None,
        stdin: bytes | None,
        timeout: float | None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[int, str, str]:
        """Run ``command`` with bash in ``cwd``; its whole process group is killed past
        ``timeout`` seconds, or once it printed more than :attr:`max_output` bytes on stdout
        or stderr."""
        try:
            process = subprocess.Popen(
                [_bash(), "-c", command],
                cwd=cwd,
                env=None if env is None else dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise self._os_error("run a command in", cwd or ".", exc) from None
        try:
            stdout, stderr = self._communicate(process, command, stdin or b"", timeout)
        except BaseException:
            # The command's own children (a `sleep` in a pipeline) would outlive bash.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        finally:
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
        return process.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")

    def _communicate(
        self, process: subprocess.Popen[bytes], command: str, stdin: bytes, timeout: float | None
    ) -> tuple[bytes, bytes]:
        """Like ``Popen.communicate``, but reading at most :attr:`max_output` bytes of each
        stream: a command that prints more raises rather than fill the worker's memory."""
        assert process.stdin and process.stdout and process.stderr
        deadline = None if timeout is None else time.monotonic() + timeout
        outputs = {process.stdout: bytearray(), process.stderr: bytearray()}
        names = {process.stdout: "stdout", process.stderr: "stderr"}
        pending = memoryview(stdin)
        with selectors.DefaultSelector() as selector:
            if pending:
                selector.register(process.stdin, selectors.EVENT_WRITE)
            else:
                process.stdin.close()
            for pipe in outputs:
                selector.register(pipe, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise self._timed_out(command, timeout)
                for key, _ in selector.select(left):
                    if key.fileobj is process.stdin:
                        try:  # at most PIPE_BUF: a write the pipe has room for never blocks
                            written = os.write(key.fd, pending[: select.PIPE_BUF])
                        except BrokenPipeError:  # the command does not read its input
                            written = len(pending)
                        pending = pending[written:]
                        if not pending:
                            selector.unregister(process.stdin)
                            process.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    output = outputs[key.fileobj]  # type: ignore[index]
                    output += chunk
                    if len(output) > self.max_output:
                        raise self.output_too_large(command, names[key.fileobj])  # type: ignore[index]
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            process.wait(left)
        except subprocess.TimeoutExpired:
            raise self._timed_out(command, timeout) from None
        return bytes(outputs[process.stdout]), bytes(outputs[process.stderr])

    def _timed_out(self, command: str, timeout: float | None) -> TransportTimeoutError:
        return TransportTimeoutError(
            f"`{shown_command(command)}` on {self.hostname} ran past its timeout of {timeout} s."
        )

    def exec_command(
        self,
        command: str,
        *,
        workdir: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        cwd = self.path(workdir) if workdir else None
        return self._run_bash(command, cwd=cwd, stdin=stdin, timeout=timeout)

    def gotocomputer_command(self, workdir: str) -> str:
        """Your own shell (``$SHELL``, else bash), as a login shell, in ``workdir``."""
        return f'cd {shlex.quote(self.path(workdir))} && exec "${{SHELL:-bash}}" -l'
