#!/usr/bin/env python3
"""Throughput of the daemon: N trivial calc jobs on localhost/direct with 2 workers.

Prints jobs per second, the median time from submission to the end of a job, and the peak
resident memory of the daemon workers. With ``--aiida`` (aiida-core installed in this venv)
the same workload runs through AiiDA in the same run, and the ratio is printed.

    python bench/throughput.py            # 200 jobs
    python bench/throughput.py -n 20      # a smoke run
    python bench/throughput.py --aiida
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VEGLIA = str(Path(sys.executable).parent / "veglia")


def peak_rss_mb(pid: int) -> float:
    """The peak resident memory of a process (VmHWM), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _veglia(*args: str) -> None:
    subprocess.run([VEGLIA, *args], check=True, stdout=subprocess.DEVNULL)


def bench_veglia(n: int, workers: int) -> dict[str, float]:
    home = tempfile.mkdtemp(prefix="veglia-bench-")
    os.environ["VEGLIA_HOME"] = home
    try:
        _veglia("presto", "--profile-name", "bench")
        _veglia("config", "set", "engine.poll_interval", "0.1")
        _veglia("daemon", "start", str(workers))
        import veglia
        from veglia import engine, orm
        from veglia.engine.daemon import DaemonFiles
        from veglia.entry_points import CalculationFactory

        profile = veglia.load_profile("bench")
        add = CalculationFactory("core.arithmetic.add")
        start = time.monotonic()
        submitted = {}
        nodes = []
        for i in range(n):
            node = engine.submit(add, x=orm.Int(i), y=orm.Int(1))
            submitted[node.pk] = time.monotonic()
            nodes.append(node)
        submit_seconds = time.monotonic() - start
        pending = {node.pk: node for node in nodes}
        latencies = []
        peak: dict[int, float] = {}
        files = DaemonFiles(profile)
        while pending:
            for worker in files.read_status().get("workers", []):
                peak[worker["pid"]] = max(peak.get(worker["pid"], 0), peak_rss_mb(worker["pid"]))
            for pk, node in list(pending.items()):
                if node.refresh().is_terminated:
                    latencies.append(time.monotonic() - submitted[pk])
                    del pending[pk]
            if time.monotonic() - start > 60 + n:
                raise SystemExit(f"veglia: {len(pending)} jobs did not finish in time")
            time.sleep(0.05)
        elapsed = time.monotonic() - start
        failed = [node.pk for node in nodes if not node.is_finished_ok]
        if failed:
            raise SystemExit(f"veglia: jobs {failed[:10]} did not finish ok")
        return {
            "jobs_per_s": n / elapsed,
            "median_latency_s": statistics.median(latencies),
            "submit_s": submit_seconds,
            "peak_rss_mb": max(peak.values(), default=0.0),
            "elapsed_s": elapsed,
        }
    finally:
        subprocess.run([VEGLIA, "-p", "bench", "daemon", "stop"], stdout=subprocess.DEVNULL)
        shutil.rmtree(home, ignore_errors=True)


def bench_aiida(n: int, workers: int) -> dict[str, float]:
    """The same workload through aiida-core: core.arithmetic.add, a presto profile."""
    home = tempfile.mkdtemp(prefix="aiida-bench-")
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "AIIDA_PATH": home, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    verdi = str(Path(sys.executable).parent / "verdi")
    script = f"""
import time, statistics
from aiida import load_profile, orm
from aiida.engine import submit
from aiida.plugins import CalculationFactory
load_profile()
code = orm.load_code('bash@localhost')
add = CalculationFactory('core.arithmetic.add')
start = time.monotonic()
nodes = []
for i in range({n}):
    builder = add.get_builder(); builder.code = code
    builder.x = orm.Int(i); builder.y = orm.Int(1)
    nodes.append((submit(builder), time.monotonic()))
lat = []
while len(lat) < {n}:
    lat = [time.monotonic() - t for node, t in nodes if node.is_terminated]
    time.sleep(0.1)
print(({n}) / (time.monotonic() - start), statistics.median(lat))
"""
    try:
        subprocess.run([verdi, "presto"], env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(
            [
                verdi,
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
            ],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(
            [
                verdi,
                "computer",
                "configure",
                "core.local",
                "localhost",
                "--safe-interval",
                "0",
                "-n",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run([verdi, "config", "set", "daemon.worker_process_slots", "1000"], env=env)
        subprocess.run([verdi, "daemon", "start", str(workers)], env=env, check=True)
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True
        ).stdout.split()
        return {"jobs_per_s": float(out[0]), "median_latency_s": float(out[1])}
    finally:
        subprocess.run([verdi, "daemon", "stop"], env=env, stdout=subprocess.DEVNULL)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--jobs", type=int, default=200)
    parser.add_argument("-w", "--workers", type=int, default=2)
    parser.add_argument("--aiida", action="store_true", help="Also run it through aiida-core.")
    args = parser.parse_args()
    result = bench_veglia(args.jobs, args.workers)
    print(
        f"veglia: {args.jobs} jobs, {args.workers} workers: {result['jobs_per_s']:.1f} jobs/s, "
        f"median latency {result['median_latency_s']:.2f} s, submit {result['submit_s']:.2f} s, "
        f"peak worker RSS {result['peak_rss_mb']:.0f} MB"
    )
    if args.aiida:
        import importlib.util

        if importlib.util.find_spec("aiida") is None:
            raise SystemExit("--aiida: aiida-core is not installed in this venv")
        theirs = bench_aiida(args.jobs, args.workers)
        print(
            f"aiida-core: {theirs['jobs_per_s']:.2f} jobs/s, median latency "
            f"{theirs['median_latency_s']:.2f} s"
        )
        print(f"ratio veglia/aiida: {result['jobs_per_s'] / theirs['jobs_per_s']:.1f}x")


if __name__ == "__main__":
    main()
