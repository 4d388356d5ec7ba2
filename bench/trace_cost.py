"""What the ``core.trace`` sampler costs a job: CPU while it runs, time and programs at its end.

Runs real job scripts, as veglia writes them (``wrap_commands`` with the plugin's own
``job_script_wrap``), under bash on this machine, with the sampler and without it:

1. **CPU while a job runs.** A job that sleeps ``--seconds`` with the sampler every
   ``--interval`` seconds; the CPU its script used (bash, the sampler and the programs the
   sampler starts, from ``wait4``) minus the same script without the sampler, per sample, and
   as a share of one core at the default interval of 10 s.
2. **A short job.** ``--short`` jobs that run ``true``: wall time and CPU per job with and
   without the sampler, and the programs each starts (``strace -f -e execve``, when strace is
   installed) — a job that ends before its first sample must start none for the sampler.

The throughput figure (``bench/throughput.py`` with the sampler on and off) is in
docs/performance.md; this script is its smoke run's companion.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe

from veglia.engine.calcjob.job_script import JobScriptWrap, wrap_commands
from veglia.plugins.trace.hooks import job_script_wrap

DEFAULT_INTERVAL = 10.0


class _Computer:
    """The two properties the sampler's wrap reads."""

    def __init__(self, interval: float) -> None:
        self.properties = {"trace": True, "trace_interval": interval}

    def get_property(self, name: str) -> Any:
        return self.properties[name]


def script(command: str, interval: float | None) -> tuple[str, dict[str, str]]:
    """The job script and the files the upload puts beside it."""
    wraps: list[JobScriptWrap] = []
    if interval is not None:
        wrap = job_script_wrap(node=None, computer=_Computer(interval))
        assert wrap is not None
        wraps.append(wrap)
    files = {name: text for wrap in wraps for name, text in wrap.files.items()}
    return "\n".join(["#!/bin/bash", *wrap_commands([command], wraps)]) + "\n", files


def run(
    folder: Path, job: tuple[str, dict[str, str]], strace: bool = False
) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds of the script and all it started, programs started."""
    text, files = job
    (folder / "job.sh").write_text(text)
    for name, content in files.items():
        (folder / name).write_text(content)
    argv = ["bash", "job.sh"]
    if strace:
        argv = ["strace", "-f", "-qq", "-e", "trace=execve", "-o", "execs.txt", *argv]
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=folder, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the job script failed in {folder}")
    programs = 0
    if strace:
        lines = (folder / "execs.txt").read_text().splitlines()
        # The first execve is bash itself; a failed lookup along PATH is not a program run.
        programs = sum(1 for line in lines if "execve(" in line and "= 0" in line) - 1
    return wall, usage.ru_utime + usage.ru_stime, programs


def cpu_while_running(seconds: float, interval: float) -> None:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        _, with_sampler, _ = run(Path(a), script(f"sleep {seconds}", interval))
        _, without, _ = run(Path(b), script(f"sleep {seconds}", None))
        samples = _samples(Path(a))
    extra = max(0.0, with_sampler - without)
    per_sample = extra / max(samples, 1)
    print(
        f"running job: {samples} samples in {seconds:.0f} s at {interval:g} s: "
        f"{extra * 1000:.1f} ms CPU, {per_sample * 1000:.2f} ms a sample"
    )
    print(
        f"  at the default {DEFAULT_INTERVAL:g} s interval: "
        f"{100 * per_sample / DEFAULT_INTERVAL:.3f} % of one core (target < 1 %)"
    )


def _samples(folder: Path) -> int:
    series = folder / "_veglia_trace.series"
    if not series.exists():
        return 0
    return sum(1 for line in series.read_text().splitlines() if not line.startswith("#"))


def short_jobs(count: int) -> None:
    strace = shutil.which("strace") is not None
    results = {}
    for label, interval in (("without the sampler", None), ("with the sampler", DEFAULT_INTERVAL)):
        walls, cpus = [], []
        programs = 0
        for i in range(count):
            with tempfile.TemporaryDirectory() as folder:
                wall, cpu, _ = run(Path(folder), script("true", interval))
                walls.append(wall)
                cpus.append(cpu)
                if strace and i == 0:
                    _, _, programs = run(Path(folder), script("true", interval), strace=True)
        results[label] = (statistics.median(walls), statistics.mean(cpus), programs)
        shown = f", {programs} program(s) started besides the job's own" if strace else ""
        print(
            f"short job {label}: median {results[label][0] * 1000:.1f} ms wall, "
            f"{results[label][1] * 1000:.2f} ms CPU{shown}"
        )
    base, traced = results["without the sampler"], results["with the sampler"]
    print(
        f"  the sampler adds {1000 * (traced[0] - base[0]):.1f} ms wall and "
        f"{1000 * (traced[1] - base[1]):.2f} ms CPU to a job that ends before its first "
        f"sample; programs: {traced[2] - base[2]} more"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="the running job's length")
    parser.add_argument("--interval", type=float, default=1.0, help="its sampling interval")
    parser.add_argument("--short", type=int, default=100, help="how many short jobs")
    args = parser.parse_args()
    print(f"machine: {describe(f'bash {_bash_version()}')}")
    cpu_while_running(args.seconds, args.interval)
    short_jobs(args.short)


def _bash_version() -> str:
    out = subprocess.run(["bash", "-c", "echo $BASH_VERSION"], capture_output=True, text=True)
    return out.stdout.strip()


if __name__ == "__main__":
    main()
