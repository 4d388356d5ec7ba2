#!/usr/bin/env python3
"""Tower reporting: the cost of queueing a task event, and how fast the outbox drains.

Queues ``-n`` task records (each as submitted, running and ended, as a job does) over
``-r`` runs in a fresh SQLite profile, then sends them to the tests' validating loopback
Seqera Platform and prints: queueing time per event, tasks sent per second, requests
made, and whether the Platform refused or dropped anything.

    python bench/tower_send.py [-n 1000] [-r 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from machine import bench_profile, describe

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="tasks")
    parser.add_argument("-r", type=int, default=10, help="runs they are spread over")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    # Lazy: the tests' helpers (tests/ is put on sys.path above).
    from veglia_fixtures.profiles import FAST_OPTIONS
    from veglia_fixtures.seqera_platform import SeqeraPlatform

    platform = SeqeraPlatform("bench-token", workspace_id="7")
    options = {
        **FAST_OPTIONS,
        "tower.enabled": "yes",
        "tower.endpoint": platform.url,
        "tower.access_token": "bench-token",
        "tower.workspace_id": "7",
    }
    with bench_profile("veglia-tower-bench-", broker=False, options=options):
        send(args, platform)


def send(args: argparse.Namespace, platform: Any) -> None:
    # Lazy: veglia is imported once VEGLIA_HOME names the bench's home.
    import veglia
    from veglia.plugins.tower import outbox, payload
    from veglia.plugins.tower.sender import TowerSender

    profile = veglia.load_profile("bench")
    gpu = json.loads((ROOT / "tests" / "data" / "fusion" / "trace.json").read_text())["gpu"]
    now = int(time.time() * 1000)
    meta = {"projectName": "bench", "userName": "bench", "commandLine": "bench/tower_send.py"}
    start = time.perf_counter()
    for task_id in range(1, args.n + 1):
        run = f"bench-run-{task_id % args.r}"
        record = {
            "task_id": task_id,
            "name": f"task {task_id}",
            "process": "core.shell",
            "hash": f"{task_id:034x}",
            "submit": now,
            "cpus": 1,
            "gpu_metrics": gpu,
        }
        for kind, status in (("submitted", "SUBMITTED"), ("running", "RUNNING"), ("task", "")):
            data = {**record, "status": status or "COMPLETED", "start": now + 1000}
            if kind == "task":
                data.update(complete=now + 5000, realtime=4000, pcpu=99.0, peak_rss=1 << 27)
            outbox.enqueue(run, kind, task_id, 1, payload.task(data), meta)
    events = 3 * args.n
    queued = time.perf_counter() - start
    for r in range(args.r):
        outbox.enqueue(f"bench-run-{r}", "complete", 0, 1, {})

    sender = TowerSender(profile)
    start = time.perf_counter()
    while outbox.status_counts()["pending"]:
        report = sender.send_pending()
        if report.errors or report.paused or report.refused:
            raise SystemExit(f"not delivered: {report}")
    sent = time.perf_counter() - start
    saved = len(platform.tasks())
    platform.close()
    print(f"queueing:  {1000 * queued / events:.2f} ms per task event ({events} events)")
    print(f"sending:   {args.n / sent:.0f} tasks/s ({args.n} tasks, {args.r} runs, {sent:.2f} s)")
    print(f"requests:  {len(platform.requests)} (progress: {len(platform.calls('progress'))})")
    print(
        f"platform:  {saved} tasks saved, {len(platform.refusals)} refused, "
        f"{len(platform.dropped)} dropped, {len(platform.ignored)} unknown keys"
    )
    if saved != args.n or platform.refusals or platform.dropped or platform.ignored:
        raise SystemExit("the loopback Platform did not take everything")


if __name__ == "__main__":
    main()
