#!/usr/bin/env python3
"""What deciding queue moves costs a poll: once per job, then at every poll.

A job on a computer with queues and ``move_jobs`` on reads the history of its similar jobs
once (one indexed query, at most ``HISTORY_LIMIT`` rows); after that each poll only compares
its elapsed time with a deadline. This bench fills a profile with finished similar jobs and
times both, on the engine's own ``QueueMoves`` of stored job nodes (no scheduler runs).

    python bench/queue_move_cost.py               # 20 kinds of job x 500 finished each
    python bench/queue_move_cost.py -k 2 -s 50    # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")


class StoredJob:
    """What ``QueueMoves`` asks of its calc job: a stored node, its options and computer."""

    def __init__(self, node: Any, computer: Any) -> None:
        self.node = node
        self.options = dict(node.options or {})
        self.computer = computer
        self.reports: list[str] = []

    def report(self, line: str) -> None:
        self.reports.append(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", "--kinds", type=int, default=20, help="kinds of similar job")
    parser.add_argument("-s", "--similar", type=int, default=500, help="finished jobs per kind")
    parser.add_argument("--polls", type=int, default=20_000, help="polls timed once decided")
    args = parser.parse_args()
    print(f"machine: {describe('SQLite (WAL)')}")
    with bench_profile("veglia-bench-moves-", broker=False):
        import veglia
        from veglia import orm
        from veglia.engine.calcjob.queue_move import QueueMoves
        from veglia.orm.attributes import OPTIONS, SIMILARITY_KEY, STARTED_AT, USAGE
        from veglia.schedulers import JobInfo, JobState

        veglia.load_profile("bench")
        computer = orm.load_computer("localhost")
        computer.properties["queues"] = "short:time=1h; long:time=1d"
        computer.properties["move_jobs"] = True
        computer.save()
        start = time.monotonic()
        for kind in range(args.kinds):
            for n in range(args.similar):
                node = orm.CalcJobNode(process_type="core.shell")
                node.process_state = "finished"
                node.store()
                usage = {"runtime_seconds": 4000 + n % 60, "peak_memory_kb": 1024}
                node.set_attributes({SIMILARITY_KEY: f"kind-{kind}", USAGE: usage})
                node.set_exit(0, None)
        print(
            f"history: {args.kinds} kinds x {args.similar} finished jobs, stored in "
            f"{time.monotonic() - start:.1f} s"
        )
        jobs = []
        for kind in range(args.kinds):
            node = orm.CalcJobNode(process_type="core.shell")
            node.computer = computer
            node.store()
            options = {"queue_name": "short", "max_wallclock_seconds": 3600}
            node.set_attributes(
                {SIMILARITY_KEY: f"kind-{kind}", STARTED_AT: time.time(), OPTIONS: options}
            )
            jobs.append(StoredJob(node, computer))
        info = JobInfo(job_id="1", state=JobState.RUNNING, queue="short", wallclock_seconds=60)

        async def first_polls() -> list[float]:
            took = []
            for job in jobs:
                moves = QueueMoves(job)  # type: ignore[arg-type]
                job.moves = moves  # type: ignore[attr-defined]
                begin = time.perf_counter()
                await moves.consider(info)
                took.append(time.perf_counter() - begin)
            return took

        first = asyncio.run(first_polls())
        job = jobs[0]

        async def later_polls() -> float:
            begin = time.perf_counter()
            for _ in range(args.polls):
                await job.moves.consider(info)  # type: ignore[attr-defined]
            return time.perf_counter() - begin

        later = asyncio.run(later_polls())
        moves = job.moves  # type: ignore[attr-defined]
        # Similar jobs outlive the queue's hour: a deadline is set and checked at every poll.
        assert moves.deadline is not None and not job.reports, "the deadline path was not timed"
        print(
            f"first poll of a job (reads its queues and {min(args.similar, 500)} similar jobs): "
            f"median {statistics.median(first) * 1000:.2f} ms, max {max(first) * 1000:.2f} ms"
        )
        print(
            f"each later poll (running, its deadline checked): "
            f"{later / args.polls * 1e6:.2f} us a job"
        )


if __name__ == "__main__":
    main()
