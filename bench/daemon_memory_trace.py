#!/usr/bin/env python3
"""Where a waiting job's memory goes: tracemalloc of one worker holding N, then M, jobs.

Each run submits N ``core.shell`` jobs (as ``daemon_memory.py`` does: direct scheduler,
real ``sleep`` jobs) to a new profile with a broker, then runs a daemon worker in this
Python process under tracemalloc until every job waits on its scheduler job, and saves a
snapshot. The difference between the two runs, per job, is printed by the package that
allocated it (the innermost frame outside the standard library) and by the veglia line
under which it was allocated.

    python bench/daemon_memory_trace.py 100 300       # about 5 minutes
    python bench/daemon_memory_trace.py 100 300 --top 40

RSS is not comparable with ``daemon_memory.py``'s: tracemalloc's own records are in it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import daemon_memory
from machine import describe

FRAMES = 25


def snapshot(n: int, out: Path) -> None:
    """Run a worker holding ``n`` waiting jobs; save its tracemalloc snapshot to ``out``."""
    home = tempfile.mkdtemp(prefix="veglia-memory-trace-")
    os.environ["VEGLIA_HOME"] = home
    subprocess.run(
        [daemon_memory.VEGLIA, "presto", "--profile-name", daemon_memory.PROFILE, "--broker"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    daemon_memory._veglia("config", "set", "daemon.worker_prefetch", str(n + 10))
    import veglia
    from veglia import engine, orm
    from veglia.engine.daemon import DaemonFiles
    from veglia.engine.daemon.worker import Worker
    from veglia.entry_points import CalculationFactory

    profile = veglia.load_profile(daemon_memory.PROFILE)
    DaemonFiles(profile).worker_status(os.getpid()).parent.mkdir(parents=True, exist_ok=True)
    command = orm.Str(f"sleep {7200 + os.getpid() % 1000}.{n}")
    pks = [engine.submit(CalculationFactory("core.shell"), command=command).pk for _ in range(n)]
    gc.collect()
    tracemalloc.start(FRAMES)
    worker = Worker(profile)

    async def until_waiting() -> None:
        while daemon_memory._waiting(pks[0], pks[-1]) < n:
            await asyncio.sleep(2)
        await asyncio.sleep(8)  # a few polls with every job waiting
        gc.collect()
        tracemalloc.take_snapshot().dump(str(out))
        worker._stop.set()

    worker.loop.create_task(until_waiting())
    try:
        worker.run()
    finally:
        tracemalloc.stop()
        from veglia.orm.nodes import load_node

        for pk in pks:
            with contextlib.suppress(Exception):
                job_id = load_node(pk).job_id
                if job_id:
                    os.killpg(int(job_id), signal.SIGKILL)  # the job's bash and its sleep
        shutil.rmtree(home, ignore_errors=True)


def _where(frame: tracemalloc.Frame) -> str:
    name = frame.filename
    for cut in ("site-packages/", "/core/", "/plugins/"):
        if cut in name:
            return name.split(cut, 1)[1]
    return name


def report(first: Path, second: Path, n: int, m: int, top: int) -> None:
    before = tracemalloc.Snapshot.load(str(first))
    after = tracemalloc.Snapshot.load(str(second))
    diffs = after.compare_to(before, "traceback")
    jobs = m - n
    print(f"traced per job: {sum(d.size_diff for d in diffs) / jobs / 1024:.1f} kB")
    by_package: collections.Counter[str] = collections.Counter()
    by_line: collections.Counter[str] = collections.Counter()
    for diff in diffs:
        frames = list(reversed(diff.traceback))  # the allocating frame first
        package, line = "stdlib", "other"
        for frame in frames:
            if "site-packages/" in frame.filename:
                package = _where(frame).split("/")[0]
                break
            if "/core/" in frame.filename or "/plugins/" in frame.filename:
                package = f"{_where(frame)}:{frame.lineno}"
                break
        for frame in frames:
            if "/core/" in frame.filename or "/plugins/" in frame.filename:
                line = f"{_where(frame)}:{frame.lineno}"
                break
        by_package[package] += diff.size_diff
        by_line[line] += diff.size_diff
    for title, counter in (("by package", by_package), ("by veglia line", by_line)):
        print(f"\n{title} (bytes per job):")
        for key, size in counter.most_common(top):
            print(f"  {size / jobs:7.0f}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, help="waiting jobs of the first run")
    parser.add_argument("m", type=int, help="waiting jobs of the second run (more)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.child:
        print(f"machine: {describe()}")
    if args.child is not None:  # one run, in a fresh interpreter
        snapshot(args.n, args.child)
        os._exit(0)  # the worker's broker threads: no orderly shutdown needed
    folder = Path(tempfile.mkdtemp(prefix="veglia-memory-trace-"))
    try:
        for jobs in (args.n, args.m):
            subprocess.run(
                [sys.executable, __file__, str(jobs), "0", "--child", str(folder / f"{jobs}")],
                check=True,
            )
        report(folder / f"{args.n}", folder / f"{args.m}", args.n, args.m, args.top)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
