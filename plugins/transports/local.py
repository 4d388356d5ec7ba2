"""``core.local``: this machine's files and shell, with no connection to open."""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import signal
import stat as stat_module
import subprocess
from pathlib import Path
from typing import Any, BinaryIO

from veglia.exceptions import TransportError, TransportTimeoutError
from veglia.file_reads import read_requests
from veglia.transports import FileStat, Transport

__all__ = ["LocalTransport"]


class LocalTransport(Transport):
    """Run jobs on the machine veglia runs on; files are copied, commands run with bash."""

    def __init__(self, hostname: str = "localhost", **auth_params: object) -> None:
        super().__init__(hostname, **auth_params)
        self._open = False

    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def _os_error(self, action: str, path: str, exc: OSError) -> TransportError:
        return TransportError(f"Could not {action} {path} on localhost: {exc.strerror or exc}")

    def putfile(self, localpath: str | Path, remotepath: str) -> None:
        target = self.path(remotepath)
        try:
            shutil.copyfile(localpath, target)
        except OSError as exc:
            raise self._os_error("copy a file to", target, exc) from None

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
                f"{source} on localhost is not a regular file (a link, FIFO or device): "
                "veglia reads only regular files from a job's folder."
            )
        return os.fdopen(fd, "rb")

    def getfile(self, remotepath: str, localpath: str | Path) -> None:
        source = self.path(remotepath)
        try:
            with self._open_regular(source) as handle, open(localpath, "wb") as target:
                shutil.copyfileobj(handle, target, 1024 * 1024)
        except OSError as exc:
            raise self._os_error("copy a file from", source, exc) from None

    def read_bytes(self, remotepath: str, offset: int = 0, size: int | None = None) -> bytes:
        source = self.path(remotepath)
        try:
            with self._open_regular(source) as handle:
                handle.seek(offset)
                return handle.read() if size is None else handle.read(size)
        except OSError as exc:
            raise self._os_error("read", source, exc) from None

    def write_bytes(self, remotepath: str, data: bytes) -> None:
        target = self.path(remotepath)
        try:
            Path(target).write_bytes(data)
        except OSError as exc:
            raise self._os_error("write", target, exc) from None

    def listdir(self, path: str = ".") -> list[str]:
        folder = self.path(path)
        try:
            return sorted(os.listdir(folder))
        except OSError as exc:
            raise self._os_error("list", folder, exc) from None

    def stat(self, path: str) -> FileStat:
        return self._stat(path, os.stat)

    def lstat(self, path: str) -> FileStat:
        return self._stat(path, os.lstat)

    def _stat(self, path: str, how: Any) -> FileStat:
        target = self.path(path)
        try:
            result = how(target)
        except OSError as exc:
            raise self._os_error("stat", target, exc) from None
        return FileStat(size=result.st_size, mtime=result.st_mtime, mode=result.st_mode)

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        target = self.path(path)
        try:
            os.makedirs(target, exist_ok=exist_ok)
        except OSError as exc:
            raise self._os_error("create the folder", target, exc) from None

    def remove(self, path: str) -> None:
        target = self.path(path)
        try:
            os.remove(target)
        except OSError as exc:
            raise self._os_error("remove", target, exc) from None

    def rmtree(self, path: str) -> None:
        target = self.path(path)
        try:
            shutil.rmtree(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._os_error("remove the folder", target, exc) from None

    def symlink(self, source: str, link: str) -> None:
        target = self.path(link)
        try:
            os.symlink(self.path(source), target)
        except OSError as exc:
            raise self._os_error("create the symlink", target, exc) from None

    def read_files(self, payload: dict[str, Any]) -> list[Any]:
        """In process: the files are on this machine, no command is needed."""
        return read_requests(payload)

    def exec_command(
        self,
        command: str,
        *,
        workdir: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        try:
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=self.path(workdir) if workdir else None,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise self._os_error("run a command in", workdir or ".", exc) from None
        try:
            stdout, stderr = process.communicate(stdin or b"", timeout=timeout)
        except subprocess.TimeoutExpired:
            # The command's own children (a `sleep` in a pipeline) would outlive bash.
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise TransportTimeoutError(
                f"`{command}` on localhost ran past its timeout of {timeout} s."
            ) from None
        return (
            process.returncode,
            stdout.decode(errors="replace"),
            stderr.decode(errors="replace"),
        )

    def whoami(self) -> str:
        import getpass

        return getpass.getuser()

    def home(self) -> str:
        return os.path.expanduser("~")

    def gotocomputer_command(self, workdir: str) -> str:
        return f"cd {shlex.quote(self.path(workdir))} && exec bash -l"
