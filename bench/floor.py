#!/usr/bin/env python3
"""The machine's floor for bench/throughput.py: N add jobs doing only what each job must.

What every one of throughput.py's ``core.arithmetic.add`` jobs needs, whatever engine runs
it, and nothing else, so veglia's throughput can be stated as a share of it. Per job:

- its folder made, its input file (``aiida.in``, the add's ``echo $((x + y))``) and its
  submit script written;
- the submit shell, as ``core.direct`` runs it through the local transport: ``bash -c``
  in a session of its own, starting the script with job control (``set -m``: the job leads
  a process group) in the background and printing its pid;
- the script: ``/usr/bin/time`` (as the ``core.time`` wrap writes it) running ``bash <
  aiida.in > aiida.out``;
- the job's end seen (a pidfd of its bash), its output file read back and checked;
- one SQLite transaction of six rows in a database of veglia's schema with its settings
  (WAL, ``synchronous=NORMAL``, foreign keys): the job's node, two input links, a log
  line, its lease taken and released.

Not done, as a job does not need it: the trace sampler, the exit-status and scheduler output
files, replaying a submission, polling ``ps``, checkpoints, the broker, the repository's
copies of the files. Two worker processes (as veglia's daemon) share the jobs through a
counter, each keeping ``--in-flight`` jobs running; a worker is a plain loop on ``epoll``
(``posix_spawn``, pipes and pidfds), no framework in between. An asyncio version
(``create_subprocess_exec``, the pidfd on the loop) took the same CPU within the noise: one
worker, 300 jobs, under load, 1.9 and 2.4 ms a job against 2.2 and 1.8. Each worker is a
child subreaper: it reaps its jobs' ``bash`` (orphaned when the submit shell exits), so
their CPU is counted apart from the submit shells'. Two jobs a worker run before the clock
starts, as in throughput.py.

``--veglia-script`` runs, instead of the bare line, the submit script veglia writes for
these jobs on a computer with its default properties, with the files its wraps put beside
it: the scheduler's output files, the trace sampler (``_veglia_trace.sh``, its process and
its samples), ``/usr/bin/time``, the exit-status file. What it adds to the jobs' CPU is
what veglia's own job scripts cost, apart from the engine.

    python bench/floor.py                  # 500 jobs
    python bench/floor.py -n 20            # a smoke run
    python bench/floor.py --json           # the figures as JSON
    python bench/floor.py --veglia-script  # each job runs the script veglia writes for it
    python bench/throughput.py -n 500 --floor   # the floor, then veglia, in one run
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import multiprocessing
import os
import selectors
import shlex
import shutil
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from machine import describe, machine_cpu_seconds

BASH = shutil.which("bash") or "/bin/bash"
SCRIPT_NAME = "_veglia_submit.sh"
#: The job: its one command line under /usr/bin/time, as veglia's core.time wrap puts it.
SCRIPT = (
    "#!/bin/bash\n/usr/bin/time -a -o _veglia_usage -f '%M %e %P' bash < aiida.in > aiida.out\n"
)
#: core.direct's submit command, run by ``bash -c`` in the job's folder.
SUBMIT = (
    "cd {folder} || exit 1; set -m; bash "
    + SCRIPT_NAME
    + " > /dev/null 2>&1 < /dev/null & pid=$!; set +m; echo $pid"
)
PR_SET_CHILD_SUBREAPER = 36
#: Jobs each worker keeps running at once. On the 2-core machine, 2 to 4 a worker kept both
#: cores busy; more (8 to 64) only added CPU a job (more processes sharing the caches).
IN_FLIGHT = 4
WARM_UP = 2  # jobs a worker runs before the clock starts


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


# -- the database --------------------------------------------------------------------------------
def make_database(path: Path) -> tuple[int, int]:
    """veglia's schema in a new SQLite file with its settings, and two input nodes every job
    links from; their ids. In a process of its own: the caller never imports veglia."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        inputs: tuple[int, int] = pool.apply(_create_schema, (str(path),))
    return inputs


def _create_schema(path: str) -> tuple[int, int]:
    # Lazy: in the pool's process only (see make_database).
    from veglia.storage.backend import create_db_engine
    from veglia.storage.tables import metadata

    engine = create_db_engine(f"sqlite:///{path}")
    metadata.create_all(engine)
    engine.dispose()
    connection = sqlite3.connect(path, isolation_level=None)
    ids = []
    for value in (1, 2):
        cursor = connection.execute(
            "INSERT INTO nodes (uuid, node_type, label, description, ctime, mtime, attributes,"
            " extras) VALUES (?, 'data.core.int.Int.', '', '', ?, ?, ?, '{}')",
            (str(uuid.uuid4()), _now(), _now(), json.dumps({"value": value})),
        )
        ids.append(int(cursor.lastrowid or 0))
    connection.close()
    return ids[0], ids[1]


