#!/usr/bin/env python3
"""Memory of the daemon: one worker holding N waiting jobs.

N ``core.shell`` jobs running ``sleep`` on localhost with the direct scheduler (real jobs,
no fake scheduler: each is a ``bash``, a ``time`` and a ``sleep`` on this machine, about 0.5 MB
each; 10,000 of them need a ``kernel.pid_max`` over 32,768, which the bench checks first)
are submitted to a daemon with one worker whose slots hold them all. Once every job is
waiting on its scheduler job, the bench prints the supervisor's RSS and module count, the
worker's RSS, and the RSS per active job (the worker's growth over its RSS before any job,
divided by N). The jobs are then killed by their job ids (process groups) and the daemon
stopped.

    python bench/daemon_memory.py             # 10,000 jobs (needs ~6 GB free, minutes)
    python bench/daemon_memory.py -n 500      # a smoke run
    python bench/daemon_memory.py --no-broker # the worker takes jobs from the database

Targets (issue #16): supervisor under 25 MB, a worker with 10,000 waiting jobs under 400 MB.

Figures (2-core VM shared with other work, load 10+, SQLite, RabbitMQ, Python 3.11; direct
scheduler and real ``sleep`` jobs, no fake scheduler; 10,000 jobs were too slow to run on
this loaded machine, so N was 1,000-2,000 and 10,000 is extrapolated):

Supervisor, before: 49 MB RSS, 419 modules (SQLAlchemy, the ORM and the broker client: it
looked for stranded processes itself, and the plugins' hook modules imported the ORM and
smtplib). After: 20 MB RSS, 224 modules, none of SQLAlchemy, plumpy, kiwipy: the first
worker repairs stranded processes and runs the daemon hooks, ``veglia.orm`` loads its
names lazily, plugin hook modules load the ORM, smtplib and Tower's queries when used.

Worker, idle 63 MB (before it opens the storage). Before: 2,000 jobs 172 MB, 55.8 kB per
job (48.5 kB marginal). After one RPC queue per worker (not one per process: 10,000 fewer
queues on RabbitMQ, two fewer broker round trips per process start) and no per-process
broadcast subscription: 1,000 jobs 122 MB, 60.3 kB per job (46.2 kB marginal). After the
schema check without alembic (10 MB less in every process that opens the storage): 1,000
jobs 114 MB, 52.4 kB per job (47.4 kB marginal). Extrapolated to 10,000 jobs: about
530 MB, above the 400 MB target.

What a waiting job holds, slimmed (the same bench and machine, before and after, the same
afternoon). Before: 1,000 jobs 110.7 MB, 48.2 kB per job (43.1 kB marginal); 2,000 jobs
150.1 MB, 44.3 kB per job (41.6 kB marginal). After: 1,000 jobs 94.2 MB, 31.2 kB per job
(26.0 kB marginal); 2,000 jobs 116.5 MB, 27.1 kB per job (24.4 kB marginal). Extrapolated
to 10,000 jobs (the RSS at 2,000 plus 8,000 times the marginal cost): before about 475 MB,
after about 305 MB, under the 400 MB target.

Measured whole, 10,000 jobs, on another machine of the same kind, quiet: supervisor 19.8 MB
(221 modules), worker idle 63.5 MB, with 10,000 waiting jobs 309.8 MB: 25.2 kB per job over
idle, 24.3 kB past the first tenth. Submitted in 32 s; all waiting 6 minutes after the
start; the worker's RSS was flat from 8,300 waiting jobs on.

Where a waiting job's memory goes (``daemon_memory_trace.py 100 300``: a worker under
tracemalloc, 25 frames, the difference between 100 and 300 waiting jobs, per job).
Before, 33.5 kB traced: plumpy 12.5 kB, of which 5 kB the chain of futures its
``LoopCommunicator`` builds around a task subscriber (a coroutine, two asyncio futures and
two ``concurrent.futures`` futures, each with a lock and a condition, all held until the
process ends) and 0.9 kB the wrappers of the process's RPC subscriber; the broker message
and kiwipy's bookkeeping of it (aiormq, pamqp, aio_pika, kiwipy: frames, properties, body,
``RmqIncomingTask``, the consumer coroutine awaiting the outcome) about 7 kB; the process
node's attributes decoded from JSON 2.6 kB; the waiting step's own task, futures and
``asyncio.wait`` callbacks 2 kB.

What changed: the worker's task subscriber runs on the worker's loop through one task and
one future (``task_bridge``); a taken task is held as its channel and delivery tag and
acknowledged as kiwipy would once the process ends (``held_tasks``); RPC subscribers are
wrapped for kiwipy when a message comes, not at each process start (``rpc_queue``); a
poll is awaited in the job's own task, which a kill or pause cancels
(``InterruptibleWaiting._cancellable``); the keys and short strings of process nodes'
attributes and of loaded checkpoints are interned (``shared_strings``).

After, 16.9 kB traced: plumpy's process, state machine, step coroutines and inputs 6.7 kB
(the process's ``__dict__`` alone 1.6 kB); the process node and its input node (row
values, attributes, node objects) about 4 kB; the worker's task and the step's coroutines
about 2 kB; small items. Most of what is left is plumpy's: holding a waiting job as its
node id and poll entry only, its plumpy process rebuilt from the checkpoint when its
scheduler job changes state, would take most of the rest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")
PROFILE = "memory"


def rss_mb(pid: int) -> float:
    """The resident memory of a process now (VmRSS), in MB; 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    match = re.search(r"VmRSS:\s+(\d+)", status)
    return int(match.group(1)) / 1024 if match else 0.0


