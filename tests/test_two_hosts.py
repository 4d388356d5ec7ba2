"""Daemons on two hosts sharing one PostgreSQL and one RabbitMQ; one host is cut off.

Each host is a network namespace with a UTS namespace of its own (its hostname) and a veglia
home of its own (a copy of the configuration, no shared folder: file contents are kept in
the database, ``storage.repository = database``). A host reaches PostgreSQL,
RabbitMQ and the cluster's sshd through relays on its own loopback that lead, over unix
sockets, to this machine's loopback: no traffic leaves loopback. Cutting a host's link is
killing its relays.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import make_profile, wait_for
from veglia_fixtures.services import service_missing, ssh_computer

ShellJob = CalculationFactory("core.shell")
VEGLIA = str(Path(sys.executable).with_name("veglia"))
PORTS = {"postgres": 5432, "rabbitmq": 5672, "ssh": 2222}


class Host:
    """A network namespace with a hostname, relays to this machine's services, a daemon."""

    def __init__(self, name: str, sockets: Path, home: Path) -> None:
        self.name, self.netns, self.sockets = name, f"veglia-{name}-{os.getpid()}", sockets
        self.home = home.with_name(f"home-{name}")
        shutil.copytree(home, self.home)
        self.relays: list[subprocess.Popen] = []
        subprocess.run(["ip", "netns", "add", self.netns], check=True)
        self._in_netns("ip", "link", "set", "lo", "up")
        self.connect()

    def _in_netns(self, *command: str) -> None:
        subprocess.run(["ip", "netns", "exec", self.netns, *command], check=True)

    def connect(self) -> None:
        for service, port in PORTS.items():
            relay = subprocess.Popen(
                [
                    "ip", "netns", "exec", self.netns, "socat",
                    f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork",
                    f"UNIX-CONNECT:{self.sockets / service}.sock",
                ],
                start_new_session=True,  # its forked children die with it: killpg
            )  # fmt: skip
            self.relays.append(relay)
        time.sleep(0.5)

    def cut(self) -> None:
        for relay in self.relays:
            os.killpg(relay.pid, signal.SIGKILL)
            relay.wait()
        self.relays = []

    def veglia(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A veglia command run on this host."""
        script = f"hostname {self.name} && exec {VEGLIA} {' '.join(args)}"
        return subprocess.run(
            ["ip", "netns", "exec", self.netns, "unshare", "--uts", "sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "VEGLIA_HOME": str(self.home)},
        )

    def close(self) -> None:
        self.veglia("-p", "test", "daemon", "stop", timeout=120)
        self.cut()
        subprocess.run(["ip", "netns", "delete", self.netns], check=False)


@pytest.fixture
def two_hosts(
    postgres_database, rabbitmq_url, services_env, ssh_params, slurm, tmp_path, veglia_home
):
    for tool in ("ip", "socat", "unshare"):
        if shutil.which(tool) is None:
            service_missing(f"{tool} is not installed (scripts/services installs it)")
    sockets = tmp_path / "relays"
    sockets.mkdir()
    exits = [
        subprocess.Popen(
            [
                "socat",
                f"UNIX-LISTEN:{sockets / service}.sock,fork,mode=600",
                f"TCP:127.0.0.1:{port}",
            ],
            start_new_session=True,
        )
        for service, port in PORTS.items()
    ]
    profile = make_profile(
        **{
            "storage.url": postgres_database,
            "broker.url": rabbitmq_url,
            "daemon.lease_timeout": "8",
            "storage.repository": "database",
        }
    )
    ssh_computer("cluster", services_env, ssh_params, "core.slurm")
    hosts = []
    try:
        hosts = [Host("host-a", sockets, veglia_home), Host("host-b", sockets, veglia_home)]
        yield profile, hosts
    finally:
        for host in hosts:
            host.close()
        for relay in exits:
            os.killpg(relay.pid, signal.SIGKILL)
            relay.wait()


def _holders(nodes) -> dict[int, str]:
    from veglia.engine.daemon import leases

    found = {}
    for node in nodes:
        lease = leases.holder(node.pk, timeout=8)
        if lease is not None:
            found[node.pk] = lease.host
    return found


def test_a_host_cut_off_hands_its_processes_over_without_a_double_submission(two_hosts):
    _, (host_a, host_b) = two_hosts
    ledger = Path(f"/home/vegliatest/two-hosts-{uuid.uuid4().hex[:8]}.log")
    started = host_a.veglia("-p", "test", "daemon", "start", "1")
    assert started.returncode == 0, started.stderr
    nodes = []
    for i in range(6):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"echo token-{i} >> {ledger}; sleep 25")
        builder.metadata.computer = "cluster"
        builder.metadata.options.max_wallclock_seconds = 60
        nodes.append(engine.submit(builder))
    wait_for(nodes, lambda n: n.job_id is not None, timeout=120)
    assert set(_holders(nodes).values()) == {"host-a"}
    started = host_b.veglia("-p", "test", "daemon", "start", "1")
    assert started.returncode == 0, started.stderr

    host_a.cut()
    try:
        deadline = time.monotonic() + 120
        while set(_holders(nodes).values()) != {"host-b"}:
            assert time.monotonic() < deadline, _holders(nodes)
            time.sleep(1)
        wait_for(nodes, lambda n: n.is_terminated, timeout=240)
        assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
        assert sorted(ledger.read_text().split()) == [f"token-{i}" for i in range(6)]
        for node in nodes:
            assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
            # Retrieved on host B, read here: through the database, not a shared folder.
            assert node.outputs.stdout.get_content() == b""
    finally:
        ledger.unlink(missing_ok=True)

    # The link comes back. Host A's worker dropped what it held when it lost the database
    # and the broker (it could write nothing meanwhile); back, it touches none of it.
    # Host B is done with a process once it let go of it (its trace record is written
    # after the terminal state).
    deadline = time.monotonic() + 60
    while _holders(nodes):
        assert time.monotonic() < deadline, _holders(nodes)
        time.sleep(0.5)
    before = {n.pk: (n.process_state, n.exit_status, n.attributes) for n in nodes}
    host_a.connect()
    deadline = time.monotonic() + 60
    while "host-a" not in (host_a.veglia("-p", "test", "daemon", "status").stdout or ""):
        assert time.monotonic() < deadline, "host A's daemon did not come back"
        time.sleep(1)
    time.sleep(5)
    after = {n.pk: (n.process_state, n.exit_status, n.refresh().attributes) for n in nodes}
    assert after == before
    assert "host-a" not in _holders(nodes).values()


def test_two_hosts_taking_in_one_folder_start_each_element_once(
    two_hosts, services_env, ssh_params
):
    """Both hosts' daemons list the same folder on the cluster (over SSH) and race to start
    its elements; then one host's daemon stops and files keep arriving. Each file has one
    run, started by one host or the other."""
    import sqlalchemy as sa
    from test_pipeline_intake import drop_over_ssh, make_setup, runs_of

    from veglia.manage import get_storage
    from veglia.orm.loading import load_node
    from veglia.storage import tables

    host_a, host_b = two_hosts[1]
    drop = ssh_computer("drop", services_env, ssh_params, "core.direct")
    folder = f"{services_env['SSH_USER_HOME']}/two-hosts-intake-{uuid.uuid4().hex[:8]}"
    for host in (host_a, host_b):
        set_option = host.veglia("-p", "test", "config", "set", "pipeline.poll_interval", "1")
        assert set_option.returncode == 0, set_option.stderr
        started = host.veglia("-p", "test", "daemon", "start", "1")
        assert started.returncode == 0, started.stderr
    with drop.get_transport() as transport:
        transport.makedirs(folder)
        for i in range(30):
            drop_over_ssh(transport, folder, f"s{i:02d}.txt", f"sample {i}\n")
        # Enabled while both daemons run: both see it at their next look.
        make_setup("both-hosts", folder, computer="localhost", source_computer="drop", settled=0)
        deadline = time.monotonic() + 120
        while len(runs_of("both-hosts")) < 30:
            assert time.monotonic() < deadline, runs_of("both-hosts")
            time.sleep(0.5)
        stopped = host_a.veglia("-p", "test", "daemon", "stop")
        assert stopped.returncode == 0, stopped.stderr
        for i in range(30, 40):
            drop_over_ssh(transport, folder, f"s{i:02d}.txt", f"sample {i}\n")
        while len(runs_of("both-hosts")) < 40:
            assert time.monotonic() < deadline, runs_of("both-hosts")
            time.sleep(0.5)
        runs = runs_of("both-hosts")
        nodes = [load_node(pks[0]) for pks in runs.values()]
        wait_for(nodes, lambda n: n.is_terminated, timeout=180)
        time.sleep(3)  # host B looks again: nothing new
        transport.rmtree(folder)
    runs = runs_of("both-hosts")
    assert {identity: len(pks) for identity, pks in runs.items()} == {
        f"s{i:02d}.txt": 1 for i in range(40)
    }
    assert all(load_node(pks[0]).is_finished_ok for pks in runs.values())
    elements = tables.pipeline_elements
    with get_storage().connection() as connection:
        claimers = connection.execute(
            sa.select(elements.c.identity, elements.c.claimed_by).where(
                elements.c.setup_name == "both-hosts"
            )
        ).all()
    # The files that came after host A stopped: host B started them.
    by_host = {identity: worker.split("/")[0] for identity, worker in claimers}
    assert {by_host[f"s{i:02d}.txt"] for i in range(30, 40)} == {"host-b"}
