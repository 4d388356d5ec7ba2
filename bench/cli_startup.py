#!/usr/bin/env python3
"""How long the CLI takes to answer: ``veglia`` against ``verdi`` (aiida-core), run whole.

Times ``--version``, ``--help`` and ``process list`` (on an empty profile, and on one filled
with about 10,000 calc jobs by ``db_fill.py``; SQLite, no broker) over repeated runs, with
hyperfine when it is installed, else a loop printing the best and median wall time and the
median CPU time (user + system of the command). The same commands run through ``verdi``
when aiida-core is found (``--verdi PATH``; else ``verdi`` on PATH, else
/work/aiida-venv/bin/verdi), on an empty profile of its own made by ``verdi presto``, and
the ratio is printed; without aiida-core the comparison is skipped, and said so.

    python bench/cli_startup.py              # 10 runs each, 60,000 nodes in the filled profile
    python bench/cli_startup.py -r 3 -n 3000 # a smoke run

Figures of one run (-r 10, 10,000 processes in the filled profile; a quiet 2-core machine
whose speed drifted by up to a factor of two over minutes), in s:

    command                          veglia wall best / CPU   verdi 2.9.4 wall best / CPU
    --version                            0.056 / 0.059             0.169 / 0.185
    --help                               0.130 / 0.148             0.192 / 0.254
    process list (empty profile)         0.334 / 0.369             1.635 / 1.856
    process list -a (empty profile)      0.320 / 0.361             1.557 / 1.808
    process list (10,000 processes)      0.340 / 0.357                 -
    process list -a -l 50 (same)         0.366 / 0.403                 -

``process list`` on the filled profile, the code before (5cada9e) and after, run in turn
15 times each: best 0.49 -> 0.32 s, median 0.57 -> 0.38 s. Where it went: SQLAlchemy's ORM
and the declarative mapping of the models (about a quarter: the command now reads through
Core tables, ``veglia.storage.tables``, and imports no ``sqlalchemy.orm``), the PostgreSQL
dialect that the JSONB column type imported on SQLite too (30 ms), asyncio for a broker
check the command does not make, and rich's measuring of every table cell (a plain layout
gives the same text). What is left is start-up: Python, click, SQLAlchemy Core (about
0.15 s), rich's console, the plugin manager; the query itself takes milliseconds. This
environment sets PYTHONDONTWRITEBYTECODE, so veglia's own modules are compiled at every
start: the figures include that.

``--help`` took 0.82 s of CPU before an earlier commit: it loads every plugin's hook
module, and Fusion's and Tower's imported the ORM and SQLAlchemy at the top.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")
AIIDA_VENV_VERDI = Path("/work/aiida-venv/bin/verdi")


def find_verdi(given: str | None) -> str | None:
    if given:
        return given if Path(given).exists() or shutil.which(given) else None
    on_path = shutil.which("verdi")
    if on_path:
        return on_path
    return str(AIIDA_VENV_VERDI) if AIIDA_VENV_VERDI.exists() else None


def loop_time(command: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    """Best and median wall time and median CPU time of ``command`` over ``runs`` runs."""
    subprocess.run(command, env=env, check=True, capture_output=True)  # warm the file cache
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {"best": min(walls), "median": statistics.median(walls), "cpu": statistics.median(cpus)}


def hyperfine_time(command: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            ["hyperfine", "-N", "-w", "1", "-r", str(runs), "--export-json", out.name,
             " ".join(command)],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        result = json.loads(Path(out.name).read_text())["results"][0]
    return {
        "best": result["min"],
        "median": result["median"],
        "cpu": result["user"] + result["system"],
    }


def veglia_homes(nodes: int, stack: contextlib.ExitStack) -> dict[str, dict[str, str]]:
    """An empty and a filled veglia home, as environments to run the CLI in; removed when
    ``stack`` closes."""
    homes = {}
    for name in ("empty", "filled"):
        home = stack.enter_context(bench_profile(f"veglia-startup-{name}-", broker=False))
        homes[name] = {**os.environ, "VEGLIA_HOME": str(home)}
    filled = homes["filled"]["VEGLIA_HOME"]
    fill = (
        "import sys; sys.path.insert(0, sys.argv[1]); import veglia; from db_fill import Filler;"
        "from veglia.manage import get_storage; veglia.load_profile('bench');"
        "print(Filler(get_storage().engine).fill(int(sys.argv[2])))"
    )
    out = subprocess.run(
        [sys.executable, "-c", fill, str(Path(__file__).parent), str(nodes)],
        env=homes["filled"], check=True, capture_output=True, text=True,
    )  # fmt: skip
    print(f"filled profile ({filled}): {out.stdout.strip()}")
    return homes


def verdi_home(verdi: str) -> dict[str, str] | None:
    """An AiiDA home with an empty ``verdi presto`` profile; None when it cannot be made."""
    home = tempfile.mkdtemp(prefix="aiida-startup-")
    env = {**os.environ, "AIIDA_PATH": home}
    made = subprocess.run(
        [verdi, "presto", "--profile-name", "bench"], env=env, capture_output=True, text=True
    )
    if made.returncode != 0:
        print(f"verdi presto failed, so no `verdi process list`: {made.stderr.strip()[-300:]}")
        return None
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-r", "--runs", type=int, default=10)
    parser.add_argument(
        "-n", "--nodes", type=int, default=60_000, help="Nodes in the filled profile."
    )
    parser.add_argument("--verdi", help="The verdi to compare with.")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    timer = hyperfine_time if shutil.which("hyperfine") else loop_time
    print(f"timing with {'hyperfine' if timer is hyperfine_time else 'a loop'}, {args.runs} runs")
    with contextlib.ExitStack() as stack:
        homes = veglia_homes(args.nodes, stack)
        verdi = find_verdi(args.verdi)
        aiida_env = verdi_home(verdi) if verdi else None
        cases = [
            ("--version", ["--version"], "empty"),
            ("--help", ["--help"], "empty"),
            ("process list (empty profile)", ["process", "list"], "empty"),
            ("process list -a (empty profile)", ["process", "list", "-a"], "empty"),
            ("process list (filled profile)", ["process", "list"], "filled"),
            ("process list -a -l 50 (filled)", ["process", "list", "-a", "-l", "50"], "filled"),
        ]
        print(f"\n{'command':34} {'veglia best':>11} {'median':>7} {'CPU':>6}   "
              f"{'verdi best':>10} {'median':>7} {'CPU':>6}  {'ratio':>10} {'CPU':>6}")  # fmt: skip
        try:
            for name, argv, home in cases:
                mine = timer([VEGLIA, *argv], homes[home], args.runs)
                line = f"{name:34} {mine['best']:11.3f} {mine['median']:7.3f} {mine['cpu']:6.3f}   "
                theirs = None
                if verdi and (aiida_env or argv[0].startswith("--")) and home == "empty":
                    env = aiida_env or dict(os.environ)
                    theirs = timer([verdi, *argv], env, args.runs)
                if theirs:
                    ratio, cpu_ratio = theirs["best"] / mine["best"], theirs["cpu"] / mine["cpu"]
                    line += (f"{theirs['best']:10.3f} {theirs['median']:7.3f} {theirs['cpu']:6.3f}"
                             f"  {ratio:9.1f}x {cpu_ratio:5.1f}x")  # fmt: skip
                else:
                    line += f"{'-':>10} {'-':>7} {'-':>6}  {'-':>10} {'-':>6}"
                print(line)
            if not verdi:
                print("\naiida-core not found (--verdi, verdi on PATH, /work/aiida-venv): "
                      "the comparison with verdi was skipped.")  # fmt: skip
            elif not aiida_env:
                print("\nverdi has no profile here: only --version and --help were compared.")
            else:
                print(
                    "\nverdi process list ran on an empty profile only (no filled AiiDA profile)."
                )
        finally:
            if aiida_env:
                shutil.rmtree(aiida_env["AIIDA_PATH"], ignore_errors=True)


if __name__ == "__main__":
    main()