def _veglia(*args: str) -> None:
    subprocess.run([VEGLIA, "-p", PROFILE, *args], check=True, stdout=subprocess.DEVNULL)


def _waiting(first: int, last: int) -> int:
    """How many of the processes (pks ``first`` to ``last``) wait on a scheduler job."""
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.orm.attributes import JOB_ID
    from veglia.orm.queries import has_attribute
    from veglia.storage.models import Node

    query = sa.select(sa.func.count(Node.id)).where(
        Node.id.between(first, last), Node.process_state == "waiting", has_attribute(JOB_ID)
    )
    with get_storage().session() as session:
        return int(session.scalar(query) or 0)


def _wait_until_waiting(nodes: list, worker: int, timeout: float) -> None:
    first, last = nodes[0].pk, nodes[-1].pk
    deadline = time.monotonic() + timeout
    waiting = 0
    while waiting < len(nodes):
        if time.monotonic() > deadline:
            raise SystemExit(f"only {waiting} of {len(nodes)} jobs waiting after {timeout:.0f} s")
        time.sleep(2)
        waiting = _waiting(first, last)
        print(f"  {waiting} waiting, worker {rss_mb(worker):.0f} MB", flush=True)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def bench(n: int, broker: bool, timeout: float, keep: float = 0.0) -> dict[str, float]:
    # The default options: waiting jobs are dehydrated, and the worker steps at most
    # daemon.worker_prefetch (1,000) at once.
    with bench_profile("veglia-memory-", name=PROFILE, broker=broker):
        return _measure(n, timeout, keep)


