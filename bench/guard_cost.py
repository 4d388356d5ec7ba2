"""What the ``core.guard`` watcher costs a job: CPU while it runs, time at its end.

Runs real job scripts, as veglia writes them (``wrap_commands`` with the plugin's own
``job_script_wrap``), under bash on this machine, with the guards of three built-in monitors
(``stalled_output``, ``file_pattern`` on a growing log, ``walltime_guard``) and without them:

1. **CPU while a job runs.** A job that writes a log line a second for ``--seconds`` with the
   watcher checking every ``--interval`` seconds, its heartbeat missing (the daemon away: every
   guard runs at every check, the most a watcher does); the CPU its script used (bash, the
   watcher and the programs it starts, from ``wait4``) minus the same script without guards,
   per check, and as a share of one core at the default interval of 30 s (target < 0.5 %).
2. **A short job.** ``--short`` jobs that run ``true``: wall time and CPU per job with and
   without the watcher.

The throughput figure (``bench/throughput.py`` with guards on and off) is for docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe

from veglia.engine.calcjob.job_script import JobScriptWrap, wrap_commands
from veglia.engine.calcjob.monitors import parse_monitors
from veglia.plugins.guard.hooks import LOG_FILE, job_script_wrap

DEFAULT_INTERVAL = 30.0
MONITORS = {
    "stalled": {
        "entry_point": "core.stalled_output",
        "kwargs": {"path": "out.log", "seconds": 600},
    },
    "pattern": {
        "entry_point": "core.file_pattern",
        "kwargs": {"path": "out.log", "pattern": r"NaN|diverged \d+"},
    },
    "time": {"entry_point": "core.walltime_guard"},
}


class _Node:
    """What the wrap reads of a job: its parsed monitors and options."""

    def __init__(self) -> None:
        self.options = {"max_wallclock_seconds": 86400}
        self.monitors = [spec.to_dict() for spec in parse_monitors(MONITORS, self)]

    def get_attribute(self, name: str) -> Any:
        return self.monitors if name == "monitors" else None


class _Computer:
    def __init__(self, interval: float, folder: Path) -> None:
        self.properties = {
            "guards": True,
            "guard_interval": interval,
            "guard_away_after": 300,
            "guard_grace": 30,
            "guard_heartbeat": str(folder / "no-heartbeat"),
        }

    def get_property(self, name: str) -> Any:
        return self.properties[name]


def script(command: str, interval: float | None, folder: Path) -> tuple[str, dict[str, str]]:
    """The job script and the files the upload puts beside it."""
    wraps: list[JobScriptWrap] = []
    if interval is not None:
        wrap = job_script_wrap(node=_Node(), computer=_Computer(interval, folder))
        assert wrap is not None
        wraps.append(wrap)
    files = {name: text for wrap in wraps for name, text in wrap.files.items()}
    return "\n".join(["#!/bin/bash", *wrap_commands([command], wraps)]) + "\n", files


def run(folder: Path, job: tuple[str, dict[str, str]]) -> tuple[float, float]:
    """Wall seconds and CPU seconds of the script and all it started."""
    text, files = job
    (folder / "job.sh").write_text(text)
    for name, content in files.items():
        (folder / name).write_text(content)
    start = time.perf_counter()
    process = subprocess.Popen(
        ["bash", "job.sh"], cwd=folder, stdout=subprocess.DEVNULL, start_new_session=True
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the job script failed in {folder}")
    return wall, usage.ru_utime + usage.ru_stime


def cpu_while_running(seconds: float, interval: float) -> None:
    # One simple command, as a job's command line is (a wrap's prefix goes in front of it).
    loop = f"for ((i = 0; i < {int(seconds)}; i++)); do echo step $i >> out.log; sleep 1; done"
    command = f"bash -c '{loop}'"
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        _, guarded = run(Path(a), script(command, interval, Path(a)))
        _, without = run(Path(b), script(command, None, Path(b)))
        stood_down = "stood down" in (Path(a) / LOG_FILE).read_text()
    checks = max(1, int(seconds / interval))
    extra = max(0.0, guarded - without)
    per_check = extra / checks
    print(
        f"running job: about {checks} checks of 3 guards in {seconds:.0f} s at {interval:g} s, "
        f"daemon away: {extra * 1000:.1f} ms CPU, {per_check * 1000:.2f} ms a check"
        f"{'' if stood_down else ' (the watcher did not stand down!)'}"
    )
    print(
        f"  at the default {DEFAULT_INTERVAL:g} s interval: "
        f"{100 * per_check / DEFAULT_INTERVAL:.4f} % of one core (target < 0.5 %)"
    )


def short_jobs(count: int) -> None:
    results = {}
    for label, interval in (("without guards", None), ("with guards", DEFAULT_INTERVAL)):
        walls, cpus = [], []
        for _ in range(count):
            with tempfile.TemporaryDirectory() as folder:
                wall, cpu = run(Path(folder), script("true", interval, Path(folder)))
                walls.append(wall)
                cpus.append(cpu)
        results[label] = (statistics.median(walls), statistics.mean(cpus))
        print(
            f"short job {label}: median {results[label][0] * 1000:.1f} ms wall, "
            f"{results[label][1] * 1000:.2f} ms CPU"
        )
    base, guarded = results["without guards"], results["with guards"]
    print(
        f"  the watcher adds {1000 * (guarded[0] - base[0]):.1f} ms wall and "
        f"{1000 * (guarded[1] - base[1]):.2f} ms CPU to a job that ends at once"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="the running job's length")
    parser.add_argument("--interval", type=float, default=1.0, help="its guards' interval")
    parser.add_argument("--short", type=int, default=50, help="how many short jobs")
    args = parser.parse_args()
    bash = subprocess.run(["bash", "-c", "echo $BASH_VERSION"], capture_output=True, text=True)
    print(f"machine: {describe(f'bash {bash.stdout.strip()}')}")
    cpu_while_running(args.seconds, args.interval)
    short_jobs(args.short)


if __name__ == "__main__":
    main()
