"""What every bench needs: the line it prints first (the machine its figures were measured
on), the machine's busy CPU time (read before and after a run), a profile of its own
to measure in, and, for the benches on SSH, the loopback sshd of ``scripts/services`` and
a computer on it.

Benches run as scripts (``python bench/NAME.py``), so this directory is on ``sys.path`` and
``from machine import bench_profile, describe`` works from any of them.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

VEGLIA = str(Path(sys.executable).parent / "veglia")
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
BROKER_URL = "amqp://guest:guest@127.0.0.1:5672/"
#: Where ``scripts/services`` writes the addresses of the services it started.
SERVICES_ENV = Path(os.environ.get("VEGLIA_SERVICES_ENV", "/var/lib/veglia-services/services.env"))


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        if found:
            return found.group(1).strip()
    return platform.machine()


def memory_gib() -> float:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    return 0.0


def describe(*extra: str) -> str:
    """CPU model and count, memory, load, Python and the date; then ``extra`` parts."""
    parts = [
        f"{os.cpu_count()} CPUs ({cpu_model()})",
        f"{memory_gib():.0f} GiB",
        f"load {os.getloadavg()[0]:.1f}",
        f"Python {platform.python_version()}",
        datetime.date.today().isoformat(),
        *extra,
    ]
    return ", ".join(parts)


def machine_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (every process, every user)."""
    tick = os.sysconf("SC_CLK_TCK")
    parts = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + parts[4]
    return (sum(parts[:8]) - idle) / tick