def connect(path: Path) -> sqlite3.Connection:
    """A connection with veglia's settings (core/storage/backend.py's pragmas)."""
    connection = sqlite3.connect(path, isolation_level=None, timeout=30)
    for pragma in ("journal_mode=WAL", "foreign_keys=ON", "busy_timeout=30000"):
        connection.execute(f"PRAGMA {pragma}")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


class Rows:
    """The six rows a job writes: its node, two links, a log line, a lease taken and left."""

    def __init__(self, connection: sqlite3.Connection, inputs: tuple[int, int]) -> None:
        self.connection = connection
        self.inputs = inputs
        self.worker = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"

    def write(self, job: int, folder: str, total: int) -> None:
        now, moment = _now(), time.time()
        attributes = {
            "options": {"resources": {"num_machines": 1}},
            "computer": "localhost",
            "similarity_key": "core.arithmetic.add||localhost",
            "cache_hash": hashlib.sha256(f"{job}+1".encode()).hexdigest(),
            "remote_workdir": folder,
            "retrieve_list": ["aiida.out"],
            "command_lines": ["bash < aiida.in > aiida.out"],
            "job_id": str(job),
            "scheduler_state": "done",
            "submitted_at": moment,
            "job_outcome": {"exit_status": 0, "failure": None},
            "sum": total,
        }
        execute = self.connection.execute
        execute("BEGIN")
        node = execute(
            "INSERT INTO nodes (uuid, node_type, process_type, label, description, ctime,"
            " mtime, attributes, extras, process_state, exit_status) VALUES (?,"
            " 'process.calculation.calcjob.CalcJobNode.', 'core.arithmetic.add', '', '', ?, ?,"
            " ?, '{}', 'finished', 0)",
            (str(uuid.uuid4()), now, now, json.dumps(attributes)),
        ).lastrowid
        for source, label in zip(self.inputs, ("x", "y"), strict=True):
            execute(
                "INSERT INTO links (input_id, output_id, label, link_type) VALUES (?, ?, ?,"
                " 'input')",
                (source, node, label),
            )
        execute(
            "INSERT INTO logs (uuid, node_id, time, levelname, loggername, message, details)"
            " VALUES (?, ?, ?, 'REPORT', 'veglia.engine', ?, '{}')",
            (str(uuid.uuid4()), node, now, f"job {job} submitted"),
        )
        execute(
            "INSERT INTO process_leases (process_id, worker, host, pid, heartbeat, acquired)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (node, self.worker, "localhost", os.getpid(), moment, moment),
        )
        execute("DELETE FROM process_leases WHERE process_id = ?", (node,))
        execute("COMMIT")


