#!/usr/bin/env python3
"""Throughput of the daemon: N trivial calc jobs on localhost/direct with 2 workers.

``core.arithmetic.add`` jobs on a fresh ``presto`` profile (SQLite, the local RabbitMQ) with
its default options, submitted at once to a daemon of 2 workers. Prints jobs per second,
the median time from submission to the end of a job, the submission time, and where the
CPU went: CPU seconds per job of the submitting process and of each worker (and of what
the workers ran and waited for: ``bash``, ``ps``), SQL statements and commits per job, and
AMQP messages per job. The machine's own CPU time over the run is printed too (it counts
other users of the machine). The counts do not depend on how loaded the machine is; CPU
seconds depend on it less than wall-clock figures, but do (see below).

    python bench/throughput.py                 # 500 jobs
    python bench/throughput.py -n 20           # a smoke run
    python bench/throughput.py --profile       # also a cProfile of each worker (top 25)
    python bench/throughput.py --submit-only 10000   # submission alone, no daemon
    python bench/throughput.py --submit-only 2000 --profile   # ... with a cProfile of it
    python bench/throughput.py --aiida         # the same workload through aiida-core too
    python bench/throughput.py --floor         # the machine's floor first (bench/floor.py)

``--aiida`` runs aiida-core from ``--aiida-python`` (by default /work/aiida-venv's, else this
interpreter when it has aiida), on a ``verdi presto`` profile with its fastest settings:
safe interval 0 and minimum poll interval 0 on ``localhost``, 1000 process slots a worker.
aiida-core's part runs first and veglia's right after it: both meet the machine as
aiida-core's minutes left it, not veglia's seconds after a rest (some machines of this
kind slow by a third after minutes of near-full load; aiida-core's run keeps them about
60% busy, and veglia's part after it ran at full speed).

``--floor`` runs bench/floor.py's measurement (the same number of jobs and workers doing only
what each job must: the submit shell, ``/usr/bin/time``, the add's ``bash``, its files, one
SQLite transaction) right before veglia's part, and prints veglia's jobs/s as a share of it.

Where the time went. 500 jobs on this 2-core machine in a quiet minute (load average
about 1.5), the code before and after in the same minute, with the same bench:

                              before            after (two runs)
    throughput                21.7 jobs/s       31.7 and 28.6 jobs/s
    CPU ms/job: submitter     5.6               3.8 and 3.3
                workers       45.7 (+6.5 bash)  25.5 and 32.4 (+5.6, +6.8 bash/ps)
                whole machine 82.8              54.2 and 56.6
    submitter per job         9 statements,     8 statements, 2 commits, 1 message
                              7 commits, 1 msg
    workers per job           45.3 statements,  42.2 statements, 33.2 commits, 0 messages
                              44.3 commits
    10,000 jobs submitted     -                 36.3 s (2.9 ms CPU a job)

Against aiida-core 2.9.4 (``--aiida -n 50``, one run, under load): veglia 17.1 jobs/s,
aiida-core 0.86 jobs/s, 19.9x; 500 aiida-core jobs took about 40 minutes under load.

Under load (load average 5 to 17, other sessions' tests and benches) the same CPU
figures came out about twice as high, before and after alike; the worker's profile
(cProfile on ``time.thread_time``; in-process harness stepping submitted jobs from their
checkpoints as a worker does) went from 43,300 to 32,300 Python calls per job.

    Before, 53% of a worker's own CPU was SQLAlchemy: a session, a commit and an ORM
    statement (or unit-of-work flush) for each of ~45 writes and reads per job, statements
    built and cache-keyed anew each time. Then came the checkpoint (plumpy's Bundle, 7
    per job, ~1.5 ms each under the profiler), loading the process (its node read three
    times, inputs found by a UUID prefix, which SQLite's LIKE cannot index: a table scan
    per input), the caching hash (its computer read by label), and the repository writes.
    After: a state change is one transaction (the state, its checkpoint and what entering
    it wrote, see StorageBackend.transaction); node rows, links and logs are inserted
    through their tables; node updates and attribute patches are one prebuilt statement per
    shape; a worker reads a process's node once; a whole UUID is looked up by the index;
    a loaded job's computer comes from the runner's cache by pk. Left, by size: plumpy's
    checkpoints and unbundling, the remaining ~40 statements (reads among them), the
    repository's files (6 per job), the parse step's nodes.

    Not reached: 50 jobs/s needs ~40 ms of CPU a job for everything (the machine used
    ~55), and 10,000 submissions under 20 s need ~2 ms a job (3.6 ms wall now, 2.9 ms of
    it CPU; see "Submission" below). Next, by size: plumpy's checkpoints (Bundle save, 7 a
    job) and unbundling, worker-only costs beyond the steps (lease take/release, the broker
    thread, the 0.1 s poll loop), reads that could share the step's transaction (computer,
    authinfo, the caching hash's file lists).

    Workers, second round (another machine of the same kind, whose CPU was slower: the
    figures above are not comparable with these). With ``VEGLIA_BENCH_SQL=1`` the probe
    counts each statement and commit by the veglia functions it came from: a job's steps
    outside its state changes each committed on their own (taking the process and its
    lease, reading the checkpoint and each input node, the caching hash's reads, each
    write of the retrieval and of the parsing, the computer read again for Fusion). Each
    phase is now one transaction, plumpy's two decodings of the inputs share one read of
    each node, ``collect_trace`` hooks get the job's computer, the repository checks its
    folders once per process and writes no blob it has, node attributes are copied as
    JSON data rather than through ``copy.deepcopy``, and the login name is looked up once:

                              before (5460edf)     after
    workers per job           42.5 statements,     39.3 statements, 17.2 commits
                              33.4 commits
    300 jobs, back to back,   9.9 and 10.3 jobs/s  12.6 and 11.9 jobs/s
    with other work running   (whole machine 168-188 ms/job; after: 129-136)
    500 jobs, quiet           -                    17.0, 17.5 and 17.1 jobs/s; workers
                                                   56-57 ms CPU a job, whole machine ~90
    aiida-core, same run      -                    0.59 jobs/s: 28.7x (first machine 22x)

    py-spy on a worker (all threads) put its main thread at about 80% of its samples and
    kiwipy's thread at 15-18%; under cProfile SQLAlchemy's own code is about a third of
    the main thread. Next: statements and sessions without SQLAlchemy's per-call overhead
    on the hot path (each ORM session with its commit costs ~10 times a bare sqlite3
    commit), fewer checkpoints' worth of plumpy work.

    Workers, third round (a third machine). py-spy (all threads, ``-r 200``, 500 jobs) put
    SQLAlchemy's own Python code at 26% of a worker's samples and SQLite's at 16%: every
    step's writes went through an ORM session (created, joined, flushed, expunged and
    committed per transaction block) though nearly all of them are Core statements, and
    reads built their statement each time. A transaction block now holds a Core
    connection, with an ORM session made on it only for the blocks that ask for one;
    node updates and patches, node, file and checkpoint reads, links, logs and leases run
    on it (``StorageBackend.connection``), through statements built once. After it,
    SQLAlchemy's Python code was 15% of the samples. Back to back, 300 jobs, twice:

                              before (5907937)     after
    throughput                20.6 and 18.1 jobs/s 25.3 and 21.9 jobs/s
    workers' CPU ms/job       41.8 and 52.3        33.5 and 42.0
    500 jobs, same run as     -                    20.9 jobs/s; aiida-core 0.75: 27.8x
    --aiida

    A process's RPC key is bound without the worker's loop waiting for the broker (about
    4% more jobs/s, within the noise). What the profile shows now, by size: SQLite (about
    a seventh), the job's files (sandbox, blobs and work directory, about a fifth, most of
    it in the kernel), SQLAlchemy's per-statement overhead (a seventh), plumpy's
    checkpoints and loading (about 8%), the kiwipy thread.

    Workers, fourth round (a fourth machine, faster, whose speed drifted by up to a factor
    of two between minutes). py-spy (on-CPU samples of both workers): SQLAlchemy about
    half, of which SQLite's own work (execute and commit) 40%; among veglia's own
    functions the largest were ``get_storage``, whose lazy import statement ran at every
    storage access, and ``shared_strings``, which walked a process node's whole attributes
    at every patch (5% of a worker under cProfile). Both fixed: the import runs once, and a
    patch keeps the values the node held when they are equal and of the same type. In
    turn, 300 jobs, three times each, in a slow phase: 31.8, 29.8 and 31.3 jobs/s before,
    32.9, 32.4 and 33.3 after (workers 27.7-30.9 -> 27.2-28.1 ms a job). With ``--aiida
    -n 500`` in one run: veglia 43.9 jobs/s (workers 19.8 ms, whole machine 36.2 ms a
    job), aiida-core 1.06 jobs/s: 41.2x. In a fast minute 500 jobs ran at 50.9 jobs/s
    (whole machine 31.6 ms a job); in slow ones at 32-36. Left, by size: SQLAlchemy's
    per-statement and per-transaction Python (the attribute patch, the state and
    checkpoint update, and the connection taken and returned for each block: about a
    fifth of a worker's on-CPU samples), SQLite, plumpy, the sandbox's files.

    Fifth round (a fifth machine, whose speed also drifted: the same code took 29.6 to 65
    ms of whole-machine CPU a job in back-to-back runs, with no steal time reported, so
    only runs in turn compare). ``perf record -a`` over a run put the workers' Python at 61%
    of the machine, ``bash`` at 16%, ``cat`` 3%, RabbitMQ 4%, ``/usr/bin/time`` 2% and
    ``setsid`` 1%: the submit wrapper ran three ``cat`` (and a subshell) per job to replay
    the first submission's output. It reads its files with bash's ``read`` now, and bash is
    found once rather than tried in every PATH entry: the workers' children's CPU a job
    halved (7-11 ms before, 4-6 ms after, in slow minutes; 2.9 ms in a fast one).

    SQLite's write lock (``VEGLIA_BENCH_LOCKS=1`` times it): over 500 jobs it was held for
    two thirds of the run, its holders on the CPU for only two fifths of that (the job's
    processes take the cores from them), and the workers waited 5-13 s in all; in the last
    quarter of a run, when the last jobs are parsed, the two workers take turns at about
    half a core each and the machine is 60% busy. A hand-over that wakes the waiter at once
    (an ``flock`` beside the database, instead of SQLite's 1, 2, 5 ms sleeps) was within
    the noise (85-88% of the machine used either way) and is not kept. Merging each step's
    last writes into the commit of its state change (11.6 commits a job) lengthened the
    lock's holds by the checkpoint's building; only the parse is merged (its outputs and
    the job's end are one commit, which no reader sees apart), with the lease's release and
    the upload's file records: 17.2 -> 14.2 commits a job. With ``--aiida -n 500``:
    veglia 41.4 jobs/s (whole machine 38.4 ms a job, workers 24.4 ms), aiida-core 1.26
    jobs/s, 32.9x; aiida-core ran faster than before because the bench no longer reads
    its 500 nodes every 0.2 s while it runs (see below). At the round's last commit, in a
    quieter minute: veglia 48.6 jobs/s (33.5 ms a job, workers 20.2 ms), aiida-core 1.13,
    43.0x. 54.2 jobs/s once, in the machine's fastest minute (29.6 ms a job).

    Sixth round (a sixth machine, faster: 23-26 ms of whole-machine CPU a job at first,
    34-35 ms two hours later). The bench prints the run by tenths (jobs submitted and
    ended, the machine's and each worker's CPU), the workers' CPU in threads other than the
    main one, and the jobs each worker ran. They showed a run in two halves: no job ends
    before about 60% of the run, while the machine is 90-100% busy starting jobs (``perf
    -a``: the jobs' ``bash``, ``time`` and ``setsid`` 49% of the machine, the workers'
    Python 40%; each program started costs about 0.7 ms of CPU here, most of it the dynamic
    loader asking the virtual CPU for its features); then the jobs end in a tail at 50-65%.
    In the tail each worker's main thread was never idle (py-spy): a sixth of it in
    ``rmdir`` and ``unlink`` of the retrieved and input folders, which waited for the file
    system's journal, a third in SQLite's calls. Now: those folders are deleted on a thread
    once the step's commit is done; a parser runs before the end writes anything (its
    outputs are stored and linked after it, as in aiida-core), retrieval's findings are one
    patch, the exit status goes with the final state, the upload reads before it writes
    (the write lock, from a transaction's first write to its commit: 2.6-3.0 s -> 2.3 s
    held per 500 jobs); ``core.direct`` gives a job its own process group with bash's job
    control (``set -m``) rather than ``setsid``, a program less a job. Statements a job:
    39.4 -> 35.4. In turn, 500 jobs: 56.1, 54.8 jobs/s before, 62.2, 59.6 after; later, in
    a slower hour, 49.9, 50.6, 49.1, 48.6 before and 54.1, 52.3, 49.8, 49.4 after. Then the
    broker: binding and unbinding each process's RPC key on the worker's queue was most of
    RabbitMQ's CPU (bindings live in its metadata store): about 1.2 ms a job there and 1 ms
    in the workers' broker threads. A worker's queue is now bound once, to
    ``[rpc].w<lease token>.*``, and senders name the worker from the process's lease:
    RabbitMQ's CPU over a bench run 0.93 -> 0.37 s; in turn against the round's start,
    500 jobs: 59.8, 54.4, 49.7 jobs/s before, 67.3, 57.9, 54.9 after. With
    ``--aiida -n 500``: at the round's start veglia 63.8 jobs/s, aiida-core 1.94, 33.0x;
    after its first commit veglia 60.3, aiida-core 1.55, 38.8x; at its end veglia 70.3
    (whole machine 23.4 ms a job), aiida-core 1.63, 43.0x in a fast minute, and 55.2 (32.1
    ms a job) against 1.57, 35.1x, in a slow one. Left: SQLite's lock, which
    the statements that wait for it (7 s in all a run, 4 ms a wait) show more than its
    holds do; the busy handler's sleeps explain part of it (an ``flock`` hand-over, tried
    again, raised the tail's use of the machine by about ten points and the run by 1%);
    the files of the repository and sandboxes (``mkstemp``, ``mkdir`` cost 0.3-0.5 ms of CPU
    each in a busy run); the programs a job starts.

    Seventh round (a seventh machine, about twice as slow as the sixth: 52-90 ms of
    whole-machine CPU a job, drifting within minutes; 10,000 submissions 50.8-54.8 s, 5.1-5.5
    ms of CPU a job). ``--aiida -n 500``: veglia 29.9 jobs/s against aiida-core's 0.77 at
    the round's start, 38.7x; in a slower hour, with the round's changes, 22.2 against 0.57,
    38.7x again: both slowed alike. The bench's own probe was taxing veglia: it counted
    statements through SQLAlchemy's events, and a listener puts every statement and commit
    on SQLAlchemy's slower path. Under callgrind (instructions, which do not drift), jobs
    run in one process took 36.3 M instructions each with such listeners and 32.9 M
    without, 10.6% more; aiida-core's daemon never had the probe. It now counts where
    SQLAlchemy hands a statement to the driver (33.1 M, 0.9%). The bench also prints the
    workers' garbage-collection CPU, and the machine's speed before and after the run (a
    fixed Python loop), since figures of different machines and minutes compare only
    through it. The collector took 1.2 ms a job in the workers (their whole lives, start
    included); a worker now freezes what it imported at start and collects its young
    generation every 10,000 allocations, not 700: 0.45-0.56 ms a job (a worker holding
    2,000 waiting jobs: 114.4 MB, against 117.1 MB before). Wall-clock A/B runs could not
    resolve changes of a few percent here: the same code gave 67 to 91 ms a job in runs
    back to back.

    Eighth round (an eighth machine, the fastest: the calibration loop took 0.05 s; a
    500-job run cost the whole machine 20-22 ms a job after a minute at rest, 26-28 ms
    after a few minutes of runs back to back, and the loop did not show it). ``--aiida -n
    500``: veglia 74.8 jobs/s against aiida-core's 1.85 at the start, 40.4x; 73.4 against
    1.83 with the round's change, 40.2x; with aiida-core's part first and veglia's at once
    after it (as the bench now runs them), 79.3 against 1.85, 42.9x: aiida-core's run keeps
    the machine about 60% busy, which does not slow it, and veglia's runs back to back
    (62-68 jobs/s) do. ``--submit-only 10000``: 17.7 and 19.0 s. Per job the workers made
    14.2 commits: the transactions of a job's steps (what the upload recorded, the job id,
    the last poll, the retrieval, the caching hash) each committed, then the state change
    after them did. They now join the state change's commit (``closing_writes``): 9.1
    commits a job, 31.0 M instructions a job run in one process against 31.6 M, and a few
    percent in wall-clock runs taken in turn (within the drift). py-spy with idle samples
    put a fifth of a worker's main thread waiting for SQLite's write lock: SQLite's busy
    handler sleeps 1, 2, 5 ms between tries. Writers taking turns through a file lock (a
    waiter woken as the lock is freed) changed nothing measurable (67.8, 64.7, 66.0 against
    67.5, 63.7, 64.4 jobs/s in turn) and was not kept: the machine is busy anyway for the
    first two thirds of a run. ``perf`` (whole machine): the jobs' ``bash`` and ``time`` a
    third of its samples, the workers' Python half; the dynamic loader's reading of the
    CPU's caches (``cpuid``, trapped by the virtual machine) 8% by itself, in each of the
    four programs a job starts.

    The bench now runs two jobs a worker in each daemon, veglia's and aiida-core's, before
    the clock starts (imports and first connections are a long-running daemon's past:
    about 0.4 s a veglia worker, a tenth of its CPU in a 500-job run, here compiled afresh
    since the environment sets ``PYTHONDONTWRITEBYTECODE``), and for both takes each job's
    end from its node's last change, counting the ended ones every 0.5 s, rather than
    reading every pending node every 0.1 s (0.2 s for aiida-core) on the daemon's cores.

    Submission (issue 16: 10,000 submissions under 20 s, ~1.5 ms of CPU a job). The same
    ``--submit-only 10000``, before (5460edf) and after, back to back, twice, on a busy
    machine (load average 2 to 4.2; other sessions' Python processes held most of both
    cores at times; the before runs took 3.5 to 5 times the quiet figures above):

                              before                after
    submitting 10,000 jobs    129.9 s and 144.9 s   62.9 s and 52.8 s
    CPU ms/job (submitter)    8.41 and 10.36        4.85 and 4.57
    per job                   8 statements,         3 statements, 1 commit,
                              2 commits, 1 msg      1 message
    Python calls/job          5,356                 2,336 (main thread, cProfile, 1,000 jobs)

    Scaled by those ratios to the quiet run above (36.3 s, 2.9 ms): about 13 to 18 s and
    1.3 to 1.7 ms of CPU a job; runs of 2,000 in quieter minutes (load ~2.5) gave 4.74 ->
    2.31 ms of CPU and 6.4 -> 2.8 ms of wall a job. Not measured on a quiet machine:
    re-run it there. About a fifth of the submitter's CPU is kiwipy's thread publishing.

    What changed, by size. The three nodes of a job (its two new inputs and the process)
    are one INSERT through a statement built once, not one each built with its values
    (SQLAlchemy cache-keyed every value: half the submitter's CPU); the daemon flag is
    stored with the node (the second commit is gone, and a submitter that dies before the
    hand-over now leaves a flagged process the daemon's repair queues, not an unflagged
    one that waited for ever); the computer and whether it is configured come from the
    runner's cache (read at most once a second, at once after this process changes a
    computer), not two queries a job; the user without a passwd read a node. The broker
    task is handed to kiwipy's loop without waiting for the confirmation (a thread and a
    broker round trip a job): confirmations are checked at the next submit and at exit,
    a refused task is sent again the waiting way, or a BrokerError names the process
    (engine/daemon/task_pipeline.py). Left, by size: plumpy (building the process, its
    input validation and the checkpoint's Bundle: ~40% of the submitter's main thread),
    SQLAlchemy's execution of the 3 statements and the commit (~30%), and the broker
    thread publishing (aio_pika, ~800 Python calls a message: ~20% of the process's CPU).

    The per-job broker traffic was already small: one task message per job, from the
    submitter; workers publish nothing (QuietCommunicator) and acknowledge the task once.
    ``ps`` is one per poll interval for all jobs of a worker (0.1 s on presto's localhost).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import floor
from machine import bench_profile, describe, file_creation_us, machine_cpu_seconds

VEGLIA = str(Path(sys.executable).parent / "veglia")
PROBE = Path(__file__).resolve().parent / "probe"
AIIDA_VENV_PYTHON = Path("/work/aiida-venv/bin/python")
TICK = os.sysconf("SC_CLK_TCK")


# -- measuring ---------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a process: utime+stime, cutime+cstime."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    own = (int(fields[11]) + int(fields[12])) / TICK
    children = (int(fields[13]) + int(fields[14])) / TICK
    return own, children


def main_thread_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process's main thread (its other threads: :func:`cpu_seconds` less
    this, ended threads included)."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


class BusySampler:
    """The machine's busy share of its CPUs, sampled in a thread every ``step`` seconds."""

    def __init__(self, pids: list[int], step: float = 0.25) -> None:
        import threading

        self.step = step
        self.pids = pids
        #: (Unix time, the machine's busy CPU seconds, each of ``pids``' own CPU seconds)
        self.samples: list[tuple[float, float, list[float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BusySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            own = [cpu_seconds(pid)[0] for pid in self.pids]
            self.samples.append((time.time(), machine_cpu_seconds(), own))
            if self._stop.wait(self.step):
                return

    def _bounds(self, start: float, end: float) -> tuple[Any, Any] | None:
        inside = [s for s in self.samples if start - self.step <= s[0] <= end + self.step]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return inside[0], inside[-1]

    def busy_between(self, start: float, end: float) -> float:
        """The share of the machine's CPUs that was busy from start to end (0 to 1)."""
        bounds = self._bounds(start, end)
        if bounds is None:
            return float("nan")
        (t0, c0, _), (t1, c1, _) = bounds
        return (c1 - c0) / (t1 - t0) / (os.cpu_count() or 1)

    def pids_busy_between(self, start: float, end: float) -> list[float]:
        """The share of one CPU each of the pids used from start to end."""
        bounds = self._bounds(start, end)
        if bounds is None:
            return [float("nan")] * len(self.pids)
        (t0, _, own0), (t1, _, own1) = bounds
        return [(b - a) / (t1 - t0) for a, b in zip(own0, own1, strict=True)]


def timeline(
    start: float, submitted: dict[int, float], ended: dict[int, float], busy: BusySampler
) -> list[tuple[float, int, int, float, list[float]]]:
    """Per tenth of the run: (its end in s, jobs submitted, jobs ended, machine busy, each
    worker busy)."""
    end = max(ended.values())
    rows, step = [], (end - start) / 10
    for i in range(10):
        a, b = start + i * step, start + (i + 1) * step
        rows.append(
            (
                b - start,
                sum(a <= t < b for t in submitted.values()),
                sum(a <= t < b or (i == 9 and t == b) for t in ended.values()),
                busy.busy_between(a, b),
                busy.pids_busy_between(a, b),
            )
        )
    return rows


def peak_rss_mb(pid: int) -> float:
    """The peak resident memory of a process (VmHWM), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def load_probe() -> Any:
    """The counters of bench/probe, in this process too (it is the submitter)."""
    spec = importlib.util.spec_from_file_location("bench_probe", PROBE / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe_env(folder: str, profile: bool) -> None:
    os.environ["VEGLIA_BENCH_PROBE"] = folder
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PROBE), os.environ.get("PYTHONPATH", "")) if p
    )
    if profile:
        os.environ["VEGLIA_BENCH_PROFILE"] = "1"


def _veglia(*args: str) -> None:
    subprocess.run([VEGLIA, *args], check=True, stdout=subprocess.DEVNULL)


def _wait_for_workers(files: Any, workers: int, timeout: float = 60) -> list[int]:
    """The workers' pids, once each has written its status (it is then up and idle)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [w["pid"] for w in files.read_status().get("workers", [])]
        if len(pids) == workers and all(files.worker_status(pid).exists() for pid in pids):
            time.sleep(1.0)  # the last imports and the broker subscription
            return pids
        time.sleep(0.2)
    raise SystemExit("veglia: the daemon's workers did not start")


def _finished_at(pks: list[int]) -> dict[int, float]:
    """When each process of ``pks`` that has terminated last changed (Unix time)."""
    # Lazy: the bench configures VEGLIA_HOME before veglia is imported.
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.orm.process_nodes import TERMINAL_STATES
    from veglia.storage.tables import nodes
    from veglia.storage.times import as_utc

    query = sa.select(nodes.c.id, nodes.c.mtime).where(
        nodes.c.id.in_(pks), nodes.c.process_state.in_(TERMINAL_STATES)
    )
    with get_storage().connection() as connection:
        return {pk: as_utc(mtime).timestamp() for pk, mtime in connection.execute(query)}


def _count_terminated(first_pk: int) -> int:
    # Lazy: as above.
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.orm.process_nodes import TERMINAL_STATES
    from veglia.storage.tables import nodes

    query = sa.select(sa.func.count()).where(
        nodes.c.id >= first_pk, nodes.c.process_state.in_(TERMINAL_STATES)
    )
    with get_storage().connection() as connection:
        return int(connection.execute(query).scalar_one())


def _warm_up(workers: int) -> None:
    """Two jobs a worker, run to the end before the clock starts: what a long-running
    daemon did long ago (imports, first connections, the work dir's root) is not counted."""
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    add = CalculationFactory("core.arithmetic.add")
    pks = [engine.submit(add, x=orm.Int(0), y=orm.Int(0)).pk for _ in range(2 * workers)]
    deadline = time.monotonic() + 120
    while len(_finished_at(pks)) < len(pks):
        if time.monotonic() > deadline:
            raise SystemExit("veglia: the warm-up jobs did not finish")
        time.sleep(0.2)


#: The monitor each job gets with --monitored: one whose guard runs always (core.guard).
MONITORED = {"time": {"entry_point": "core.walltime_guard"}}


def _submit(
    n: int, counts: dict[str, int], monitored: bool = False
) -> tuple[list[Any], dict[int, float], dict[str, float]]:
    """Submit n add jobs; the nodes, their submission times and the submitter's costs."""
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    add = CalculationFactory("core.arithmetic.add")
    before = dict(counts)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    nodes, submitted = [], {}
    for i in range(n):
        extra = {"monitors": MONITORED} if monitored else {}
        node = engine.submit(add, x=orm.Int(i), y=orm.Int(1), **extra)
        submitted[node.pk] = time.time()
        nodes.append(node)
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    cost = {
        "submit_s": seconds,
        "submit_cpu_per_job": cpu / n,
        "submit_statements_per_job": (counts["statements"] - before["statements"]) / n,
        "submit_commits_per_job": (counts["commits"] - before["commits"]) / n,
        "submit_messages_per_job": (counts["published"] - before["published"]) / n,
    }
    return nodes, submitted, cost


def bench_veglia(
    n: int,
    workers: int,
    profile_workers: bool,
    trace: bool = True,
    monitored: bool = False,
    guards: bool = True,
) -> dict[str, Any]:
    probe_dir = tempfile.mkdtemp(prefix="veglia-probe-")
    probe_env(probe_dir, profile_workers)
    probe = load_probe()
    with bench_profile(broker=True):
        try:
            if not trace:  # the job-script sampler is on by default on every computer
                _veglia("-p", "bench", "computer", "set", "localhost", "--trace", "no")
            if not guards:  # the monitors' guards beside each job (on by default)
                _veglia("-p", "bench", "computer", "set", "localhost", "--guards", "no")
            import veglia
            from veglia.engine.daemon import DaemonFiles

            profile = veglia.load_profile("bench")
            files = DaemonFiles(profile)
            _veglia("daemon", "start", str(workers))
            pids = _wait_for_workers(files, workers)
            _warm_up(workers)
            supervisor = files.supervisor_pid()
            watched = [*pids, *([supervisor] if supervisor else [])]
            cpu_before = {pid: cpu_seconds(pid) for pid in watched}
            main_before = {pid: main_thread_cpu_seconds(pid) for pid in pids}
            machine_before = machine_cpu_seconds()
            start = time.time()
            with BusySampler(pids) as sampler:
                nodes, submitted, cost = _submit(n, probe.COUNTS, monitored)
                pks = [node.pk for node in nodes]
                peak: dict[int, float] = {}
                deadline = time.monotonic() + 120 + n
                # A light poll (it shares the machine with the daemon): when each job ended
                # comes from its node's last change, not from when this loop saw it.
                while _count_terminated(pks[0]) < n:
                    for pid in pids:
                        peak[pid] = max(peak.get(pid, 0), peak_rss_mb(pid))
                    if time.monotonic() > deadline:
                        raise SystemExit("veglia: the jobs did not finish in time")
                    time.sleep(0.5)
            ended = _finished_at(pks)
            latencies = [ended[pk] - submitted[pk] for pk in pks]
            elapsed = max(ended.values()) - start
            machine = machine_cpu_seconds() - machine_before
            cpu_after = {pid: cpu_seconds(pid) for pid in watched}
            main_after = {pid: main_thread_cpu_seconds(pid) for pid in pids}
            other_threads = sum(
                (cpu_after[pid][0] - cpu_before[pid][0]) - (main_after[pid] - main_before[pid])
                for pid in pids
            )
            failed = [node.pk for node in nodes if not node.refresh().is_finished_ok]
            if failed:
                raise SystemExit(f"veglia: jobs {failed[:10]} did not finish ok")
            per_worker = {
                pid: tuple(
                    (a - b) / n for a, b in zip(cpu_after[pid], cpu_before[pid], strict=True)
                )
                for pid in pids
            }
            supervisor_cpu = (
                (cpu_after[supervisor][0] - cpu_before[supervisor][0]) / n if supervisor else 0.0
            )
        finally:
            subprocess.run([VEGLIA, "-p", "bench", "daemon", "stop"], stdout=subprocess.DEVNULL)
            _delete_queues()
    records = _probe_records(probe_dir, pids)
    result = {
        "jobs_per_s": n / elapsed,
        "median_latency_s": statistics.median(latencies),
        "peak_rss_mb": max(peak.values(), default=0.0),
        "elapsed_s": elapsed,
        "worker_cpu_per_job": sum(c[0] for c in per_worker.values()),
        "worker_other_threads_cpu_per_job": other_threads / n,
        "worker_children_cpu_per_job": sum(c[1] for c in per_worker.values()),
        "supervisor_cpu_per_job": supervisor_cpu,
        "machine_cpu_per_job": machine / n,
        "machine_busy": sampler.busy_between(start, start + elapsed),
        "timeline": timeline(start, submitted, ended, sampler),
        "worker_statements_per_job": sum(r["statements"] for r in records) / n,
        "worker_commits_per_job": sum(r["commits"] for r in records) / n,
        "worker_messages_per_job": sum(r["published"] for r in records) / n,
        # The workers' whole lives (start and warm-up too), as the counts above.
        "worker_gc_cpu_per_job": sum(
            seconds for r in records for _, seconds in r.get("gc", {}).values()
        )
        / n,
        # Each task is acknowledged when its process ends (the warm-up's jobs too).
        "jobs_per_worker": [r["acked"] for r in records],
        **cost,
    }
    statements: dict[str, int] = {}
    for record in records:  # VEGLIA_BENCH_SQL=1: each statement's text and callers
        for key, count in record.get("sql", {}).items():
            statements[key] = statements.get(key, 0) + count
    if statements:
        result["sql_per_job"] = {key: count / n for key, count in statements.items()}
    locks: dict[str, dict[str, list[float]]] = {}
    for record in records:  # VEGLIA_BENCH_LOCKS=1: SQLite's write lock, held and waited for
        for kind, entries in record.get("locks", {}).items():
            for key, figures in entries.items():
                total = locks.setdefault(kind, {}).setdefault(key, [0.0] * len(figures))
                total[:] = [a + b for a, b in zip(total, figures, strict=True)]
    if locks:
        result["locks"] = locks
    if profile_workers:
        result["profile"] = [str(Path(probe_dir) / f"{pid}.prof") for pid in pids]
    else:
        shutil.rmtree(probe_dir, ignore_errors=True)
    return result


def _delete_queues() -> None:
    """Remove the bench profile's queue and exchanges from RabbitMQ: tasks left there (a
    submit-only run's, an interrupted run's) stay for good and slow the broker down."""
    with contextlib.suppress(Exception):  # the profile may not have been made
        from veglia.engine.daemon.broker_tasks import delete_broker_queues
        from veglia.manage import get_profile

        delete_broker_queues(get_profile())


def _probe_records(folder: str, pids: list[int]) -> list[dict[str, Any]]:
    records = []
    for pid in pids:
        path = Path(folder) / f"{pid}.json"
        if path.exists():
            records.append(json.loads(path.read_text()))
    if len(records) < len(pids):
        print(f"(counts from {len(records)} of {len(pids)} workers only)")
    return records


def bench_submit_only(n: int, profile: bool = False) -> dict[str, float]:
    """Submission alone: n jobs into the broker's queue with no daemon running.

    ``profile``: a cProfile of the submissions (CPU time, this thread), top 30 printed.
    """
    probe_dir = tempfile.mkdtemp(prefix="veglia-probe-")
    probe_env(probe_dir, False)
    probe = load_probe()
    with bench_profile():
        try:
            import logging

            import veglia

            veglia.load_profile("bench")
            logging.getLogger("veglia.engine").setLevel(logging.ERROR)  # "no daemon runs"
            if not profile:
                return _submit(n, probe.COUNTS)[2]
            import cProfile

            profiler = cProfile.Profile(time.thread_time)  # CPU, not waits
            profiler.enable()
            try:
                return _submit(n, probe.COUNTS)[2]
            finally:
                profiler.disable()
                stats = pstats.Stats(profiler)
                stats.sort_stats("tottime").print_stats(30)
                stats.sort_stats("cumulative").print_stats(60)
        finally:
            # Lazy: to wait for the broker's confirmations, then close the connection.
            from veglia.engine.daemon.broker_tasks import _close

            _close()
            _delete_queues()  # the N tasks no daemon will take
            shutil.rmtree(probe_dir, ignore_errors=True)


# -- aiida-core ---------------------------------------------------------------------------------
AIIDA_SCRIPT = """
import sys, time, statistics
from aiida import load_profile, orm
from aiida.engine import submit
from aiida.plugins import CalculationFactory
load_profile()
n = int(sys.argv[1])
computer = orm.load_computer('localhost')
computer.set_minimum_job_poll_interval(0.0)
authinfo = computer.get_authinfo(orm.User.collection.get_default())
authinfo.set_auth_params({**authinfo.get_auth_params(), 'safe_interval': 0.0})
code = orm.load_code('bash@localhost')
add = CalculationFactory('core.arithmetic.add')
def job(i):
    builder = add.get_builder(); builder.code = code
    builder.x = orm.Int(i); builder.y = orm.Int(1)
    return submit(builder)
warm = [job(0) for _ in range(2 * int(sys.argv[2]))]  # as veglia's: not counted
while not all(node.is_terminated for node in warm):
    time.sleep(0.5)
start = time.time()
nodes = []
for i in range(n):
    nodes.append((job(i), time.time()))
submitted = time.time() - start
pks = [node.pk for node, _ in nodes]
def ended(project):
    qb = orm.QueryBuilder().append(orm.ProcessNode, project=project, filters={
        'id': {'in': pks},
        'attributes.process_state': {'in': ['finished', 'excepted', 'killed']}})
    return qb
while ended(['id']).count() < n:
    time.sleep(0.5)
at = {pk: mtime.timestamp() for pk, mtime in ended(['id', 'mtime']).all()}
lat = {node.pk: at[node.pk] - t for node, t in nodes}
ok = sum(1 for node, _ in nodes if node.is_finished_ok)
print(n / (max(at.values()) - start), statistics.median(lat.values()), submitted, ok)
"""


def aiida_python(path: str | None) -> str:
    """The interpreter with aiida-core: --aiida-python, the aiida venv, or this one."""
    if path:
        return path
    if AIIDA_VENV_PYTHON.exists():
        return str(AIIDA_VENV_PYTHON)
    if importlib.util.find_spec("aiida") is not None:
        return sys.executable
    raise SystemExit(
        f"--aiida: no aiida-core found ({AIIDA_VENV_PYTHON} is missing and this interpreter "
        "has none); pass --aiida-python PATH."
    )


def bench_aiida(n: int, workers: int, python: str) -> dict[str, float]:
    """The same workload through aiida-core: core.arithmetic.add, a presto profile."""
    home = tempfile.mkdtemp(prefix="aiida-bench-")
    bindir = str(Path(python).parent)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VEGLIA_", "PYTHONPATH"))},
        "AIIDA_PATH": home,
        "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
    }
    verdi = str(Path(python).parent / "verdi")

    def run(*args: str, check: bool = True) -> None:
        subprocess.run([verdi, *args], env=env, check=check, stdout=subprocess.DEVNULL)

    try:
        run("presto")
        run(
            "code",
            "create",
            "core.code.installed",
            "--label",
            "bash",
            "--computer",
            "localhost",
            "--filepath-executable",
            "/bin/bash",
            "-n",
        )
        run("config", "set", "daemon.worker_prefetch", "1000")
        run("daemon", "start", str(workers))
        out = subprocess.run(
            [python, "-c", AIIDA_SCRIPT, str(n), str(workers)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=3600,
        ).stdout.split()
        # Reported, not fatal: a long run on a shared broker may lose a job to its restart.
        return {
            "jobs_per_s": float(out[0]),
            "median_latency_s": float(out[1]),
            "submit_s": float(out[2]),
            "not_ok": n - int(out[3]),
        }
    finally:
        run("daemon", "stop", check=False)
        shutil.rmtree(home, ignore_errors=True)


# -- report -------------------------------------------------------------------------------------
def report(n: int, workers: int, r: dict[str, Any]) -> None:
    print(
        f"veglia: {n} jobs, {workers} workers: {r['jobs_per_s']:.1f} jobs/s, median latency "
        f"{r['median_latency_s']:.2f} s, submit {r['submit_s']:.2f} s, peak worker RSS "
        f"{r['peak_rss_mb']:.0f} MB"
    )
    ms = 1000
    print(
        f"  CPU ms/job: submitter {r['submit_cpu_per_job'] * ms:.1f}, workers "
        f"{r['worker_cpu_per_job'] * ms:.1f} (threads other than the main one "
        f"{r['worker_other_threads_cpu_per_job'] * ms:.1f}; garbage collection, start included, "
        f"{r['worker_gc_cpu_per_job'] * ms:.2f}; + their bash/ps "
        f"{r['worker_children_cpu_per_job'] * ms:.1f}), supervisor "
        f"{r['supervisor_cpu_per_job'] * ms:.1f}; whole machine "
        f"{r['machine_cpu_per_job'] * ms:.1f} (other users included)"
    )
    print(
        f"  per job: submitter {r['submit_statements_per_job']:.1f} statements, "
        f"{r['submit_commits_per_job']:.1f} commits, {r['submit_messages_per_job']:.1f} "
        f"messages; workers {r['worker_statements_per_job']:.1f} statements, "
        f"{r['worker_commits_per_job']:.1f} commits, {r['worker_messages_per_job']:.1f} messages"
    )
    print(
        f"  jobs each worker ran (with the warm-up's): {r['jobs_per_worker']}; the machine was "
        f"{r['machine_busy']:.0%} busy; by tenths of the run:"
    )
    print("    until   submitted  ended  machine busy  workers busy (own CPU, of one core)")
    for until, sub, end, busy, workers in r["timeline"]:
        each = "  ".join(f"{w:4.0%}" for w in workers)
        print(f"    {until:5.2f} s {sub:9d} {end:6d}  {busy:11.0%}  {each}")
    if r.get("sql_per_job"):
        print("  workers' statements and commits per job, by the veglia code they came from:")
        for key, count in sorted(r["sql_per_job"].items(), key=lambda item: -item[1])[:50]:
            print(f"    {count:5.2f}  {key}")
    locks = r.get("locks", {})
    for kind, title in (
        ("holds", "the write lock held, from the end of a transaction's first write to its commit"),
        ("waits", "statements that waited (wall time beyond their own CPU time, > 0.5 ms)"),
        ("commits", "commits (SQLite writes its WAL there, and now and then the database)"),
    ):
        entries = sorted(locks.get(kind, {}).items(), key=lambda item: -item[1][1])
        if not entries:
            continue
        total = sum(figures[1] for _, figures in entries)
        print(f"  workers' {title}: {total:.2f} s in all")
        for key, (count, seconds, *cpu) in entries[:12]:
            own = f", {cpu[0] / count * 1000:.2f} ms on CPU" if cpu else ""
            print(
                f"    {seconds:6.2f} s  {count:6.0f} x {seconds / count * 1000:.2f} ms{own}  {key}"
            )
    for path in r.get("profile", []):
        if Path(path).exists():
            print(f"\n--- cProfile of worker ({path}), main thread, by own time")
            pstats.Stats(path).sort_stats("tottime").print_stats(25)
            pstats.Stats(path).sort_stats("cumulative").print_stats(40)


#: Additions in a plain Python loop, timed to show how fast this machine's CPU is now: the
#: machines of this kind differ by more than twice, and one drifts from minute to minute.
CALIBRATION_ADDITIONS = 2_000_000


def print_calibration(when: str) -> None:
    """The CPU time :data:`CALIBRATION_ADDITIONS` additions take in a Python loop now."""
    start = time.process_time()
    total = 0
    for i in range(CALIBRATION_ADDITIONS):
        total += i
    seconds = time.process_time() - start
    print(
        f"machine speed {when}: {CALIBRATION_ADDITIONS:,} Python additions took "
        f"{seconds:.2f} s of CPU; a file created in {tempfile.gettempdir()} took "
        f"{file_creation_us():.0f} µs of CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--jobs", type=int, default=500)
    parser.add_argument("-w", "--workers", type=int, default=2)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the workers (the submitter with --submit-only).",
    )
    parser.add_argument(
        "--submit-only", type=int, metavar="N", help="Time submitting N jobs, no daemon."
    )
    parser.add_argument(
        "--no-trace",
        action="store_true",
        help="Turn the core.trace sampler off on the computer (to measure what it costs).",
    )
    parser.add_argument(
        "--monitored",
        action="store_true",
        help="Give each job a monitor with a guard (core.walltime_guard).",
    )
    parser.add_argument(
        "--no-guards",
        action="store_true",
        help="Turn the monitors' guards off on the computer (with --monitored: what they cost).",
    )
    parser.add_argument("--aiida", action="store_true", help="Also run it through aiida-core.")
    parser.add_argument("--aiida-python", help="The Python of a venv with aiida-core.")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="Run bench/floor.py's measurement right before veglia's part and compare.",
    )
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print_calibration("before")
    if args.submit_only:
        cost = bench_submit_only(args.submit_only, args.profile)
        print(
            f"veglia: submitting {args.submit_only} jobs took {cost['submit_s']:.2f} s "
            f"({cost['submit_cpu_per_job'] * 1000:.2f} ms CPU, "
            f"{cost['submit_statements_per_job']:.1f} statements, "
            f"{cost['submit_commits_per_job']:.1f} commits, "
            f"{cost['submit_messages_per_job']:.1f} messages per job)"
        )
        print_calibration("after")
        return
    python = aiida_python(args.aiida_python) if args.aiida else None
    theirs = None
    if python:
        # aiida-core first, veglia at once after it: both in the state minutes of load leave
        # the machine in (see "Eighth round" above), not veglia's seconds after a rest.
        theirs = bench_aiida(args.jobs, args.workers, python)
        print(
            f"aiida-core: {theirs['jobs_per_s']:.2f} jobs/s, median latency "
            f"{theirs['median_latency_s']:.2f} s, submit {theirs['submit_s']:.2f} s"
            + (f" ({theirs['not_ok']} jobs did not finish ok)" if theirs["not_ok"] else ""),
            flush=True,
        )
    least = None
    if args.floor:
        # Right before veglia's part, as aiida-core's: the machine as veglia meets it.
        least = floor.measure(args.jobs, args.workers)
        floor.report(least)
        # The same with veglia's job scripts: what of the gap the jobs themselves take.
        scripted = floor.measure(
            args.jobs, args.workers, veglia_script=True, trace=not args.no_trace
        )
        floor.report(scripted)
        sys.stdout.flush()
    result = bench_veglia(
        args.jobs,
        args.workers,
        args.profile,
        trace=not args.no_trace,
        monitored=args.monitored,
        guards=not args.no_guards,
    )
    report(args.jobs, args.workers, result)
    if theirs is not None:
        print(f"ratio veglia/aiida: {result['jobs_per_s'] / theirs['jobs_per_s']:.1f}x")
    if least is not None:
        ms = 1000
        print(
            f"veglia at {100 * result['jobs_per_s'] / least['jobs_per_s']:.1f} % of the floor "
            f"({result['jobs_per_s']:.1f} against {least['jobs_per_s']:.1f} jobs/s); CPU ms a "
            f"job, veglia against the floor: workers and their shells "
            f"{(result['worker_cpu_per_job'] + result['worker_children_cpu_per_job']) * ms:.1f} "
            f"against {(least['worker_cpu_per_job'] + least['shell_cpu_per_job']) * ms:.1f}, "
            f"whole machine {result['machine_cpu_per_job'] * ms:.1f} against "
            f"{least['machine_cpu_per_job'] * ms:.1f}"
        )
        # Half the floor leaves 2 x the floor's CPU a job for everything; the jobs veglia
        # writes and the submissions take their part first, the engine's workers the rest.
        budget = 2 * least["machine_cpu_per_job"]
        jobs = scripted["shell_cpu_per_job"] + scripted["job_cpu_per_job"]
        print(
            f"half the floor leaves {budget * ms:.1f} ms of CPU a job; veglia's job scripts "
            f"and submit shells take {jobs * ms:.1f}, its submissions "
            f"{result['submit_cpu_per_job'] * ms:.1f}: "
            f"{(budget - jobs - result['submit_cpu_per_job']) * ms:.1f} ms would be left for "
            f"the workers, which took {result['worker_cpu_per_job'] * ms:.1f}"
        )
    print_calibration("after")


if __name__ == "__main__":
    main()
