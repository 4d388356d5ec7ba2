#!/usr/bin/env python3
"""What N running jobs on one SSH computer cost: connections, scheduler queries, memory.

Submits N long ``sleep`` jobs (default 1000) to the loopback SSH computer of
``scripts/services`` (core.ssh + core.direct), waits until all run, then watches one daemon
worker for a while and prints connection opens, scheduler queries per poll interval, and
the worker's resident memory.

    python bench/poll_cost.py            # 1000 jobs
    python bench/poll_cost.py -n 50      # a smoke run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from machine import VEGLIA, bench_profile, describe, ssh_computer


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--jobs", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument("--watch", type=float, default=20.0, help="Seconds to watch.")
    parser.add_argument("--monitors", action="store_true", help="Attach 2 monitors to each job.")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    with bench_profile(), ssh_computer(args.poll_interval):
        try:
            import veglia
            from veglia import engine, orm
            from veglia.engine.daemon import DaemonFiles
            from veglia.entry_points import CalculationFactory

            profile = veglia.load_profile("bench")
            subprocess.run([VEGLIA, "daemon", "start", "1"], check=True, stdout=subprocess.DEVNULL)
            shell = CalculationFactory("core.shell")
            start = time.monotonic()
            nodes = []
            for _ in range(args.jobs):
                builder = shell.get_builder()
                builder.command = orm.Str("sleep 100000")
                builder.metadata.computer = "ssh"
                if args.monitors:
                    builder.monitors = {
                        "stalled": {
                            "entry_point": "core.stalled_output",
                            "kwargs": {"path": "never.txt", "seconds": 1e9},
                        },
                        "walltime": {"entry_point": "core.walltime_guard"},
                    }
                nodes.append(engine.submit(builder))
            while (
                sum(n.refresh().get_attribute("scheduler_state") == "running" for n in nodes)
                < args.jobs
            ):
                if time.monotonic() - start > 600:
                    raise SystemExit("the jobs did not all start within 10 minutes")
                time.sleep(1)
            print(f"{args.jobs} jobs running after {time.monotonic() - start:.0f} s")
            files = DaemonFiles(profile)
            pid = files.read_status()["workers"][0]["pid"]

            def sample() -> dict:
                time.sleep(1.1)
                return json.loads(files.worker_status(pid).read_text())

            before = sample()
            time.sleep(args.watch)
            after = sample()
            seconds = after["time"] - before["time"]
            queries = after["scheduler_queries"] - before["scheduler_queries"]
            print(
                f"over {seconds:.0f} s ({seconds / args.poll_interval:.1f} poll intervals): "
                f"{queries} scheduler queries = {queries * args.poll_interval / seconds:.2f} per "
                f"interval; connection opens in all: {after['transport_opens']}"
            )
            calls = after.get("monitor_calls", 0) - before.get("monitor_calls", 0)
            if args.monitors:
                print(
                    f"monitor calls: {calls} = {calls * args.poll_interval / seconds:.0f} per "
                    f"interval (at most {2 * args.jobs})"
                )
            print(
                f"worker RSS {_rss_mb(pid):.0f} MB (peak {_rss_mb(pid, 'VmHWM'):.0f} MB) with "
                f"{after['active']} active processes"
            )
        finally:
            # Before ssh_computer cancels the jobs: the daemon would see them end and fetch
            # their files, for nothing.
            subprocess.run([VEGLIA, "-p", "bench", "daemon", "stop"], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
