#!/usr/bin/env python3
"""Memory of a worker retrieving a large output: one job writing a 2 GB file.

A ``core.shell`` job on localhost (direct scheduler, real job) writes SIZE bytes of random
data (``head -c SIZE /dev/urandom``) to ``big.bin`` in its work dir, and the file is
retrieved (``outputs``: the parser makes it an output too). A daemon with one worker runs
it, on a fresh profile of each storage (SQLite, PostgreSQL), with the profile's folder
repository (or with ``--repository database`` the database's). The bench prints the
worker's peak RSS increase over its RSS before the job (``VmHWM``, the kernel's high-water
mark, less ``VmRSS`` after a small warm-up job), and the retrieve time: from the job's end
(the time it wrote after the file) to the process's end, so it includes the copy from the
work dir, the hash and copy into the repository, the parse and the last commit (and up to a
poll interval, ``engine.poll_interval`` 0.2 s here).

    python bench/retrieve_memory.py                         # 2 GB, SQLite and PostgreSQL
    python bench/retrieve_memory.py --size 20M --storage sqlite   # a smoke run

Target (issue #29): the worker under +100 MB RSS while a 2 GB output is retrieved.
Figures (2 CPUs, AMD EPYC, 24 GiB, Python 3.11, load 5-6; before -> after): SQLite +2,049.6
MB in 14.0 s -> +3.6 MB in 7.8 s; PostgreSQL +2,049.2 MB in 21.3 s -> +3.0 MB in 4.2 s. More in
docs/performance.md, "Retrieving large outputs". PostgreSQL with the database repository
(load 1.5): +13.2 MB in 18.3 s.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")
PROFILE = "retrieve"
#: What the worker may grow by while it retrieves (issue #29).
TARGET_MB = 100


def status_mb(pid: int, field: str) -> float:
    """A memory figure of ``/proc/PID/status`` (``VmRSS``, ``VmHWM``), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"{field}:\s+(\d+)", status)
    return int(match.group(1)) / 1024 if match else 0.0


def parse_size(text: str) -> int:
    """``2G``, ``20M``, ``4096`` -> bytes."""
    match = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 2G or 20M")
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]


def status_line(path: str, field: str) -> float:
    match = re.search(rf"{field}:\s+(\d+)", Path(path).read_text())
    return float(match.group(1)) if match else 0.0


def _veglia(*args: str) -> None:
    subprocess.run([VEGLIA, "-p", PROFILE, *args], check=True, stdout=subprocess.DEVNULL)


def _worker_pid() -> int:
    import veglia
    from veglia.engine.daemon import DaemonFiles

    files = DaemonFiles(veglia.load_profile(PROFILE))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = files.read_status()
        workers = status.get("workers") or []
        if workers and files.worker_status(workers[0]["pid"]).exists():
            return int(workers[0]["pid"])
        time.sleep(0.2)
    raise SystemExit("the daemon's worker did not start within 60 s")


def _run(command: str, timeout: float):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str(command)
    builder.outputs = orm.List(["big.bin"])
    node = engine.submit(builder)
    deadline = time.monotonic() + timeout
    while not node.refresh().is_terminated:
        if time.monotonic() > deadline:
            raise SystemExit(f"the job did not end within {timeout:.0f} s")
        time.sleep(0.1)
    if not node.is_finished_ok:
        raise SystemExit(f"the job failed: {node.exit_status} {node.exit_message}")
    return node


def bench(
    storage: str, repository: str, size: int, broker: bool, timeout: float
) -> dict[str, float]:
    options = {
        "storage.repository": repository,
        "engine.poll_interval": "0.2",
        "transport.safe_interval": "0",
    }
    postgresql = storage == "postgresql"
    with bench_profile(
        "veglia-retrieve-", name=PROFILE, broker=broker, postgresql=postgresql, options=options
    ):
        return _measure(size, broker, timeout)


def _measure(size: int, broker: bool, timeout: float) -> dict[str, float]:
    try:
        _veglia("daemon", "start", "1")
        worker = _worker_pid()
        # A first small job: the worker imports and warms up what a job needs.
        _run("head -c 1M /dev/urandom > big.bin", timeout)
        time.sleep(1)
        before = status_mb(worker, "VmRSS")
        # The job's own end time, in its work dir: written right after the file.
        node = _run(f"head -c {size} /dev/urandom > big.bin && date +%s.%N > ended.txt", timeout)
        peak = status_mb(worker, "VmHWM")
        from veglia.storage.times import as_utc

        ended = float(Path(node.remote_workdir, "ended.txt").read_text())
        stored = node.outputs.retrieved.list_objects()
        if not any(r.path == "big.bin" and r.size == size for r in stored):
            raise SystemExit(f"big.bin was not stored whole: {stored}")
        figures = {
            "rss_before_mb": before,
            "peak_increase_mb": peak - before,
            "retrieve_s": as_utc(node.mtime).timestamp() - ended,
        }
        shutil.rmtree(node.remote_workdir, ignore_errors=True)
        return figures
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _veglia("daemon", "stop")
        if broker:
            with contextlib.suppress(Exception):
                from veglia.engine.daemon.broker_tasks import delete_broker_queues
                from veglia.manage import get_profile

                delete_broker_queues(get_profile())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=2 * 2**30, help="output (2G)")
    parser.add_argument(
        "--storage", choices=["sqlite", "postgresql"], action="append", help="default: both"
    )
    parser.add_argument(
        "--repository",
        choices=["folder", "database"],
        default="folder",
        help="where file contents go (storage.repository; default folder)",
    )
    parser.add_argument("--no-broker", action="store_true", help="a profile without RabbitMQ")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a job may take")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    for storage in args.storage or ["sqlite", "postgresql"]:
        figures = bench(storage, args.repository, args.size, not args.no_broker, args.timeout)
        verdict = "under" if figures["peak_increase_mb"] < TARGET_MB else "OVER"
        seconds = figures["retrieve_s"]
        print(
            f"{storage}, {args.repository} repository, {args.size / 2**20:,.0f} MB output: "
            f"worker RSS {figures['rss_before_mb']:.1f} MB before, "
            f"peak +{figures['peak_increase_mb']:.1f} MB ({verdict} the +{TARGET_MB} MB "
            f"target); retrieved and stored in {seconds:.1f} s "
            f"({args.size / 2**20 / max(seconds, 0.001):.0f} MB/s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
