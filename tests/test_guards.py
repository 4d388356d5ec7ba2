"""Monitor guards (issue #32): the watcher ``core.guard`` puts beside a job, run as a job
script runs it, under bash in a work directory, with no daemon and no batch system. The
heartbeat file stands for the daemon: fresh, it is heard from; missing, it is away."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from veglia.engine.calcjob.job_script import put_files, wrap_commands, wraps_for
from veglia.engine.calcjob.monitors import MonitorError, load_monitor, parse_monitors
from veglia.orm.computers import plugin_computer_properties
from veglia.plugins.guard.hooks import LOG_FILE, RECORD_FILE, RUNNER_FILE, job_script_wrap
from veglia.testing import FakeTransport

INTERVAL = 1


class Node:
    """What the wrap reads of a job: its parsed monitors and its options."""

    def __init__(self, monitors: dict[str, Any], **options: Any) -> None:
        self.monitors = [spec.to_dict() for spec in parse_monitors(monitors, self)]
        self.options = options

    def get_attribute(self, name: str) -> Any:
        return self.monitors if name == "monitors" else None


class Computer:
    def __init__(self, folder: Path, **properties: Any) -> None:
        self.properties = {
            "guards": True,
            "guard_interval": INTERVAL,
            "guard_away_after": 300,
            "guard_heartbeat": str(folder / "heartbeat"),
            **properties,
        }

    def get_property(self, name: str) -> Any:
        """Ours, else the plugin's default (every plugin wraps the script in wraps_for)."""
        if name in self.properties:
            return self.properties[name]
        return plugin_computer_properties()[name].default


def write_job(folder: Path, commands: list[str], node: Node, **properties: Any) -> None:
    wrap = job_script_wrap(node=node, computer=Computer(folder, **properties))
    assert wrap is not None
    put_files([wrap], folder)
    (folder / "job.sh").write_text("\n".join(["#!/bin/bash", *wrap_commands(commands, [wrap])]))


def group_members(pgid: int, zombies: bool = True) -> list[int]:
    """The processes left in a process group (the job's, led by its shell)."""
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and (zombies or fields[0] != "Z"):
            left.append(int(stat.parent.name))
    return left


