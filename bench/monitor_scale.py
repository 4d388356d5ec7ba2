#!/usr/bin/env python3
"""Do N monitored jobs on one SSH computer keep their monitors' interval?

Submits N long jobs (default 1000) to the loopback SSH computer of ``scripts/services``
(core.ssh + core.direct, poll interval 2 s), each with 2 monitors that read its output on
the batched path (``core.file_pattern`` on ``out.log``, ``core.stalled_output``), waits until
all run, then watches the one daemon worker and prints, per poll interval: the monitor calls
due and made, scheduler queries, batched file reads (remote commands), the connections
opened, the monitor cycle time (from a poll's answer to the end of the last job's monitors)
and the worker's CPU time per interval (utime + stime from /proc: wall-clock figures are
unreliable on a loaded machine).

    python bench/monitor_scale.py            # 1000 jobs x 2 monitors
    python bench/monitor_scale.py -n 50      # a smoke run
    python bench/monitor_scale.py --write-every 5   # jobs append a line every 5 s

Target (issue 16): at 1000 jobs x 2 monitors, >= 95% of due calls made, 1 scheduler query
per interval, 1 connection. Before the batched path a cycle took about 2.7 s: 748 of the
2000 due calls were made per interval, and 0.74 scheduler queries.

Where the time went (CPU, measured in process on the loaded 2-core machine, 1000 jobs):
- before: a monitor cycle cost 1.76 s of CPU (each file monitor an lstat and a read over
  SFTP, 2000 round trips on the one connection thread, and each job's monitor state written
  at every cycle); each poll also wrote every running job's elapsed time (1.2 ms of CPU a
  write: 1.2 s per poll). That is more than a 2 s interval holds.
- after: 0.45 s of CPU per monitor cycle (one remote python3 command reads all 2000 files'
  new bytes; states written only when they change), and a running job's clock alone is
  written every 30 s. What is left: the thread-pool hop per monitor call (~30% of the
  cycle), deep copies of node attributes, the JSON and base64 of the answer.
- Under a load average of 10-17 on 2 cores the worker gets about a quarter of a core and
  still falls behind (40% of due calls made at best here); the figure to compare there is
  the CPU per poll cycle this prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from machine import VEGLIA, bench_profile, describe, ssh_computer

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _command(write_every: float) -> str:
    if write_every > 0:
        return (
            f"echo started > out.log; while :; do sleep {write_every:g}; echo tick >> out.log; done"
        )
    return "echo started > out.log; exec sleep 100000"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--jobs", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument("--watch", type=float, default=30.0, help="Seconds to watch.")
    parser.add_argument(
        "--write-every", type=float, default=0, help="Jobs append a line every S seconds."
    )
    args = parser.parse_args()
    print(f"machine: {describe()}")
    nodes: list = []
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
            for _ in range(args.jobs):
                builder = shell.get_builder()
                builder.command = orm.Str(_command(args.write_every))
                builder.metadata.computer = "ssh"
                builder.monitors = {
                    "pattern": {
                        "entry_point": "core.file_pattern",
                        "kwargs": {"path": "out.log", "pattern": "NEVER MATCHED"},
                    },
                    "stalled": {
                        "entry_point": "core.stalled_output",
                        "kwargs": {"path": "out.log", "seconds": 1e9},
                    },
                }
                nodes.append(engine.submit(builder))
            print(f"{args.jobs} jobs submitted in {time.monotonic() - start:.0f} s", flush=True)
            while (
                sum(n.refresh().get_attribute("scheduler_state") == "running" for n in nodes)
                < args.jobs
            ):
                if time.monotonic() - start > 900:
                    raise SystemExit("the jobs did not all start within 15 minutes")
                time.sleep(2)
            print(f"{args.jobs} jobs running after {time.monotonic() - start:.0f} s", flush=True)
            files = DaemonFiles(profile)
            pid = files.read_status()["workers"][0]["pid"]

            def sample() -> tuple[dict, float]:
                time.sleep(1.1)  # a fresh status (written every second)
                return json.loads(files.worker_status(pid).read_text()), _cpu_seconds(pid)

            time.sleep(3 * args.poll_interval)  # the first cycles of the last jobs to start
            before, cpu_before = sample()
            time.sleep(args.watch)
            after, cpu_after = sample()
            _report(args, before, after, cpu_after - cpu_before)
        finally:
            # Before ssh_computer cancels the jobs: the daemon would see them end and fetch
            # their files, for nothing.
            subprocess.run([VEGLIA, "-p", "bench", "daemon", "stop"], stdout=subprocess.DEVNULL)


def _report(args: argparse.Namespace, before: dict, after: dict, cpu: float) -> None:
    seconds = after["time"] - before["time"]
    intervals = seconds / args.poll_interval

    def per_interval(key: str) -> float:
        return (after.get(key, 0) - before.get(key, 0)) / intervals

    due = 2 * args.jobs
    made = per_interval("monitor_calls")
    cycles = after.get("monitor_cycles", 0) - before.get("monitor_cycles", 0)
    cycle_time = after.get("monitor_cycle_seconds", 0) - before.get("monitor_cycle_seconds", 0)
    print(f"over {seconds:.0f} s ({intervals:.1f} intervals of {args.poll_interval:g} s):")
    print(f"  monitor calls per interval: {made:.0f} made of {due} due ({made / due:.1%})")
    print(f"  scheduler queries per interval: {per_interval('scheduler_queries'):.2f}")
    print(f"  batched file reads (remote commands) per interval: {per_interval('file_reads'):.2f}")
    print(f"  connections opened in all: {after['transport_opens']}")
    if cycles:
        print(f"  monitor cycle time: {cycle_time / cycles:.2f} s on average ({cycles} cycles)")
    polls = after["scheduler_queries"] - before["scheduler_queries"]
    print(
        f"  worker CPU time: {cpu / intervals:.2f} s per interval "
        f"({cpu / intervals / args.poll_interval:.0%} of one core), "
        f"{cpu / max(polls, 1):.2f} s per poll cycle ({polls} polls)"
    )


if __name__ == "__main__":
    main()