#: Trace samples a second this machine's jobs may take together: each periodic sample of
#: the core.trace sampler starts an `mv`, and N jobs on one 2-core machine (on a cluster
#: they would be spread over its nodes) sampling every 10 s would fork N/10 a second.
SAMPLES_PER_SECOND = 50


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(n: int, timeout: float, keep: float) -> dict[str, float]:
    interval = max(10, n // SAMPLES_PER_SECOND)
    _veglia("computer", "set", "localhost", "--trace-interval", str(interval))
    print(f"trace samples every {interval} s (at most {SAMPLES_PER_SECOND} a second)")
    _veglia("daemon", "start", "1")
    nodes = []
    try:
        import veglia
        from veglia import engine, orm
        from veglia.engine.daemon import DaemonFiles
        from veglia.entry_points import CalculationFactory

        profile = veglia.load_profile(PROFILE)
        files = DaemonFiles(profile)
        status: dict = {}
        while (
            not status.get("workers")
            or not files.worker_status(status["workers"][0]["pid"]).exists()
        ):
            time.sleep(0.2)
            status = files.read_status()
        supervisor = status["supervisor"]
        worker = status["workers"][0]["pid"]
        time.sleep(2)  # the worker settles (its broker connection, first queries)
        idle = rss_mb(worker)

        shell = CalculationFactory("core.shell")
        # A duration no other process of this machine sleeps: the jobs are easy to recognise.
        # `exec`: the command's shell becomes the sleep (see PROCESSES_PER_JOB).
        command = orm.Str(f"exec sleep {7200 + os.getpid() % 1000}.{n}")
        # A first tenth warms the worker up (imports, caches, pools); the rest is the
        # marginal cost of a job.
        warm = max(1, n // 10)
        submitted = 0.0
        for batch in (warm, n - warm):
            start = time.monotonic()
            batch_nodes = [engine.submit(shell, command=command) for _ in range(batch)]
            submitted += time.monotonic() - start
            nodes += batch_nodes
            _wait_until_waiting(nodes, worker, timeout)
            if batch == warm:
                warm_mb = rss_mb(worker)
        print(f"submitted {n} jobs in {submitted:.1f} s", flush=True)
        counts = _read(files.worker_status(worker))
        held = counts.get("active", 0)
        cpu_before, hold_start = _cpu_seconds(worker), time.monotonic()
        time.sleep(5)  # a few poll cycles with every job waiting
        hold_cpu = (_cpu_seconds(worker) - cpu_before) / (time.monotonic() - hold_start)
        if keep:
            print(f"keeping the jobs waiting {keep:.0f} s: worker pid {worker}", flush=True)
            time.sleep(keep)
        figures = {
            "supervisor_mb": rss_mb(supervisor),
            "supervisor_modules": len(files.read_status().get("modules", [])),
            "worker_idle_mb": idle,
            "worker_mb": rss_mb(worker),
            "held": held,
            "dehydrated": _read(files.worker_status(worker)).get("dehydrated", 0),
            "hold_cpu": hold_cpu,
        }
        figures["per_job_kb"] = (figures["worker_mb"] - idle) * 1024 / n
        figures["marginal_kb"] = (figures["worker_mb"] - warm_mb) * 1024 / max(1, n - warm)
        return figures
    finally:
        _cleanup(nodes)


def _cleanup(nodes: list) -> None:
    with contextlib.suppress(subprocess.CalledProcessError):
        _veglia("daemon", "stop")
    for node in nodes:
        with contextlib.suppress(Exception):
            job_id = node.refresh().job_id
            if job_id:
                os.killpg(int(job_id), signal.SIGKILL)  # the job's bash and its sleep
    with contextlib.suppress(Exception):  # the profile may not have been made, or no broker
        from veglia.engine.daemon.broker_tasks import delete_broker_queues
        from veglia.manage import get_profile

        # The unfinished jobs' tasks: left on RabbitMQ, they slow it down for good.
        delete_broker_queues(get_profile())


#: Processes a waiting job keeps on this machine: the job script's bash, /usr/bin/time and
#: the sleep.
PROCESSES_PER_JOB = 3


def check_process_ids(n: int) -> None:
    """Refuse, saying how to raise it, when the kernel's PID limit cannot hold the jobs: at
    the limit every fork on the machine fails (shells included), not only this bench's."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    in_use = sum(1 for entry in os.scandir("/proc") if entry.name.isdigit())
    needed = n * PROCESSES_PER_JOB + 500  # the daemon, its commands, the rest of the machine
    if in_use + needed > pid_max:
        sys.exit(
            f"{n} waiting jobs need about {needed:,} processes; kernel.pid_max is {pid_max:,} "
            f"and {in_use:,} are in use. Raise it (as root: sysctl -w kernel.pid_max=4194304) "
            "or ask for fewer jobs with -n."
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10000, help="waiting jobs (default 10000)")
    parser.add_argument("--no-broker", action="store_true", help="a profile without RabbitMQ")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
    parser.add_argument(
        "--keep", type=float, default=0.0, help="seconds to keep the jobs waiting (to profile)"
    )
    args = parser.parse_args()
    print(f"machine: {describe()}")
    check_process_ids(args.n)
    figures = bench(args.n, not args.no_broker, args.timeout, args.keep)
    print(f"supervisor RSS:      {figures['supervisor_mb']:.1f} MB")
    print(f"supervisor modules:  {figures['supervisor_modules']}")
    print(f"worker RSS idle:     {figures['worker_idle_mb']:.1f} MB")
    print(f"worker RSS, {figures['held']} jobs: {figures['worker_mb']:.1f} MB")
    print(f"RSS per active job:  {figures['per_job_kb']:.1f} kB (all over idle)")
    print(f"  marginal:          {figures['marginal_kb']:.1f} kB (past the first tenth)")
    print(f"dehydrated:          {figures['dehydrated']} of them")
    print(f"worker CPU holding:  {figures['hold_cpu'] * 100:.1f} % of a core")


if __name__ == "__main__":
    main()