def run_job(
    folder: Path, timeout: float = 30, zombies: bool = True, env: dict[str, str] | None = None
) -> tuple[int, float]:
    """Run job.sh as the direct scheduler does (leading its own process group), with these
    ``env`` variables more; its exit status and how long it ran. Nothing of it may be left
    behind."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_", "LSB_"))},
        **(env or {}),
    }
    start = time.monotonic()
    job = subprocess.Popen(["bash", "job.sh"], cwd=folder, env=env, start_new_session=True)
    try:
        status = job.wait(timeout=timeout)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, 9)
    took = time.monotonic() - start
    deadline = time.monotonic() + 2
    while group_members(job.pid, zombies) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(job.pid, zombies) == []
    return status, took


def record(folder: Path) -> dict[str, Any]:
    return json.loads((folder / RECORD_FILE).read_text())


def test_a_stalled_file_stops_the_job_while_the_daemon_is_away(tmp_path: Path) -> None:
    node = Node(
        {
            "stuck": {
                "entry_point": "core.stalled_output",
                "kwargs": {"path": "out.log", "seconds": 2},
            }
        }
    )
    write_job(tmp_path, ["echo step > out.log", "sleep 600"], node)
    status, took = run_job(tmp_path)
    assert status == 143  # TERM
    assert took < 2 + 2 * INTERVAL + 1
    got = record(tmp_path)
    assert got.pop("at") == pytest.approx(time.time(), abs=took + 2)
    assert got == {
        "version": 1,
        "monitor": "stuck",
        "entry_point": "core.stalled_output",
        "message": got["message"],
        "evidence": got["message"],
        "daemon_heard": None,
        "daemon_away": True,
    }
    assert got["message"] in (
        "out.log stayed at 5 bytes for 2 s",
        "out.log stayed at 5 bytes for 3 s",
    )
    assert not (tmp_path / f"{RECORD_FILE}.tmp").exists()
    assert "guard stuck stopped the job (daemon away: true)" in (tmp_path / LOG_FILE).read_text()


@pytest.mark.parametrize(
    ("variable", "command"),
    [("SLURM_JOB_ID", "scancel"), ("PBS_JOBID", "qdel"), ("LSB_JOBID", "bkill")],
)
def test_a_stop_asks_the_job_s_batch_system_to_end_it(
    tmp_path: Path, variable: str, command: str
) -> None:
    """The batch system the job's environment names gets its cancel command with the job's
    id. No PBS or LSF here: each command is a stand-in on PATH that writes down how it was
    called (SLURM's real scancel ends a guarded job in test_guard_daemon)."""
    shims, calls = tmp_path / "bin", tmp_path / "calls"
    shims.mkdir()
    for name in ("scancel", "qdel", "bkill"):
        (shims / name).write_text(f'#!/bin/bash\necho "{name} $*" >> {calls}\n')
        (shims / name).chmod(0o755)
    job = tmp_path / "job"
    job.mkdir()
    stalled = {"entry_point": "core.stalled_output", "kwargs": {"path": "out.log", "seconds": 1}}
    write_job(job, ["sleep 600"], Node({"stuck": stalled}))
    status, _ = run_job(job, env={variable: "4242.head", "PATH": f"{shims}:{os.environ['PATH']}"})
    assert status == 143
    assert calls.read_text() == f"{command} 4242.head\n"


def test_a_matching_line_stops_the_job_reading_only_new_lines(tmp_path: Path) -> None:
    node = Node(
        {
            "nan": {
                "entry_point": "core.file_pattern",
                "kwargs": {"path": "out.log", "pattern": r"(?:energy|E)\s*=\s*NaN\b"},
            }
        }
    )
    commands = [
        "echo 'E = 1.5' > out.log",
        "sleep 1.5",
        "echo '  E = NaN at step 3  ' >> out.log",
        "sleep 600",
    ]
    write_job(tmp_path, commands, node)
    status, took = run_job(tmp_path)
    assert status == 143
    assert took < 1.5 + 2 * INTERVAL + 1
    got = record(tmp_path)
    assert got["message"] == r"out.log matched '(?:energy|E)\\s*=\\s*NaN\\b': E = NaN at step 3"
    assert (got["monitor"], got["daemon_away"]) == ("nan", True)
    # It remembered how far it had read: the whole file, not the first line again.
    offset = (tmp_path / "_veglia_guard.state" / "0" / "offset").read_text().strip()
    assert int(offset) == (tmp_path / "out.log").stat().st_size


def test_a_fresh_heartbeat_quiets_the_guards_but_not_the_wall_time(tmp_path: Path) -> None:
    monitors = {
        "stuck": {
            "entry_point": "core.stalled_output",
            "kwargs": {"path": "none.log", "seconds": 1},
        },
        "time": {"entry_point": "core.walltime_guard", "kwargs": {"fraction": 0.5}},
    }
    write_job(tmp_path, ["sleep 600"], Node(monitors, max_wallclock_seconds=6))
    (tmp_path / "heartbeat").touch()
    heard = int((tmp_path / "heartbeat").stat().st_mtime)
    status, took = run_job(tmp_path)
    assert status == 143
    # The guards' clock counts whole seconds: "3 s" may be 2.0 s in real time.
    assert 2 <= took < 3 + 2 * INTERVAL + 1
    got = record(tmp_path)
    assert got["monitor"] == "time" and got["entry_point"] == "core.walltime_guard"
    assert got["message"] in (
        "ran 3 s of its 6 s (50% reached)",
        "ran 4 s of its 6 s (50% reached)",
    )
    assert (got["daemon_heard"], got["daemon_away"]) == (heard, False)


def test_a_job_that_ignores_term_gets_kill_after_the_grace_time(tmp_path: Path) -> None:
    node = Node(
        {"stuck": {"entry_point": "core.stalled_output", "kwargs": {"path": "x", "seconds": 1}}}
    )
    # Its program ignores TERM (an ignored signal stays ignored across exec).
    write_job(tmp_path, ["bash -c 'trap \"\" TERM; exec sleep 600'"], node, guard_grace=2)
    # KILL takes the watcher with the job: the dead wait for init to reap them.
    status, took = run_job(tmp_path, zombies=False)
    assert status == -9 and 1 + 2 <= took < 1 + 2 + 2 * INTERVAL + 1
    assert record(tmp_path)["message"].startswith("x does not exist for ")
    assert "the job outlived TERM by 2 s: KILL" in (tmp_path / LOG_FILE).read_text()


def processes_in(folder: Path) -> list[int]:
    """The running processes whose working directory is ``folder``."""
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if cwd.resolve() == folder.resolve() and "Z" not in _state(cwd.parent):
                found.append(int(cwd.parent.name))
        except OSError:
            continue
    return found


def _state(proc: Path) -> str:
    return (proc / "stat").read_text().rpartition(")")[2].split()[0]


def test_a_job_shell_leading_no_group_has_its_tree_stopped(tmp_path: Path) -> None:
    """Started in the test's own process group: TERM goes to the job's process tree, never
    to the group (it holds the test)."""
    node = Node(
        {"stuck": {"entry_point": "core.stalled_output", "kwargs": {"path": "x", "seconds": 1}}}
    )
    write_job(tmp_path, ["sleep 600 | cat", "sleep 600"], node)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_", "LSB_"))}
    start = time.monotonic()
    status = subprocess.run(["bash", "job.sh"], cwd=tmp_path, env=env, timeout=30).returncode
    assert status == 143 and time.monotonic() - start < 1 + 2 * INTERVAL + 1
    deadline = time.monotonic() + 2
    while processes_in(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_in(tmp_path) == []
    assert record(tmp_path)["message"].startswith("x does not exist for ")


def test_a_stale_heartbeat_is_a_daemon_away(tmp_path: Path) -> None:
    node = Node(
        {"stuck": {"entry_point": "core.stalled_output", "kwargs": {"path": "x", "seconds": 1}}}
    )
    write_job(tmp_path, ["sleep 600"], node, guard_away_after=60)
    (tmp_path / "heartbeat").touch()
    os.utime(tmp_path / "heartbeat", (time.time() - 120, time.time() - 120))
    status, _ = run_job(tmp_path)
    assert status == 143
    got = record(tmp_path)
    assert got["message"].startswith("x does not exist for ")
    assert got["daemon_away"] is True and isinstance(got["daemon_heard"], int)


def test_a_failing_guard_is_switched_off_and_the_job_goes_on(
    tmp_path: Path, monitor_import_paths: None
) -> None:
    node = Node(
        {
            "broken": {"entry_point": "monitor_helpers:broken_guard"},
            "unparsable": {"entry_point": "monitor_helpers:unparsable_guard"},
            "stuck": {
                "entry_point": "core.stalled_output",
                "kwargs": {"path": "out.log", "seconds": 60},
            },
        }
    )
    # Under the job's own `set -eu`: the watcher keeps its own options.
    write_job(tmp_path, ["set -eu", "sleep 2.5", "echo done > done.txt"], node)
    status, _ = run_job(tmp_path)
    assert status == 0 and (tmp_path / "done.txt").exists()
    assert not (tmp_path / RECORD_FILE).exists()
    log = (tmp_path / LOG_FILE).read_text().splitlines()
    failed = sorted(line.partition(" ")[2] for line in log if "failed" in line)
    assert len(failed) == 2  # each switched off at its first failure
    assert failed[0].startswith(
        "guard broken (monitor_helpers:broken_guard) failed with status 127 and is off for "
        "this job: "
    )
    assert "veglia_no_such_command" in failed[0]
    assert failed[1] == (
        "guard unparsable (monitor_helpers:unparsable_guard) failed and is off for this job: "
        "its shell text does not parse"
    )
    # The other guard went on to the end.
    assert "stood down" in log[-1]
    assert len(list(tmp_path.glob("_veglia_guard.state/*/size"))) == 1


def test_a_job_that_ends_leaves_no_watcher_and_a_line_once_the_guards_ran(tmp_path: Path) -> None:
    node = Node(
        {
            "stuck": {
                "entry_point": "core.stalled_output",
                "kwargs": {"path": "out.log", "seconds": 60},
            }
        }
    )
    short, longer = tmp_path / "short", tmp_path / "longer"
    for folder, seconds in ((short, 0.3), (longer, INTERVAL * 2.5)):
        folder.mkdir()
        write_job(folder, ["echo hi > out.log", f"sleep {seconds}"], node)
        (folder / "heartbeat").touch()
        status, took = run_job(folder)  # nothing left in the job's process group
        assert status == 0 and took < seconds + 2
        assert not (folder / RECORD_FILE).exists()
    # A job shorter than an interval never set the watcher up: no file for the daemon to
    # retrieve and store (the cost of short jobs).
    assert sorted(p.name for p in short.glob("_veglia_guard*")) == [RUNNER_FILE]
    (line,) = (longer / LOG_FILE).read_text().splitlines()
    assert "the job ended without a guard acting; the watcher stood down" in line
    assert "daemon last heard: 20" in line


def test_a_wrap_by_default_none_without_guards_or_with_the_computer_s_off(tmp_path: Path) -> None:
    stalled = {"entry_point": "core.stalled_output", "kwargs": {"path": "o", "seconds": 5}}
    computer = Computer(tmp_path)
    assert job_script_wrap(node=Node({"s": {**stalled, "guard": False}}), computer=computer) is None
    assert (
        job_script_wrap(
            node=Node({"p": {"entry_point": "core.pending_too_long"}}), computer=computer
        )
        is None
    )
    off = Computer(tmp_path, guards=False)
    assert job_script_wrap(node=Node({"s": stalled}), computer=off) is None
    # On unless a computer says no.
    default = Computer(tmp_path)
    del default.properties["guards"]
    assert job_script_wrap(node=Node({"s": stalled}), computer=default) is not None
    # The same monitors give the same uploaded file, whatever their names and options.
    first = job_script_wrap(node=Node({"a": stalled}), computer=computer)
    other = {"entry_point": "core.stalled_output", "kwargs": {"path": "p", "seconds": 9}}
    second = job_script_wrap(node=Node({"b": other}), computer=computer)
    assert first is not None and second is not None and first.files == second.files


@pytest.mark.parametrize(
    ("monitor", "message"),
    [
        (
            {"entry_point": "core.file_pattern", "kwargs": {"path": "o", "pattern": "(?<=E=)NaN"}},
            "Monitor 'm' (core.file_pattern): its guard cannot honour the kwargs: pattern "
            "'(?<=E=)NaN' uses a (?<...) group, which grep -E (the guard) cannot do;",
        ),
        (
            {"entry_point": "core.stalled_output", "kwargs": {"path": "o", "seconds": -5}},
            "Monitor 'm' (core.stalled_output): its guard cannot honour the kwargs: seconds "
            "must be a number more than 0, not -5.",
        ),
    ],
)
def test_kwargs_a_guard_cannot_honour_are_refused_at_submission(
    monitor: dict[str, Any], message: str
) -> None:
    with pytest.raises(MonitorError) as raised:
        parse_monitors({"m": monitor})
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
    assert str(raised.value).endswith(
        'Switch the guard off with "guard": False to keep the monitor alone.'
    )
    assert str(raised.value).count('"guard"') == 1  # said once
    # The monitor alone takes them.
    assert parse_monitors({"m": {**monitor, "guard": False}})[0].guard is False


def monitor_says(folder: Path, node: Node) -> str | None:
    """What the job's (one) Python monitor says of the same work directory."""
    (spec,) = node.monitors
    with FakeTransport(root=str(folder)) as transport:
        transport.cwd = str(folder)
        result = load_monitor(spec["entry_point"])(node, transport, **spec["kwargs"])
    return None if result is None else result.message


def write_trace(folder: Path, json_text: str, samples: list[str]) -> None:
    """The trace sampler's two files (docs/trace.md), as it would have left them."""
    (folder / "_veglia_trace.json").write_text(json_text + "\n")
    header = "#veglia-trace-series 1 t cpu rss mem gpu gpu_mem gpu_bw\n"
    (folder / "_veglia_trace.series").write_text(header + "".join(f"{s}\n" for s in samples))


def test_memory_past_its_share_of_the_cgroup_limit_stops_the_job(tmp_path: Path) -> None:
    node = Node({"mem": {"entry_point": "core.memory_ceiling", "kwargs": {"fraction": 0.95}}})
    write_job(tmp_path, ["sleep 600"], node)
    mib = 1024 * 1024
    cgroup = f'"cgroup":{{"version":"v2","scope":"job","memory_limit":{1000 * mib}}}'
    now = int(time.time() * 1000)
    write_trace(
        tmp_path,
        f'{{"proc":{{"rss":1000}},{cgroup}}}',
        [f"{now - 1000} 990 2000 {900 * mib} - - -", f"{now} 990 2000 {980 * mib} - - -"],
    )
    status, took = run_job(tmp_path)
    assert status == 143 and took < 2 * INTERVAL + 1
    assert record(tmp_path)["message"] == (
        "the job's cgroup rss reached 980 MiB, 98% of its cgroup's memory limit (1000 MiB; "
        "stopped at 95%)"
    )
    assert record(tmp_path)["message"] == monitor_says(tmp_path, node)


def test_memory_under_max_memory_kb_lets_the_job_go_on(tmp_path: Path) -> None:
    node = Node({"mem": {"entry_point": "core.memory_ceiling"}}, max_memory_kb=1_000_000)
    write_job(tmp_path, ["sleep 2.5"], node)
    now = int(time.time() * 1000)
    write_trace(tmp_path, '{"proc":{"rss":900000}}', [f"{now} 990 940000 - - - -"])
    status, _ = run_job(tmp_path)
    assert status == 0 and not (tmp_path / RECORD_FILE).exists()
    assert monitor_says(tmp_path, node) is None


def test_a_gpu_idle_for_its_seconds_stops_the_job(tmp_path: Path) -> None:
    monitor = {"entry_point": "core.gpu_idle", "kwargs": {"threshold": 5, "seconds": 3}}
    node = Node({"idle": monitor})
    write_job(tmp_path, ["sleep 600"], node)
    now = int(time.time() * 1000)
    # Busy 5 s ago, idle since: 4 samples of the last 3 s, none reaching 5 %.
    gpu = [(5000, 80), (4000, 0), (3000, 3), (2000, 4), (1000, 1), (0, 0)]
    write_trace(
        tmp_path,
        '{"gpu":{"name":"Tesla T4","mem":15360}}',
        [f"{now - ago} 10 2000 - {util} 100 0" for ago, util in gpu],
    )
    status, took = run_job(tmp_path)
    assert status == 143 and took < 2 * INTERVAL + 1
    assert record(tmp_path)["message"] == (
        "GPU Tesla T4 idle: under 5% in all 4 samples of the last 3 s (at most 4%)"
    )
    assert record(tmp_path)["message"] == monitor_says(tmp_path, node)


def test_a_gpu_busy_within_its_seconds_lets_the_job_go_on(tmp_path: Path) -> None:
    monitor = {"entry_point": "core.gpu_idle", "kwargs": {"threshold": 5, "seconds": 3}}
    node = Node({"idle": monitor})
    write_job(tmp_path, ["sleep 2.5"], node)
    now = int(time.time() * 1000)
    gpu = [(5000, 0), (4000, 0), (3000, 0), (2000, 5), (1000, "-"), (0, 0)]
    write_trace(tmp_path, "{}", [f"{now - ago} 10 2000 - {util} - -" for ago, util in gpu])
    status, _ = run_job(tmp_path)
    assert status == 0 and not (tmp_path / RECORD_FILE).exists()
    assert monitor_says(tmp_path, node) is None


def test_the_memory_guard_reads_the_real_sampler_beside_it(tmp_path: Path) -> None:
    """Every plugin's wrap, as the engine builds the script: the trace sampler writes its
    files, the guard reads them (a process tree of some MB against a 1000 kB limit)."""
    node = Node({"mem": {"entry_point": "core.memory_ceiling"}}, max_memory_kb=1000)
    computer = Computer(tmp_path, trace=True, trace_interval=0.5)
    wraps = wraps_for(node, computer)
    assert {"core.trace", "core.guard"} <= {w.name for w in wraps}
    put_files(wraps, tmp_path)
    (tmp_path / "job.sh").write_text(
        "\n".join(["#!/bin/bash", *wrap_commands(["sleep 600"], wraps)])
    )
    status, took = run_job(tmp_path)
    assert status == 143 and took < 8 + 2 * INTERVAL
    message = record(tmp_path)["message"]
    assert message.startswith("the job's processes' rss reached ")
    assert message.endswith("of max_memory_kb (1 MiB; stopped at 95%)")
    # The sampler saw the end too.
    assert json.loads((tmp_path / "_veglia_trace.json").read_text())["sampler"]["final"]