# -- a worker ------------------------------------------------------------------------------------
def veglia_job_script(trace: bool = True) -> tuple[str, dict[str, str]]:
    """The submit script veglia writes for an add job on a computer with its default
    properties, and the files its wraps put beside it. Made in a process of its own: the
    workers never import veglia. ``trace`` False: with the computer's sampler off."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        made: tuple[str, dict[str, str]] = pool.apply(_render_veglia_job_script, (trace,))
    return made


def _render_veglia_job_script(trace: bool) -> tuple[str, dict[str, str]]:
    # Lazy: in the pool's process only (see veglia_job_script).
    from veglia.engine.calcjob import job_script
    from veglia.plugin_manager import gather
    from veglia.plugins.schedulers.direct import DirectScheduler
    from veglia.schedulers import JobTemplate

    declared, _ = gather("computer_properties")
    defaults = {prop.name: prop.default for _, prop in declared}
    defaults["trace"] = trace

    class DefaultComputer:  # what the wraps read of a computer: its properties
        def get_property(self, name: str) -> Any:
            return defaults.get(name)

    wraps = [w for w in job_script.wraps_for(None, DefaultComputer()) if w.name != "core.guard"]
    lines = job_script.wrap_commands(["bash < aiida.in > aiida.out"], wraps)
    script = DirectScheduler().get_submit_script(JobTemplate(commands=lines))
    files = job_script.wrap_files(wraps, {SCRIPT_NAME, "aiida.in"})
    return script, {k: v.decode() for k, v in files.items()}


class Worker:
    """Keeps ``in_flight`` jobs running; each through submit shell, job and transaction."""

    def __init__(
        self,
        root: Path,
        rows: Rows,
        in_flight: int,
        script: tuple[str, dict[str, str]] = (SCRIPT, {}),
    ) -> None:
        self.root = root
        self.script, self.beside = script
        self.rows = rows
        self.in_flight = in_flight
        self.selector = selectors.DefaultSelector()
        self.running = 0
        self.times: dict[int, tuple[float, float]] = {}  # job: (started, ended)
        #: CPU seconds of the submit shells, and of the jobs (bash, time, bash) they started
        self.shell_cpu = self.job_cpu = 0.0

    def run(self, take: Callable[[], int | None]) -> None:
        """Run the jobs ``take`` hands out (None: no more) until all have ended."""
        self._fill(take)
        while self.running:
            for key, _ in self.selector.select():
                if self._step(key):
                    self._fill(take)

    def _fill(self, take: Callable[[], int | None]) -> None:
        while self.running < self.in_flight:
            job = take()
            if job is None:
                return
            self._start(job)

    def _start(self, job: int) -> None:
        started = time.time()
        folder = self.root / str(job)
        folder.mkdir()
        (folder / "aiida.in").write_text(f"echo $(({job} + 1))\n")
        (folder / SCRIPT_NAME).write_text(self.script)
        for name, text in self.beside.items():
            (folder / name).write_text(text)
        read, write = os.pipe()
        pid = os.posix_spawn(
            BASH,
            [BASH, "-c", SUBMIT.format(folder=shlex.quote(str(folder)))],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, write, 1),
            ],
            setsid=True,  # the local transport's start_new_session
        )
        os.close(write)
        self.selector.register(read, selectors.EVENT_READ, ("shell", job, pid, bytearray()))
        self.times[job] = (started, 0.0)
        self.running += 1

    def _step(self, key: selectors.SelectorKey) -> bool:
        """One event of a job; whether the job ended with it."""
        kind, job, pid, output = key.data
        if kind == "shell":
            chunk = os.read(key.fd, 64)
            if chunk:
                output += chunk
                return False
            self.selector.unregister(key.fd)
            os.close(key.fd)
            _, status, usage = os.wait4(pid, 0)
            self.shell_cpu += usage.ru_utime + usage.ru_stime  # a fast job's too
            if status != 0 or not output.strip().isdigit():
                raise RuntimeError(f"job {job}: the submit shell failed ({status}, {output!r})")
            job_pid = int(output)
            try:
                pidfd = os.pidfd_open(job_pid)
            except ProcessLookupError:  # ended, and reaped by the submit shell
                return self._end(job)
            self.selector.register(pidfd, selectors.EVENT_READ, ("job", job, job_pid, None))
            return False
        self.selector.unregister(key.fd)
        os.close(key.fd)
        with contextlib.suppress(ChildProcessError):  # not a subreaper: not ours to reap
            _, _, usage = os.wait4(pid, 0)  # with what it waited for: time, the add's bash
            self.job_cpu += usage.ru_utime + usage.ru_stime
        return self._end(job)

    def _end(self, job: int) -> bool:
        folder = self.root / str(job)
        text = (folder / "aiida.out").read_text().strip()
        if text != str(job + 1):
            raise RuntimeError(f"job {job}: aiida.out holds {text!r}, not {job + 1}")
        self.rows.write(job, str(folder), int(text))
        self.times[job] = (self.times[job][0], time.time())
        self.running -= 1
        return True


def _work(
    number: int,
    root: str,
    database: str,
    inputs: tuple[int, int],
    n: int,
    in_flight: int,
    counter: Any,
    ready: Any,
    go: Any,
    results: Any,
    script: tuple[str, dict[str, str]],
) -> None:
    """A worker process: warm up, wait for the start, take jobs from ``counter`` until n."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        worker = Worker(Path(root), Rows(connect(Path(database)), inputs), in_flight, script)
        warm = iter(range(n + number * WARM_UP, n + (number + 1) * WARM_UP))
        worker.run(lambda: next(warm, None))
        worker.times.clear()
        worker.shell_cpu = worker.job_cpu = 0.0
        ready.put(os.getpid())
        go.wait()
        before = os.times()

        def take() -> int | None:
            with counter.get_lock():
                job: int = counter.value
                if job >= n:
                    return None
                counter.value = job + 1
            return job

        worker.run(take)
        after = os.times()
        results.put(
            {
                "times": worker.times,
                "own": after.user + after.system - before.user - before.system,
                "shells": worker.shell_cpu,
                "jobs": worker.job_cpu,
                "subreaper": subreaper,
            }
        )
    except BaseException as exc:
        results.put({"error": f"floor worker {number}: {type(exc).__name__}: {exc}"})
        ready.put(None)  # if it failed before it was ready: the caller waits no longer
        raise


