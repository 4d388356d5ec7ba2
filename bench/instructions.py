#!/usr/bin/env python3
"""CPU instructions a job costs, counted by valgrind's callgrind: a figure that does not
drift with the machine.

The machines this is developed on change speed by a third from one minute to the next, so
wall-clock and CPU-time figures of two runs compare only when the change is large.
Instruction counts repeat within about 0.5%: this bench is how a change of a few percent is
measured. It runs ``core.arithmetic.add`` jobs in one Python process (``engine.run``: the
process is created, uploaded, submitted to the direct scheduler, polled, retrieved and
parsed there, as a daemon worker would) or only submits them (``--submit``), on a fresh
``presto`` profile without a broker, under callgrind with instrumentation switched on after
a warm-up. The jobs' own programs (bash, time) are not counted; neither is waiting.

    python bench/instructions.py            # 20 jobs run in process
    python bench/instructions.py --submit   # 100 submissions
    python bench/instructions.py -n 5       # a smoke run

Seventh machine: 32.9-33.2 M instructions a job run in process, 4.7 M a submission. With
SQLAlchemy event listeners installed (as the throughput bench's probe had them), 36.3 M.
Eighth machine: 31.6 M a job; 31.0 M once a step's writes joined the commit of the state
change after it (instructions in the kernel, such as SQLite's writes to its WAL, are not
counted).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")

#: Run under callgrind: warm up, then count ``n`` jobs (argv: mode, n).
JOBS = """
import logging, os, subprocess, sys
import veglia
veglia.load_profile("bench")
logging.getLogger("veglia.engine").setLevel(logging.ERROR)  # "no daemon runs"
from veglia import engine, orm
from veglia.entry_points import CalculationFactory
add = CalculationFactory("core.arithmetic.add")
launch = engine.run if sys.argv[1] == "run" else engine.submit
for i in range(3):
    launch(add, x=orm.Int(i), y=orm.Int(1))
def instrument(on):
    subprocess.run(["callgrind_control", "-i", on, str(os.getpid())],
                   check=True, stdout=subprocess.DEVNULL)
instrument("on")
for i in range(int(sys.argv[2])):
    launch(add, x=orm.Int(i), y=orm.Int(1))
instrument("off")
"""


def count(mode: str, n: int) -> int:
    """Instructions for ``n`` jobs (``mode``: run or submit) on a fresh profile."""
    with bench_profile("veglia-instructions-") as home:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={home}/callgrind.out",
                sys.executable,
                "-c",
                JOBS,
                mode,
                str(n),
            ],
            cwd=home,
            capture_output=True,
            text=True,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"callgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--jobs", type=int, help="jobs (default 20, or 100 with --submit)")
    parser.add_argument("--submit", action="store_true", help="count submissions only")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind (with callgrind_control) is needed: apt-get install valgrind")
    mode = "submit" if args.submit else "run"
    n = args.jobs or (100 if args.submit else 20)
    total = count(mode, n)
    what = "submission" if args.submit else "job run in process"
    print(f"veglia: {total / n / 1e6:.2f} M instructions a {what} ({n} counted)")


if __name__ == "__main__":
    main()