def file_creation_us(count: int = 200) -> float:
    """CPU microseconds to create an empty file in a new folder of the temporary folder.

    On ext4 without a journal (these machines' disk) each new file skips every inode
    deleted in the last minute or more in its block group, so the figure grows with the
    files any process removed nearby (a bench run before, a test suite): from a few
    microseconds to hundreds. A job creates about twenty files, so it moves a bench's
    jobs/s; print it beside them."""
    folder = Path(tempfile.mkdtemp(prefix="veglia-file-cost-"))
    try:
        start = time.process_time()  # user and system time: the kernel's work counts
        for name in range(count):
            os.close(os.open(folder / str(name), os.O_CREAT | os.O_WRONLY, 0o600))
        return (time.process_time() - start) / count * 1e6
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def bench_profile(
    prefix: str = "veglia-bench-",
    *,
    name: str = "bench",
    broker: bool | None = None,
    postgresql: bool = False,
    options: Mapping[str, str] | None = None,
) -> Iterator[Path]:
    """A profile ``name`` in a veglia home of its own for the ``with`` block: a new
    temporary folder (named from ``prefix``) that ``VEGLIA_HOME`` names for this process and
    the commands it starts; at the end the profile is unloaded, the folder removed and
    ``VEGLIA_HOME`` as it was before.

    Made as ``veglia presto`` makes one (SQLite, the ``localhost`` computer): ``broker``
    True with RabbitMQ, False without, None with it if one answers. ``postgresql``: made by
    ``veglia setup`` on a new PostgreSQL database instead (RabbitMQ only with ``broker``),
    dropped at the end. ``options`` are then set with ``veglia config set``.
    """
    home = Path(tempfile.mkdtemp(prefix=prefix))
    before = os.environ.get("VEGLIA_HOME")
    os.environ["VEGLIA_HOME"] = str(home)
    database = None
    try:
        if postgresql:
            database = f"{name}_{uuid.uuid4().hex[:10]}"
            _postgres(f'CREATE DATABASE "{database}"')
            url = PG_ADMIN.rsplit("/", 1)[0] + "/" + database
            args = ["setup", "--non-interactive", "--profile-name", name, "--storage-url", url,
                    "--broker-url", BROKER_URL if broker else ""]  # fmt: skip
        else:
            flag = {True: ["--broker"], False: ["--no-broker"], None: []}[broker]
            args = ["presto", "--profile-name", name, *flag]
        subprocess.run([VEGLIA, *args], check=True, stdout=subprocess.DEVNULL)
        for option, value in (options or {}).items():
            subprocess.run(
                [VEGLIA, "-p", name, "config", "set", option, value],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        yield home
    finally:
        if "veglia.manage" in sys.modules:  # loaded in this process: close its storage
            # Lazy: veglia is imported only once VEGLIA_HOME names the bench's home.
            from veglia.manage import unload_profile

            unload_profile()
        if database:
            _postgres(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        shutil.rmtree(home, ignore_errors=True)
        if before is None:
            os.environ.pop("VEGLIA_HOME", None)
        else:
            os.environ["VEGLIA_HOME"] = before


def _postgres(statement: str) -> None:
    # Lazy: only the benches on PostgreSQL need psycopg installed.
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as connection:
        connection.execute(statement)


def services_env() -> dict[str, str]:
    """The ``NAME=value`` lines ``scripts/services`` wrote (the SSH_* ones name its sshd)."""
    try:
        text = SERVICES_ENV.read_text()
    except OSError as exc:
        sys.exit(
            f"{SERVICES_ENV} cannot be read ({exc.strerror}): start the services with "
            "`bash scripts/services`, or name their file with VEGLIA_SERVICES_ENV."
        )
    return dict(line.strip().split("=", 1) for line in text.splitlines() if "=" in line)


def ssh_params(env: Mapping[str, str]) -> dict[str, Any]:
    """How core.ssh connects to the loopback sshd of ``scripts/services`` (on host
    ``env["SSH_HOST"]``), ``env`` being :func:`services_env`: as its user, with its key alone."""
    return {
        "port": int(env["SSH_PORT"]),
        "username": env["SSH_USER"],
        "key_filename": env["SSH_KEY"],
        "known_hosts": env["SSH_KNOWN_HOSTS"],
        "look_for_keys": False,
        "allow_agent": False,
    }


@contextlib.contextmanager
def ssh_computer(poll_interval: float, label: str = "ssh") -> Iterator[Any]:
    """A computer ``label`` on the loopback sshd of ``scripts/services`` (core.ssh +
    core.direct, polled every ``poll_interval`` seconds), stored in the loaded profile for
    the ``with`` block; its jobs (and the guards' heartbeat) are in a work directory of this
    run's own under the SSH user's home.

    At the end, through the computer's own transport and scheduler, the jobs of its
    processes that have not ended (the bench's, left running: stop the daemon first) are
    cancelled by the job ids their nodes recorded, and the work directory is removed: this
    run's jobs and files, never another's.
    """
    # Lazy: veglia is imported only once VEGLIA_HOME names the bench's home.
    from veglia import orm

    env = services_env()
    workdir = f"{env['SSH_USER_HOME']}/veglia-bench-{uuid.uuid4().hex[:8]}"
    computer = orm.Computer(
        label=label,
        hostname=env["SSH_HOST"],
        transport_type="core.ssh",
        scheduler_type="core.direct",
        properties={
            "workdir": workdir,
            "minimum_poll_interval": poll_interval,
            "safe_interval": 1.0,
            # Not the default under the user's home, which no run would remove.
            "guard_heartbeat": f"{workdir}/guard-heartbeat",
        },
    ).store()
    computer.configure(**ssh_params(env))
    try:
        yield computer
    finally:
        _cancel_jobs_and_remove(computer, workdir)


def _cancel_jobs_and_remove(computer: Any, workdir: str) -> None:
    from veglia.orm.loading import load_node
    from veglia.orm.queries import processes_on_computer

    job_ids = [load_node(pk).job_id for pk, _, _ in processes_on_computer(computer.pk)]
    scheduler = computer.get_scheduler()
    # One shell reads every cancel: one round trip, and no limit on a command's length.
    cancels = "\n".join(scheduler.kill_command(job_id) for job_id in job_ids if job_id)
    with computer.get_transport() as transport:
        if cancels:
            # bash, as the transport runs every command: scheduler commands are written for it.
            _, _, err = transport.exec_command("bash", stdin=cancels.encode(), timeout=600)
            if err.strip():  # a job gone already, or one left running: say which
                print(f"cancelling the jobs on {computer.label}: {err.strip()}", file=sys.stderr)
        transport.rmtree(workdir)
