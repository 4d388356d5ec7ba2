#!/usr/bin/env python3
"""N jobs waiting on one daemon worker, dehydrated: its memory, its polls, their end.

The jobs are ``core.shell`` jobs on a computer of ``veglia.testing``'s fake transport and
fake scheduler (no real batch system holds 100,000 jobs here; the fake one keeps them
queued until told). The bench starts the daemon as a user does (``veglia daemon start``),
with this module installed as a plugin beside the fake transport and scheduler: its
``daemon_started`` hook starts, in the daemon's worker, which also holds the fake cluster
(it lives in memory), a thread that drives the cluster:

1. the worker starts idle, and its resident memory is read (``idle``);
2. this process submits the N jobs, timed (``submit``), while the worker takes them: each is
   uploaded, submitted to the fake cluster, polled twice and dehydrated;
3. once all N sleep, the worker's memory is read again (``held``, and per job over idle);
   the scheduler queries of the next few poll intervals are counted, with how many job ids
   each asked for (every sleeping job must be in each);
4. a pause, a play and a kill are sent to one sleeping job, each timed from the command to
   its effect on the node (no broker: the request is written on the node);
5. the cluster finishes every job at once; the bench times until all have ended (``end``,
   jobs per second), the worker waking them ``daemon.worker_prefetch`` at a time.

    python bench/dehydrated.py              # 100,000 jobs (about 45 minutes)
    python bench/dehydrated.py -n 2000      # a shorter run
    python bench/dehydrated.py -n 100 --poll-interval 1   # the smoke run of .ci/run
    python bench/dehydrated.py --submit-only --backend postgresql   # submissions alone
    VEGLIA_BENCH_TRACEMALLOC=12 python bench/dehydrated.py -n 3000   # what a job keeps
    VEGLIA_BENCH_CENSUS=1 python bench/dehydrated.py -n 5000        # its objects, pymalloc arenas

Targets (issue #35): 100,000 waiting jobs under 400 MB resident (about 3 kB a job over the
idle worker), every one polled every interval, all ending at no less throughput than
``bench/throughput.py -n 500``; 100,000 submissions in under 2 minutes.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from machine import VEGLIA, bench_profile, describe

from veglia.plugin_api import hookimpl

PROFILE = "dehydrated"
#: In the environment of the daemon the bench starts: its settings, as JSON. Its worker
#: then drives the fake cluster (``daemon_started``); any other daemon is left alone.
DRIVE_ENV = "VEGLIA_BENCH_DEHYDRATED"


def rss_mb(pid: int | None = None) -> float:
    status = Path(f"/proc/{pid or 'self'}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+)", status)
    return int(match.group(1)) / 1024 if match else 0.0


def _bench_plugins(folder: Path) -> Path:
    """A distribution's metadata registering veglia.testing's fake transport and scheduler
    and this module's ``daemon_started`` as entry points, in ``folder`` (put on sys.path:
    importlib.metadata finds it there)."""
    info = folder / "veglia_bench_fakes-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: veglia-bench-fakes\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[veglia.transports]\nfake.transport = veglia.testing:FakeTransport\n\n"
        "[veglia.schedulers]\nfake.scheduler = veglia.testing:FakeScheduler\n\n"
        f"[veglia.plugins]\nbench.dehydrated = {Path(__file__).stem}\n"
    )
    return folder


# -- in the daemon's worker ----------------------------------------------------------------
@hookimpl
def daemon_started(profile: Any) -> None:
    """In the worker of the daemon the bench started (it holds the fake cluster): count the
    scheduler queries, and drive the cluster from a thread of its own."""
    settings = os.environ.get(DRIVE_ENV)
    if settings:
        drive(**json.loads(settings))


def drive(n: int, out: str, interval: float) -> None:
    """Start the thread that reports to ``out`` and drives the fake cluster."""
    from veglia.engine.runner import get_runner
    from veglia.testing import FakeScheduler

    queries: list[tuple[float, int]] = []
    listing = FakeScheduler.get_jobs

    def counted(self, transport, job_ids):  # type: ignore[no-untyped-def]
        queries.append((time.monotonic(), len(job_ids)))
        return listing(self, transport, job_ids)

    FakeScheduler.get_jobs = counted  # type: ignore[method-assign]
    # The fake transport records every call for tests to look at: a log no real transport
    # keeps, which would grow with the jobs. Kept to its last thousand here.
    from veglia.testing import FakeTransport

    made = FakeTransport.__init__

    def bounded(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        made(self, *args, **kwargs)
        self.calls = collections.deque(maxlen=1000)

    FakeTransport.__init__ = bounded  # type: ignore[method-assign]
    # The worker's runner: its live processes (local_processes) and its dehydrated ones.
    runner = get_runner()
    cluster = FakeScheduler.cluster

    def report(**values: object) -> None:
        with open(out, "a") as handle:
            handle.write(json.dumps(values) + "\n")

    def run() -> None:
        try:
            time.sleep(3)
            census = os.environ.get("VEGLIA_BENCH_CENSUS")
            before = _census() if census else None
            report(phase="idle", rss_mb=rss_mb(), blocks=sys.getallocatedblocks())
            tracing = os.environ.get("VEGLIA_BENCH_TRACEMALLOC")
            if tracing:
                import tracemalloc

                tracemalloc.start(int(tracing))
                first = tracemalloc.take_snapshot()
            while len(runner.sleeps) < n:
                time.sleep(0.5)
            if tracing:
                grown = tracemalloc.take_snapshot().compare_to(first, "traceback")
                with open("/tmp/veglia-dehydrated-tracemalloc.txt", "w") as handle:
                    for stat in grown[:25]:
                        size, count = stat.size_diff / n, stat.count_diff
                        handle.write(f"{size:.0f} B a job, {count} blocks\n")
                        handle.write("\n".join(stat.traceback.format()[-12:]) + "\n\n")
            held_at = time.monotonic()
            if before is not None:
                grown = _census() - before
                with open("/tmp/veglia-dehydrated-census.txt", "w") as handle:
                    for name, count in grown.most_common(40):
                        handle.write(f"{count / n:8.2f} a job  {name}\n")
                    handle.write(f"RSS before a trim {rss_mb():.1f} MB\n")
                    from veglia.engine.daemon.worker import _return_free_memory

                    _return_free_memory()
                    handle.write(f"RSS after a trim {rss_mb():.1f} MB\n")
                    handle.flush()
                    saved = os.dup(2)
                    os.dup2(handle.fileno(), 2)
                    try:
                        sys._debugmallocstats()
                    finally:
                        os.dup2(saved, 2)
            report(
                phase="held",
                rss_mb=rss_mb(),
                blocks=sys.getallocatedblocks(),
                live=len(runner.local_processes),
                cluster_mb=_deep_size(cluster.jobs, cluster.submitted, cluster._submissions)
                / 2**20,
            )
            time.sleep(3 * interval + 1)
            window = [size for at, size in queries if at > held_at]
            report(phase="polled", queries=len(window), sizes=window, seconds=3 * interval + 1)
            # The control round (4.) happens now, from the bench's process; wait for its end.
            while not (Path(out).parent / "controlled").exists():
                time.sleep(0.2)
            start = time.monotonic()
            for job_id in list(cluster.jobs):
                cluster.finish(job_id, 0)
            while len(runner.sleeps) or any(p is not None for p in runner.local_processes.values()):
                time.sleep(0.2)
            report(phase="ended", seconds=time.monotonic() - start, peak_mb=_peak_mb())
        except BaseException as exc:
            report(phase="error", error=repr(exc))

    threading.Thread(target=run, daemon=True, name="veglia-bench-driver").start()


def _census() -> collections.Counter[str]:
    """How many objects of each type the collector tracks, after a full collection."""
    import gc

    gc.collect()
    return collections.Counter(type(item).__qualname__ for item in gc.get_objects())


def _deep_size(*roots: object) -> int:
    """Bytes of ``roots`` and all they hold (the fake cluster's own memory, which a real
    batch system would hold elsewhere)."""
    seen: set[int] = set()
    stack = list(roots)
    total = 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set):
            stack += list(item)
        elif hasattr(item, "__dict__"):
            stack.append(vars(item))
        elif hasattr(item, "__slots__"):
            stack += [getattr(item, name) for name in item.__slots__ if hasattr(item, name)]
    return total


def _peak_mb() -> float:
    status = Path("/proc/self/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+)", status)
    return int(match.group(1)) / 1024 if match else 0.0


# -- this process ----------------------------------------------------------------------------
def _phase(out: Path, name: str, worker: int, log: Path, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            for line in out.read_text().splitlines():
                entry = json.loads(line)
                if entry["phase"] == "error":
                    raise SystemExit(f"the worker's driver failed: {entry['error']}")
                if entry["phase"] == name:
                    return entry
        if not Path(f"/proc/{worker}").exists():
            # Its fake cluster went with it: the supervisor's next worker cannot go on.
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise SystemExit(f"the worker ended before {name!r}; the daemon log ends:\n{tail}")
        time.sleep(0.5)
    raise SystemExit(f"no {name!r} from the worker within {timeout:.0f} s")


def _timed_control(node, action: str, done) -> float:  # type: ignore[no-untyped-def]
    from veglia.engine.daemon.control import control_process

    start = time.monotonic()
    control_process(node, action)
    while not done(node.refresh()):
        time.sleep(0.01)
    return time.monotonic() - start


def bench(
    n: int, timeout: float, interval: float, postgresql: bool = False, submit_only: bool = False
) -> dict:
    with bench_profile(
        "veglia-dehydrated-",
        name=PROFILE,
        broker=False,
        postgresql=postgresql,
        options={"daemon.dehydrate": "yes"},
    ) as home:
        return _bench(home, n, timeout, interval, submit_only)


def _bench(home: Path, n: int, timeout: float, interval: float, submit_only: bool) -> dict:
    plugins = _bench_plugins(home / "plugins")
    sys.path.insert(0, str(plugins))
    out = home / "worker.jsonl"
    env = {**os.environ, DRIVE_ENV: json.dumps({"n": n, "out": str(out), "interval": interval})}
    # The daemon's processes import this module (its hook) and find the fake plugins.
    paths = [str(plugins), str(Path(__file__).parent), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    daemon = [VEGLIA, "-p", PROFILE, "daemon"]
    try:
        import veglia
        from veglia import engine, orm
        from veglia.engine.daemon import DaemonFiles
        from veglia.entry_points import CalculationFactory

        profile = veglia.load_profile(PROFILE)
        computer = orm.Computer(
            label="fake",
            hostname="fake",
            transport_type="fake.transport",
            scheduler_type="fake.scheduler",
            properties={
                "safe_interval": 0.0,
                "minimum_poll_interval": interval,
                "measure_usage": False,
            },
        ).store()
        computer.configure(root=str(home / "cluster"))
        subprocess.run([*daemon, "start", "1"], check=True, env=env, stdout=subprocess.DEVNULL)
        files = DaemonFiles(profile)
        worker = files.read_status()["workers"][0]["pid"]
        idle = _phase(out, "idle", worker, files.log, 120)
        shell = CalculationFactory("core.shell")
        command = orm.Str("echo done").store()
        start = time.monotonic()
        cpu = time.process_time()
        nodes = [
            engine.submit(shell, command=command, metadata={"computer": "fake"}) for _ in range(n)
        ]
        submit_seconds, submit_cpu = time.monotonic() - start, time.process_time() - cpu
        print(f"submitted {n} jobs in {submit_seconds:.1f} s", flush=True)
        submitted = {
            "jobs": n,
            "submit_seconds": submit_seconds,
            "submit_cpu_ms_per_job": submit_cpu * 1000 / n,
        }
        if submit_only:
            return submitted
        held = _phase(out, "held", worker, files.log, timeout)
        polled = _phase(out, "polled", worker, files.log, 120)

        probe = nodes[n // 2]
        control = {
            "pause": _timed_control(probe, "pause", lambda x: x.paused),
            "play": _timed_control(probe, "play", lambda x: not x.paused),
            "kill": _timed_control(probe, "kill", lambda x: x.is_terminated),
        }
        (home / "controlled").touch()
        ended = _phase(out, "ended", worker, files.log, timeout)
        subprocess.run([*daemon, "stop"], check=True, stdout=subprocess.DEVNULL)
        finished = sum(1 for node in nodes if node.refresh().is_terminated)
        return {
            **submitted,
            "worker_idle_mb": idle["rss_mb"],
            "worker_held_mb": held["rss_mb"],
            "live_when_held": held["live"],
            "cluster_mb": held["cluster_mb"],
            "kb_per_job": (held["rss_mb"] - idle["rss_mb"] - held["cluster_mb"]) * 1024 / n,
            # Python's allocator blocks in use (cluster included): what a job keeps, beside
            # the RSS that free but unreturned pages add.
            "blocks_per_job": (held["blocks"] - idle["blocks"]) / n,
            "queries_in_window": polled["queries"],
            "window_seconds": polled["seconds"],
            "ids_per_query": sorted(set(polled["sizes"])),
            "control_seconds": control,
            "end_seconds": ended["seconds"],
            "ended_per_second": (n - 1) / ended["seconds"],
            "worker_peak_mb": ended["peak_mb"],
            "terminated": finished,
        }
    finally:
        # Stopped already, unless the bench failed: then it says "not running", or stops it.
        subprocess.run([*daemon, "stop"], stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100_000, help="jobs (default 100000)")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per phase")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--backend", choices=["sqlite", "postgresql"], default="sqlite", help="the profile's"
    )
    parser.add_argument(
        "--submit-only",
        action="store_true",
        help="stop once all are submitted (the daemon taking them meanwhile)",
    )
    parser.add_argument(
        "--poll-interval", type=float, default=5.0, help="seconds between polls (default 5)"
    )
    args = parser.parse_args()
    print(f"machine: {describe()}", flush=True)
    postgresql = args.backend == "postgresql"
    figures = bench(args.n, args.timeout, args.poll_interval, postgresql, args.submit_only)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    f = figures
    storage = "PostgreSQL" if postgresql else "SQLite"
    print(f"{f['jobs']} jobs on one worker, dehydrated ({storage}, no broker)")
    print(
        f"  submitted in {f['submit_seconds']:.1f} s "
        f"({f['submit_cpu_ms_per_job']:.2f} ms of CPU a job)"
    )
    if args.submit_only:
        return
    print(
        f"  worker idle {f['worker_idle_mb']:.0f} MB; holding all {f['jobs']}: "
        f"{f['worker_held_mb']:.0f} MB, of which the fake cluster's jobs "
        f"{f['cluster_mb']:.0f} MB: {f['kb_per_job']:.2f} kB a job over idle "
        f"({f['blocks_per_job']:.0f} allocator blocks a job) "
        f"({f['live_when_held']} live)"
    )
    print(
        f"  polls in {f['window_seconds']:.0f} s: {f['queries_in_window']} scheduler "
        f"queries, of {', '.join(map(str, f['ids_per_query']))} job ids each"
    )
    control = ", ".join(f"{k} {v:.2f} s" for k, v in f["control_seconds"].items())
    print(f"  a sleeping job, from the command to its effect: {control}")
    print(
        f"  all finished at once: ended in {f['end_seconds']:.1f} s "
        f"({f['ended_per_second']:.1f} jobs/s), worker peak {f['worker_peak_mb']:.0f} MB; "
        f"{f['terminated']}/{f['jobs']} terminated"
    )


if __name__ == "__main__":
    main()
