"""Fixtures for the real services that `scripts/services` starts: sshd, SLURM (with its
accounting, slurmdbd), PostgreSQL, RabbitMQ. A test that needs an absent service is skipped
with the reason, except under CI=true, where it fails: CI proves the real path."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SERVICES_ENV = Path(os.environ.get("VEGLIA_SERVICES_ENV", "/var/lib/veglia-services/services.env"))
POSTGRES_ADMIN_URL = os.environ.get(
    "VEGLIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def service_missing(reason: str) -> None:
    """Skip the test, or fail it under CI=true."""
    message = f"{reason} (start it with `sudo scripts/services`)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs this service: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def services_env() -> dict[str, str]:
    """The KEY=VALUE pairs `scripts/services` wrote."""
    if not SERVICES_ENV.exists():
        service_missing(f"{SERVICES_ENV} does not exist")
    pairs = {}
    for line in SERVICES_ENV.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            pairs[key.strip()] = value.strip()
    return pairs


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    import psycopg

    try:
        psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        service_missing(f"PostgreSQL at {POSTGRES_ADMIN_URL} is not reachable: {exc}")
    return POSTGRES_ADMIN_URL


@pytest.fixture
def postgres_database(postgres_admin_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database; its URL. Dropped after the test."""
    import psycopg

    name = f"veglia_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    base = postgres_admin_url.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(postgres_admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    from veglia.broker import ping_broker
    from veglia.exceptions import BrokerError

    url = os.environ.get("VEGLIA_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
    try:
        ping_broker(url, timeout=3)
    except BrokerError as exc:
        service_missing(str(exc))
    return url


@pytest.fixture(scope="session")
def ssh_params(services_env: dict[str, str]) -> dict[str, object]:
    """Connection parameters of the loopback sshd, for the core.ssh transport."""
    from veglia.exceptions import TransportError
    from veglia.plugins.transports.ssh import SshTransport

    params: dict[str, object] = {
        "port": int(services_env["SSH_PORT"]),
        "username": services_env["SSH_USER"],
        "key_filename": services_env["SSH_KEY"],
        "known_hosts": services_env["SSH_KNOWN_HOSTS"],
        "look_for_keys": False,
        "allow_agent": False,
        "timeout": 10.0,
    }
    try:
        with SshTransport(services_env["SSH_HOST"], **params):
            pass
    except TransportError as exc:
        service_missing(f"sshd on {services_env['SSH_HOST']}:{params['port']}: {exc}")
    return params


@pytest.fixture
def ssh_transport(services_env: dict[str, str], ssh_params: dict[str, object]):
    from veglia.plugins.transports.ssh import SshTransport

    with SshTransport(services_env["SSH_HOST"], **ssh_params) as transport:
        yield transport


@pytest.fixture(scope="session")
def slurm(services_env: dict[str, str]) -> dict[str, str]:
    """SLURM answers `sinfo` here; the services env describes its partitions."""
    if shutil.which("sinfo") is None:
        service_missing("SLURM is not installed (no sinfo)")
    result = subprocess.run(
        ["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True, timeout=30
    )
    if result.returncode != 0:
        service_missing(f"sinfo failed: {result.stderr.strip()}")
    return services_env


@pytest.fixture(scope="session")
def slurm_accounting(slurm: dict[str, str]) -> dict[str, str]:
    """SLURM keeps accounting (slurmdbd), so `sacct` answers; the services env."""
    if slurm.get("SLURM_ACCOUNTING") != "slurmdbd":
        service_missing(
            f"SLURM runs without accounting (SLURM_ACCOUNTING={slurm.get('SLURM_ACCOUNTING')!r} "
            f"in {SERVICES_ENV}: scripts/services found no MariaDB, slurmdbd failed, or "
            "VEGLIA_SLURM_ACCOUNTING=none)"
        )
    result = subprocess.run(
        ["sacct", "--noheader", "--parsable2", "--jobs=1", "--format=JobID"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        service_missing(f"sacct failed: {(result.stderr or result.stdout).strip()}")
    return slurm


@pytest.fixture(params=["local", "ssh"])
def job_computer(request, profile):
    """The label of a computer to run on: localhost, or the loopback sshd (direct)."""
    if request.param == "local":
        return "localhost"
    services_env = request.getfixturevalue("services_env")
    ssh_computer("sshbox", services_env, request.getfixturevalue("ssh_params"), "core.direct")
    return "sshbox"


def run_on(computer: str, command: str, **inputs):
    """Run a core.shell job of ``command`` on ``computer``; its (results, node)."""
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    return engine.run_get_node(
        CalculationFactory("core.shell"),
        command=orm.Str(command),
        metadata={"computer": computer},
        **inputs,
    )


def ssh_computer(label, services_env, ssh_params, scheduler, **properties):
    """A stored computer reached over the loopback sshd, with fast polling."""
    from veglia import orm

    computer = orm.Computer(
        label=label,
        hostname=services_env["SSH_HOST"],
        transport_type="core.ssh",
        scheduler_type=scheduler,
        properties={
            "workdir": f"{services_env['SSH_USER_HOME']}/veglia-work",
            "safe_interval": 0.0,
            "minimum_poll_interval": 0.5,
            **properties,
        },
    ).store()
    computer.configure(**ssh_params)
    return computer


# -- an sshd of our own, to stop and start ------------------------------------------------
@pytest.fixture
def private_sshd(services_env, ssh_params, tmp_path):
    """A second sshd on a free port of 127.0.0.1 (same keys and user) that a test may stop;
    its ``computer(label, scheduler)`` stores a computer behind it, in a profile ``test``
    whose transport gives up quickly (3 tries from 0.5 s). A port of its own: tests run in
    parallel each have theirs."""
    import socket

    state = Path(services_env["SSH_KEY"]).parent
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pid_file = tmp_path / "sshd.pid"
    host_key = state / "ssh_host_ed25519_key"
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {(state / 'ssh_host_ed25519_key.pub').read_text()}")

    def start():
        subprocess.run(
            [
                "/usr/sbin/sshd",
                "-f",
                str(state / "sshd_config"),
                "-o",
                f"Port={port}",
                "-o",
                f"PidFile={pid_file}",
                "-o",
                f"HostKey={host_key}",
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not pid_file.exists():
            assert time.monotonic() < deadline, "the private sshd did not start"
            time.sleep(0.05)

    def stop():
        pid = int(pid_file.read_text())
        subprocess.run(["pkill", "-KILL", "-P", str(pid)])  # its open sessions
        os.kill(pid, signal.SIGTERM)
        pid_file.unlink(missing_ok=True)

    def computer(label: str, scheduler: str = "core.direct"):
        from veglia.config import Config

        config = Config()
        config.set_option("test", "transport.retry_initial_interval", "0.5")
        config.set_option("test", "transport.retry_attempts", "3")
        params = {**ssh_params, "port": port, "known_hosts": str(known_hosts)}
        return ssh_computer(label, services_env, params, scheduler)

    start()
    yield {
        "port": port,
        "known_hosts": str(known_hosts),
        "start": start,
        "stop": stop,
        "computer": computer,
    }
    if pid_file.exists():
        stop()


# -- a RabbitMQ a test may restart -------------------------------------------------------
def rabbitmqctl(*args: str) -> None:
    """Run rabbitmqctl (stop_app, start_app, ...) on the local RabbitMQ."""
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=120)


@pytest.fixture
def restartable_rabbitmq(rabbitmq_url):
    """The local RabbitMQ, which the test may stop; started again afterwards."""
    if shutil.which("rabbitmqctl") is None:
        service_missing("rabbitmqctl is not installed here")
    yield
    rabbitmqctl("start_app")  # whatever happened, leave it running


# -- a PostgreSQL a test may cut off ------------------------------------------------------
@pytest.fixture
def relayed_postgres(postgres_database: str) -> Iterator[dict[str, object]]:
    """A fresh PostgreSQL database reached through a TCP relay (socat) on loopback, which the
    test may ``stop`` (every open connection is reset, new ones are refused, as when the
    server restarts) and ``start`` again; ``url`` goes through the relay."""
    import socket

    if shutil.which("socat") is None:
        service_missing("socat is not installed (scripts/services installs it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = postgres_database.split("@", 1)[1].split("/", 1)[0]  # host:port
    relay: list[subprocess.Popen] = []

    def start() -> None:
        relay.append(
            subprocess.Popen(
                ["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr", f"TCP:{target}"],
                start_new_session=True,  # its forks (one per connection) die with it
            )
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "the PostgreSQL relay did not start"
                time.sleep(0.05)

    def stop() -> None:
        process = relay.pop()
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    start()
    user_part, rest = postgres_database.split("@", 1)
    yield {
        "url": f"{user_part}@127.0.0.1:{port}/{rest.split('/', 1)[1]}",
        "start": start,
        "stop": stop,
    }
    while relay:
        stop()


# -- a computer that hangs or refuses, in front of the real sshd ------------------------------
class TcpProxy:
    """A TCP proxy on loopback, in front of ``target_port``, in one of three modes:
    ``forward`` relays both ways; ``hang`` accepts connections and never sends a byte, and
    stops relaying those already open (a host that froze); ``refuse`` closes the listening
    socket and every connection (a host that is down). Threads of its own, no event loop."""

    def __init__(self, target_port: int) -> None:
        import socket
        import threading

        self.target_port = target_port
        self.mode = "forward"
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._held: list[socket.socket] = []  # accepted while hanging
        self._listener: socket.socket | None = None
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._closed = False
        self._listen()
        threading.Thread(target=self._accept_loop, daemon=True, name="test-proxy").start()

    def _listen(self) -> None:
        import socket

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # The accept loop's select may still hold the listener refuse closed, for 0.1 s.
        deadline = time.monotonic() + 5
        while True:
            try:
                listener.bind(("127.0.0.1", self.port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        listener.listen(64)
        self._listener = listener

    def _accept_loop(self) -> None:
        import select
        import socket
        import threading

        while not self._closed:
            listener = self._listener
            if listener is None:
                time.sleep(0.05)
                continue
            try:
                ready, _, _ = select.select([listener], [], [], 0.1)
                if not ready:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):  # closed under us (refuse)
                continue
            with self._lock:
                if self.mode != "forward":
                    self._held.append(client)
                    continue
                try:
                    server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                except OSError:
                    client.close()
                    continue
                pair = (client, server)
                self._pairs.append(pair)
            threading.Thread(target=self._relay, args=(pair,), daemon=True).start()

    def _relay(self, pair: tuple[Any, Any]) -> None:
        import select

        client, server = pair
        other = {client: server, server: client}
        try:
            while not self._closed:
                with self._lock:
                    if pair not in self._pairs:
                        return
                    stalled = self.mode == "hang"
                if stalled:
                    time.sleep(0.05)
                    continue
                ready, _, _ = select.select([client, server], [], [], 0.1)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    other[sock].sendall(data)
        except OSError:
            return
        finally:
            for sock in pair:
                sock.close()

    def _drop_connections(self) -> None:
        for pair in self._pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(2)
        self._pairs.clear()
        for sock in self._held:
            sock.close()
        self._held.clear()

    def set_mode(self, mode: str) -> None:
        """``forward``, ``hang`` or ``refuse`` (see the class)."""
        assert mode in ("forward", "hang", "refuse"), mode
        with self._lock:
            previous, self.mode = self.mode, mode
            if mode == "refuse" or (previous == "hang" and mode == "forward"):
                # Down, or back from a freeze: what was open is dead, the client reconnects.
                self._drop_connections()
            if mode == "refuse" and self._listener is not None:
                self._listener.close()
                self._listener = None
            if mode != "refuse" and self._listener is None:
                self._listen()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop_connections()
            if self._listener is not None:
                self._listener.close()
                self._listener = None


@pytest.fixture
def ssh_proxy(services_env, ssh_params, tmp_path) -> Iterator[dict[str, Any]]:
    """A :class:`TcpProxy` in front of the real sshd; its ``computer(label, **properties)``
    stores a core.direct computer reached through it, whose SSH stages time out after 3 s."""
    proxy = TcpProxy(int(services_env["SSH_PORT"]))
    known_hosts = tmp_path / "proxy_known_hosts"
    real = f"[{services_env['SSH_HOST']}]:{services_env['SSH_PORT']}"
    known_hosts.write_text(
        Path(services_env["SSH_KNOWN_HOSTS"])
        .read_text()
        .replace(real, f"[{services_env['SSH_HOST']}]:{proxy.port}")
    )
    params = {
        **ssh_params,
        "port": proxy.port,
        "known_hosts": str(known_hosts),
        "timeout": 3.0,
        "keepalive_interval": 1,
    }

    def computer(label: str, **properties: Any):
        return ssh_computer(label, services_env, params, "core.direct", **properties)

    yield {"proxy": proxy, "port": proxy.port, "params": params, "computer": computer}
    proxy.close()
