#!/usr/bin/env python3
"""What workflows cost the daemon: P pipelines of S one-after-another calc jobs each, on
localhost/direct with 2 workers, against the same number of plain jobs submitted at once.

Prints the throughput of pipeline steps against plain jobs, the time a step adds over a
job when one pipeline runs alone (the workflow learning that its step ended, then taking
its next step), the database queries made to learn that steps ended, and the peak worker
memory.

    python bench/pipeline_overhead.py              # 20 pipelines x 10 steps
    python bench/pipeline_overhead.py -p 4 -s 3    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from machine import bench_profile, describe  # noqa: E402
from throughput import peak_rss_mb  # noqa: E402 - beside this script

VEGLIA = str(Path(sys.executable).parent / "veglia")


def _veglia(*args: str) -> None:
    subprocess.run([VEGLIA, *args], check=True, stdout=subprocess.DEVNULL)


def _wait(nodes: list, files, peak: dict[int, float], limit: float) -> float:
    start = time.monotonic()
    pending = list(nodes)
    while pending:
        for worker in files.read_status().get("workers", []):
            peak[worker["pid"]] = max(peak.get(worker["pid"], 0), peak_rss_mb(worker["pid"]))
        pending = [n for n in pending if not n.refresh().is_terminated]
        if time.monotonic() - start > limit:
            raise SystemExit(f"{len(pending)} processes did not finish in {limit:.0f} s")
        time.sleep(0.05)
    failed = [n.pk for n in nodes if not n.is_finished_ok]
    if failed:
        raise SystemExit(f"processes {failed[:10]} did not finish ok")
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--pipelines", type=int, default=20)
    parser.add_argument("-s", "--steps", type=int, default=10)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    os.environ["PYTHONPATH"] = str(HERE)  # the workers import bench_workflows
    sys.path.insert(0, str(HERE))
    with bench_profile(options={"engine.poll_interval": "0.1"}):
        try:
            _veglia("daemon", "start", "2")
            import veglia
            from bench_workflows import AddChain, AddJob
            from veglia import engine, orm
            from veglia.engine.daemon import DaemonFiles

            profile = veglia.load_profile("bench")
            files = DaemonFiles(profile)
            peak: dict[int, float] = {}
            total = args.pipelines * args.steps
            limit = 120 + 2 * total

            plain = [engine.submit(AddJob, x=orm.Int(i), y=orm.Int(1)) for i in range(total)]
            plain_s = _wait(plain, files, peak, limit)
            chains = [
                engine.submit(AddChain, steps=orm.Int(args.steps)) for _ in range(args.pipelines)
            ]
            chain_s = _wait(chains, files, peak, limit)
            assert all(c.outputs.sum.value == args.steps for c in chains)
            # Alone: one job, then one pipeline, so the time a step adds is not queueing.
            single = [_wait([engine.submit(AddJob, x=orm.Int(1), y=orm.Int(1))], files, peak, 60)]
            single += [_wait([engine.submit(AddJob, x=orm.Int(1), y=orm.Int(1))], files, peak, 60)]
            alone = _wait([engine.submit(AddChain, steps=orm.Int(args.steps))], files, peak, limit)
            queries = sum(
                json.loads(p.read_text()).get("child_queries", 0)
                for p in files.folder.glob("worker-*.json")
            )
            job_s = min(single)
            print(f"{args.pipelines} pipelines x {args.steps} steps, 2 workers, localhost/direct")
            print(f"plain jobs:     {total} in {plain_s:.1f} s = {total / plain_s:.1f} jobs/s")
            print(f"pipeline steps: {total} in {chain_s:.1f} s = {total / chain_s:.1f} steps/s")
            print(f"throughput of steps / of plain jobs: {plain_s / chain_s:.0%}")
            print(
                f"one job alone: {job_s * 1000:.0f} ms; one pipeline alone: "
                f"{alone / args.steps * 1000:.0f} ms per step, "
                f"{(alone / args.steps - job_s) * 1000:.0f} ms more than a job"
            )
            print(f"queries to learn that steps ended: {queries}")
            print(f"peak worker RSS: {max(peak.values(), default=0):.0f} MB")
        finally:
            subprocess.run([VEGLIA, "-p", "bench", "daemon", "stop"], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
