"""``core.ssh``: a remote computer over SSH (paramiko), files through SFTP.

Host keys are checked by default against the system's and the user's known_hosts (and
``known_hosts`` when given): an unknown or changed key is refused with a message that says
how to trust it. Key files, the ssh-agent and a jump host (``proxy_jump``) are supported;
keep-alive packets hold the connection open through idle firewalls.
"""

from __future__ import annotations

import shlex
import socket
import stat as stat_module
import time
from pathlib import Path
from typing import Any

import paramiko

from veglia.plugin_api import (
    AuthOption,
    FileStat,
    HostKeyError,
    Transport,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
    shown_command,
    shown_output,
)

#: Seconds an SFTP request may wait for the server's answer.
SFTP_TIMEOUT = 120.0

#: The most of a file copied from the computer that is held in memory at once, in bytes.
COPY_WINDOW = 4 * 1024 * 1024
#: The size of one SFTP read request (paramiko's largest).
_SFTP_READ = 32768

__all__ = ["SshTransport"]


def _split_destination(destination: str) -> tuple[str | None, str, int]:
    """``user@host:port`` -> (user, host, port)."""
    user, _, hostport = destination.rpartition("@")
    host, _, port = hostport.partition(":")
    return user or None, host, int(port) if port else 22


class SshTransport(Transport):
    """Files and commands on a remote computer over one SSH connection."""

    auth_options = (
        AuthOption("username", "Remote user name (default: your local user name)."),
        AuthOption("port", "SSH port.", int, 22, minimum=1, maximum=65535),
        AuthOption("key_filename", "Private key file (default: ~/.ssh keys and the agent)."),
        AuthOption("known_hosts", "Extra known_hosts file to trust host keys from."),
        AuthOption("host_key_checking", "Refuse unknown host keys.", bool, True),
        AuthOption("allow_agent", "Use the ssh-agent.", bool, True),
        AuthOption("look_for_keys", "Try the keys in ~/.ssh.", bool, True),
        AuthOption("proxy_jump", "Jump host as user@host:port."),
        AuthOption(
            "timeout",
            "Seconds each stage of a connection may take: the TCP connect, the SSH banner, "
            "the authentication, the opening of a channel.",
            float,
            30.0,
            minimum=0.1,
        ),
        AuthOption(
            "keepalive_interval",
            "Seconds between keep-alive packets (0: none).",
            int,
            30,
            minimum=0,
        ),
    )

    def __init__(self, hostname: str = "localhost", **auth_params: Any) -> None:
        super().__init__(hostname, **auth_params)
        self._client: paramiko.SSHClient | None = None
        self._jump: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._whoami: str | None = None

    # -- connection -------------------------------------------------------------------
    def _new_client(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        client.load_system_host_keys()
        if self.auth_params["known_hosts"]:
            client.load_host_keys(str(Path(self.auth_params["known_hosts"]).expanduser()))
        if self.auth_params["host_key_checking"]:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        return client

    def _connect(
        self, client: paramiko.SSHClient, host: str, port: int, user: str | None, sock: Any
    ) -> None:
        params = self.auth_params
        key = params["key_filename"]
        try:
            client.connect(
                host,
                port=port,
                username=user,
                key_filename=str(Path(key).expanduser()) if key else None,
                allow_agent=params["allow_agent"],
                look_for_keys=params["look_for_keys"],
                # Each stage waits at most this: the TCP connect, the server's banner, the
                # authentication, and later the opening of each channel (paramiko's own
                # default for that is an hour, which a hung host would hold a job for).
                timeout=params["timeout"],
                banner_timeout=params["timeout"],
                auth_timeout=params["timeout"],
                channel_timeout=params["timeout"],
                sock=sock,
            )
        except paramiko.BadHostKeyException as exc:
            raise HostKeyError(
                f"The host key of {host}:{port} has changed (got {exc.key.get_name()} "
                f"{exc.key.get_base64()[:16]}...). If the host was reinstalled, remove its old "
                "key with `ssh-keygen -R` and connect once with ssh to trust the new one."
            ) from None
        except paramiko.AuthenticationException as exc:
            if "timeout" in str(exc).lower():
                raise TransportConnectionError(
                    f"No answer to authentication from {host}:{port} within "
                    f"{params['timeout']:g} s: its sshd is hung or overloaded. veglia tries "
                    "again later; raise the computer's timeout if it is only slow."
                ) from None
            raise TransportConnectionError(
                f"SSH to {user or ''}@{host}:{port} failed: {exc}. Check the user name, key "
                "file and that the key is in the remote authorized_keys."
            ) from None
        except paramiko.SSHException as exc:
            started = client.get_transport()
            no_banner = started is not None and not started.remote_version
            if no_banner or "SSH protocol banner" in str(exc):
                # Either the wait for the handshake ended first (paramiko then says "No
                # existing session"), or the banner's read failed: on a timeout, or the end.
                banner_read = "SSH protocol banner" in str(exc)
                if isinstance(exc.__context__, TimeoutError) or not banner_read:
                    raise TransportConnectionError(
                        f"No SSH banner from {host}:{port} within {params['timeout']:g} s: the "
                        "host accepts connections but its sshd does not answer (hung or "
                        "overloaded). veglia tries again later."
                    ) from None
                raise TransportConnectionError(
                    f"{host}:{port} closed the connection before sending its SSH banner: "
                    "something other than sshd listens there, or sshd refuses connections "
                    "(MaxStartups). Check the port, and sshd's log."
                ) from None
            if "not found in known_hosts" in str(exc):
                where = f"[{host}]:{port}" if port != 22 else host
                raise HostKeyError(
                    f"The host key of {where} is not known. Check it and trust it with "
                    f"`ssh-keyscan -p {port} {host} >> ~/.ssh/known_hosts`, point known_hosts "
                    "at a file holding it, or set host_key_checking to false."
                ) from None
            raise TransportConnectionError(
                f"SSH to {user or ''}@{host}:{port} failed: {exc}. Check the user name, key "
                "file and that the key is in the remote authorized_keys."
            ) from None
        except (TimeoutError, OSError) as exc:
            # paramiko's NoValidConnectionsError has no errno: its str reads "[Errno None] ...".
            why = exc.strerror or str(exc)
            raise TransportConnectionError(
                f"Cannot connect to {host}:{port}: {why}. Check the host name and port, and "
                "that sshd runs there."
            ) from None

    def open(self) -> None:
        if self.is_open:
            return
        params = self.auth_params
        sock = None
        if params["proxy_jump"]:
            jump_user, jump_host, jump_port = _split_destination(params["proxy_jump"])
            self._jump = self._new_client()
            self._connect(self._jump, jump_host, jump_port, jump_user, None)
            jump_transport = self._jump.get_transport()
            assert jump_transport is not None
            sock = jump_transport.open_channel(
                "direct-tcpip", (self.hostname, params["port"]), ("127.0.0.1", 0)
            )
        client = self._new_client()
        self._connect(client, self.hostname, params["port"], params["username"], sock)
        transport = client.get_transport()
        if transport is not None and params["keepalive_interval"]:
            transport.set_keepalive(params["keepalive_interval"])
        self._client = client
        try:
            self._sftp = client.open_sftp()
            # A read the server never answers (a FIFO a job left behind, a hung file system)
            # must fail rather than hold the connection's only thread for ever.
            self._sftp.get_channel().settimeout(SFTP_TIMEOUT)
        except paramiko.SSHException as exc:
            self.close()
            raise TransportConnectionError(
                f"{self.hostname} accepted SSH but not SFTP: {exc}. Enable the sftp subsystem "
                "in its sshd_config."
            ) from None

    def close(self) -> None:
        for resource in (self._sftp, self._client, self._jump):
            if resource is not None:
                resource.close()
        self._sftp = self._client = self._jump = None

    @property
    def is_open(self) -> bool:
        if self._client is None:
            return False
        transport = self._client.get_transport()
        return transport is not None and transport.is_active()

    @property
    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None or not self.is_open:
            raise TransportConnectionError(
                f"The SSH connection to {self.hostname} is not open (it was closed or lost)."
            )
        return self._sftp

    def _error(self, action: str, path: str, exc: Exception) -> TransportError:
        if isinstance(exc, (socket.error, EOFError, paramiko.SSHException)) and not isinstance(
            exc, FileNotFoundError | PermissionError
        ):
            return TransportConnectionError(
                f"Lost the SSH connection to {self.hostname} while trying to {action} {path}: {exc}"
            )
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return TransportError(f"Could not {action} {path} on {self.hostname}: {reason}")

    # -- files ------------------------------------------------------------------------
    def putfile(self, localpath: str | Path, remotepath: str) -> None:
        target = self.path(remotepath)
        try:
            self.sftp.put(str(localpath), target)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("copy a file to", target, exc) from None

    def _check_regular(self, source: str) -> None:
        info = self.sftp.lstat(source)
        if not stat_module.S_ISREG(info.st_mode or 0):
            raise TransportError(
                f"{source} on {self.hostname} is not a regular file (a link, FIFO or device): "
                "veglia reads only regular files from a job's folder."
            )

    def getfile(self, remotepath: str, localpath: str | Path) -> None:
        source = self.path(remotepath)
        try:
            self._check_regular(source)
            with self.sftp.open(source, "rb") as handle, open(localpath, "wb") as target:
                size = handle.stat().st_size or 0
                # A window at a time, its reads in flight together: paramiko's own get()
                # asks for the whole file at once and holds what arrives faster than the
                # disk takes it, up to the whole file.
                copied = 0
                for start in range(0, size, COPY_WINDOW):
                    end = min(start + COPY_WINDOW, size)
                    chunks = [(o, min(_SFTP_READ, end - o)) for o in range(start, end, _SFTP_READ)]
                    for data in handle.readv(chunks):
                        copied += target.write(data)
                if copied != size:  # as paramiko's get(): a copy of a file cut short fails
                    raise OSError(f"it changed size while copied ({size} bytes, {copied} read)")
        except (OSError, paramiko.SSHException, EOFError) as exc:
            Path(localpath).unlink(missing_ok=True)
            raise self._error("copy a file from", source, exc) from None

    def read_bytes(self, remotepath: str, offset: int = 0, size: int | None = None) -> bytes:
        source = self.path(remotepath)
        try:
            self._check_regular(source)
            with self.sftp.open(source, "rb") as handle:
                handle.seek(offset)
                if size is None:
                    handle.prefetch()
                    whole: bytes = handle.read()
                    return whole
                part: bytes = handle.read(size)
                return part
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("read", source, exc) from None

    def write_bytes(self, remotepath: str, data: bytes) -> None:
        target = self.path(remotepath)
        try:
            with self.sftp.open(target, "wb") as handle:
                handle.write(data)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("write", target, exc) from None

    def listdir(self, path: str = ".") -> list[str]:
        folder = self.path(path)
        try:
            return sorted(self.sftp.listdir(folder))
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("list", folder, exc) from None

    def stat(self, path: str) -> FileStat:
        target = self.path(path)
        try:
            result = self.sftp.stat(target)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("stat", target, exc) from None
        return FileStat(
            size=result.st_size or 0, mtime=float(result.st_mtime or 0), mode=result.st_mode or 0
        )

    def lstat(self, path: str) -> FileStat:
        target = self.path(path)
        try:
            result = self.sftp.lstat(target)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("stat", target, exc) from None
        return FileStat(
            size=result.st_size or 0, mtime=float(result.st_mtime or 0), mode=result.st_mode or 0
        )

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        target = self.path(path)
        if self.isdir(target):
            if not exist_ok:
                raise TransportError(f"{target} exists already on {self.hostname}.")
            return
        code, _, err = self.exec_command(f"mkdir -p {shlex.quote(target)}", timeout=60)
        if code != 0:
            raise TransportError(
                f"Could not create {target} on {self.hostname}: {shown_output(err)}"
            )

    def remove(self, path: str) -> None:
        target = self.path(path)
        try:
            self.sftp.remove(target)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("remove", target, exc) from None

    def rmtree(self, path: str) -> None:
        target = self.path(path)
        if target in ("/", ""):
            raise TransportError("Refusing to remove the root folder.")
        code, _, err = self.exec_command(f"rm -rf {shlex.quote(target)}", timeout=600)
        if code != 0:
            raise TransportError(
                f"Could not remove {target} on {self.hostname}: {shown_output(err)}"
            )

    def symlink(self, source: str, link: str) -> None:
        target = self.path(link)
        try:
            self.sftp.symlink(self.path(source), target)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("create the symlink", target, exc) from None

    def isdir(self, path: str) -> bool:
        try:
            return stat_module.S_ISDIR(self.sftp.stat(self.path(path)).st_mode or 0)
        except OSError:
            return False

    # -- commands ---------------------------------------------------------------------
    def exec_command(
        self,
        command: str,
        *,
        workdir: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            raise TransportConnectionError(f"The SSH connection to {self.hostname} is not open.")
        line = self._bash(command, self.path(workdir) if workdir else None)
        shown = shown_command(command)
        try:
            channel = transport.open_session()
            channel.exec_command(line)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            stdout, stderr = bytearray(), bytearray()
            deadline = None if timeout is None else time.monotonic() + timeout
            heard = time.monotonic()
            while True:
                while channel.recv_ready():
                    stdout += channel.recv(65536)
                    heard = time.monotonic()
                    if len(stdout) > self.max_output:
                        channel.close()  # sshd hangs the command up: it gets SIGPIPE
                        raise self.output_too_large(command, "stdout")
                while channel.recv_stderr_ready():
                    stderr += channel.recv_stderr(65536)
                    heard = time.monotonic()
                    if len(stderr) > self.max_output:
                        channel.close()
                        raise self.output_too_large(command, "stderr")
                pending = channel.recv_ready() or channel.recv_stderr_ready()
                if channel.exit_status_ready() and channel.eof_received and not pending:
                    break
                if channel.closed and not pending:
                    # Closed with neither end of output nor exit status: the connection
                    # dropped (paramiko then marks the channel's status ready, forever).
                    raise TransportConnectionError(
                        f"Lost the SSH connection to {self.hostname} while `{shown}` ran; "
                        "veglia tries again once it answers."
                    )
                if deadline is not None and time.monotonic() > deadline:
                    channel.close()
                    raise TransportTimeoutError(
                        f"`{shown}` on {self.hostname} ran past its timeout of {timeout} s."
                    )
                if time.monotonic() - heard > self.auth_params["timeout"]:
                    self._check_alive(transport, shown)
                    heard = time.monotonic()
                channel.status_event.wait(0.01)
            code = channel.recv_exit_status()
            channel.close()
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._error("run", f"`{shown}`", exc) from None
        return code, stdout.decode(errors="replace"), stderr.decode(errors="replace")

    def _check_alive(self, transport: paramiko.Transport, shown: str) -> None:
        """A command silent for a stage's timeout: whether the connection still carries
        anything, by opening a channel on it (a frozen link would otherwise hold the command,
        and every call queued behind it, for the command's whole timeout). ``shown`` is the
        command as errors quote it."""
        seconds = self.auth_params["timeout"]
        try:
            transport.open_session(timeout=seconds).close()
        except (OSError, paramiko.SSHException, EOFError):
            self.close()  # the next call connects afresh rather than wait on this link
            raise TransportConnectionError(
                f"The SSH connection to {self.hostname} stopped answering while `{shown}` "
                f"ran (no channel opened within {seconds:g} s); veglia tries again later."
            ) from None

    def whoami(self) -> str:
        """The remote user, asked once per connection."""
        if self._whoami is None or not self.is_open:
            self._whoami = super().whoami()
        return self._whoami

    def ssh_options(self, port: int) -> list[str]:
        """OpenSSH client options that reach a host as this transport does: the same key,
        known_hosts files, host key checking, agent, time-out and keep-alives."""
        params = self.auth_params
        options = ["-p", str(port)]
        if params["key_filename"]:
            options += ["-i", str(Path(params["key_filename"]).expanduser())]
        if params["known_hosts"]:
            # As paramiko here: the user's known_hosts, and the extra file beside it.
            extra = Path(params["known_hosts"]).expanduser()
            options += ["-o", f"UserKnownHostsFile=~/.ssh/known_hosts {extra}"]
        checking = "yes" if params["host_key_checking"] else "no"
        options += ["-o", f"StrictHostKeyChecking={checking}"]
        if not params["allow_agent"]:
            options += ["-o", "IdentityAgent=none"]
        if params["timeout"]:
            options += ["-o", f"ConnectTimeout={max(1, round(float(params['timeout'])))}"]
        if params["keepalive_interval"]:
            options += ["-o", f"ServerAliveInterval={int(params['keepalive_interval'])}"]
        return options

    def ssh_command(self, *, tty: bool = False) -> list[str]:
        """``ssh`` and its options up to the destination: the command ``gotocomputer`` uses.

        A jump host becomes a ``ProxyCommand`` rather than ``-J``, because OpenSSH applies
        command-line options to the destination only, and paramiko reaches the jump host
        with the same key and known_hosts.
        """
        params = self.auth_params
        parts = ["ssh", *(["-t"] if tty else []), *self.ssh_options(params["port"])]
        if params["proxy_jump"]:
            user, host, port = _split_destination(params["proxy_jump"])
            jump = ["ssh", *self.ssh_options(port), "-W", "%h:%p", "--"]
            jump.append(f"{user}@{host}" if user else host)
            # ssh expands %-tokens in ProxyCommand: literal ones in paths are doubled.
            text = shlex.join(jump).replace("%", "%%").replace("%%h:%%p", "%h:%p")
            parts += ["-o", f"ProxyCommand={text}"]
        return parts

    def gotocomputer_command(self, workdir: str) -> str:
        params = self.auth_params
        destination = (
            f"{params['username']}@{self.hostname}" if params["username"] else self.hostname
        )
        remote = f"cd {shlex.quote(self.path(workdir))} && exec bash -l"
        # "--": a host name starting with "-" must not be read as an ssh option.
        return shlex.join([*self.ssh_command(tty=True), "--", destination, remote])
