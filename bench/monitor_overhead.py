#!/usr/bin/env python3
"""The engine's cost per monitor call, beyond the monitor's own work.

Runs one cycle of N jobs with 2 trivial monitors each (a monitor that does nothing) on the
local transport, as the engine does after a poll, and prints the time per monitor call.

    python bench/monitor_overhead.py            # 1000 jobs x 2 monitors
    python bench/monitor_overhead.py -n 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--jobs", type=int, default=1000)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    with bench_profile(broker=False):
        import veglia
        from veglia import orm
        from veglia.engine.calcjob.monitor_runner import MonitorRunner
        from veglia.engine.runner import get_runner
        from veglia.entry_points import CalculationFactory

        veglia.load_profile("bench")
        runner = get_runner()
        shell = CalculationFactory("core.shell")
        monitors = {
            "a": {
                "entry_point": "core.stalled_output",
                "kwargs": {"path": "missing.txt", "seconds": 1e9},
            },
            "b": {"entry_point": "core.walltime_guard"},
        }
        processes = [
            runner.instantiate(shell, {"command": orm.Str("true"), "monitors": monitors})
            for _ in range(args.jobs)
        ]
        computer = orm.load_computer("localhost")

        async def cycle() -> float:
            async with runner.lease_transport(computer) as lease:
                start = time.perf_counter()
                for process in processes:
                    await MonitorRunner(process).run_cycle(lease)
                return time.perf_counter() - start

        elapsed = runner.loop.run_until_complete(cycle())
        calls = 2 * args.jobs
        # The monitors' own work: the same calls made directly, without the engine.
        from veglia.monitors.files import stalled_output
        from veglia.monitors.walltime import walltime_guard

        node = processes[0].node
        with computer.get_transport() as transport:
            transport.cwd = "/tmp"
            start = time.perf_counter()
            for _ in range(args.jobs):
                stalled_output(node, transport, "missing.txt", 1e9, {})
                walltime_guard(node, transport)
            own = time.perf_counter() - start
        print(
            f"{args.jobs} jobs x 2 monitors: one cycle {elapsed:.2f} s, "
            f"{elapsed / calls * 1000:.2f} ms per call, of which the monitors' own work "
            f"{own / calls * 1000:.2f} ms: engine overhead "
            f"{(elapsed - own) / calls * 1000:.2f} ms per call"
        )


if __name__ == "__main__":
    main()