def measure(
    n: int,
    workers: int = 2,
    in_flight: int = IN_FLIGHT,
    veglia_script: bool = False,
    trace: bool = True,
) -> dict[str, Any]:
    """Run n jobs on ``workers`` processes; jobs/s, CPU a job and where it went. With
    ``veglia_script``, each job runs the submit script veglia writes (veglia_job_script)."""
    home = Path(tempfile.mkdtemp(prefix="veglia-floor-"))
    database = home / "floor.sqlite"
    jobs = home / "jobs"
    jobs.mkdir()
    context = multiprocessing.get_context("fork")
    counter = context.Value("q", 0)
    ready, results = context.Queue(), context.Queue()
    go = context.Event()
    processes = []
    try:
        inputs = make_database(database)
        script = veglia_job_script(trace) if veglia_script else (SCRIPT, {})
        for number in range(workers):
            args = (number, str(jobs), str(database), inputs, n, in_flight, counter)
            process = context.Process(target=_work, args=(*args, ready, go, results, script))
            process.start()
            processes.append(process)
        if None in [ready.get(timeout=120) for _ in range(workers)]:
            raise SystemExit(results.get(timeout=10)["error"])
        machine_before = machine_cpu_seconds()
        start = time.time()
        go.set()
        records = [results.get(timeout=120 + n) for _ in range(workers)]
        machine = machine_cpu_seconds() - machine_before
        for process in processes:
            process.join()
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
        shutil.rmtree(home, ignore_errors=True)
    errors = [r["error"] for r in records if "error" in r]
    if errors:
        raise SystemExit("; ".join(errors))
    times = {job: span for r in records for job, span in r["times"].items()}
    if len(times) != n:
        raise SystemExit(f"floor: {len(times)} of {n} jobs ran")
    ended = max(end for _, end in times.values())
    elapsed = ended - start
    return {
        "jobs": n,
        "workers": workers,
        "in_flight": in_flight,
        "jobs_per_s": n / elapsed,
        "elapsed_s": elapsed,
        "median_job_s": statistics.median(end - begun for begun, end in times.values()),
        "worker_cpu_per_job": sum(r["own"] for r in records) / n,
        "shell_cpu_per_job": sum(r["shells"] for r in records) / n,
        "job_cpu_per_job": sum(r["jobs"] for r in records) / n,
        "machine_cpu_per_job": machine / n,
        "machine_busy": machine / elapsed / (os.cpu_count() or 1),
        "jobs_per_worker": [len(r["times"]) for r in records],
        "jobs_counted": all(r["subreaper"] for r in records),
        "veglia_script": veglia_script,
        "sampler": veglia_script and trace,
    }


def report(r: dict[str, Any]) -> None:
    """The floor's figures, as throughput.py prints veglia's."""
    ms = 1000
    script = " (veglia's job script)" if r.get("veglia_script") else ""
    programs = "bash, its sampler, time, bash" if r.get("sampler") else "bash, time, bash"
    print(
        f"floor{script}: {r['jobs']} jobs, {r['workers']} workers, "
        f"{r['in_flight']} in flight each: "
        f"{r['jobs_per_s']:.1f} jobs/s, median job {r['median_job_s'] * ms:.0f} ms"
    )
    jobs = f"{r['job_cpu_per_job'] * ms:.2f}" if r["jobs_counted"] else "not counted (no subreaper)"
    total = r["worker_cpu_per_job"] + r["shell_cpu_per_job"] + r["job_cpu_per_job"]
    print(
        f"  CPU ms/job: workers {r['worker_cpu_per_job'] * ms:.2f} + their submit shells "
        f"{r['shell_cpu_per_job'] * ms:.2f} + the jobs ({programs}) {jobs} = "
        f"{total * ms:.2f}; whole machine {r['machine_cpu_per_job'] * ms:.2f} (other users "
        f"included); the machine was {r['machine_busy']:.0%} busy; jobs each worker ran: "
        f"{r['jobs_per_worker']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--jobs", type=int, default=500)
    parser.add_argument("-w", "--workers", type=int, default=2)
    parser.add_argument(
        "-k", "--in-flight", type=int, default=IN_FLIGHT, help="Jobs each worker keeps running."
    )
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    parser.add_argument(
        "--veglia-script",
        action="store_true",
        help="Each job runs the submit script veglia writes for it (trace sampler and all).",
    )
    args = parser.parse_args()
    if args.jobs < 1 or args.workers < 1 or args.in_flight < 1:
        parser.error("-n, -w and -k must be at least 1")
    line = describe()
    result = measure(args.jobs, args.workers, args.in_flight, args.veglia_script)
    if args.json:
        json.dump({"machine": line, **result}, sys.stdout, indent=2)
        print()
        return
    print(f"machine: {line}")
    report(result)


if __name__ == "__main__":
    main()
