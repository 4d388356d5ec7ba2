"""Moving a job to a queue with a longer time limit before it outlives its own (issue #33,
VRPipe's UC2 12c): each scheduler's move command, then the engine's decision on localhost
(core.direct with declared queues, and a stand-in that can move running jobs), then on the
real SLURM.

The SLURM outputs were recorded here (SLURM 22.05); the LSF and PBS ones are not recorded
here (no LSF or PBS on this machine): their commands run against PATH stand-ins.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.orm.attributes import LAST_JOB_INFO, QUEUE_MOVES, SIMILARITY_KEY, USAGE
from veglia.plugins.calculations.shell import shell_similarity_key
from veglia.plugins.schedulers.direct import DirectScheduler
from veglia.plugins.schedulers.lsf import LsfScheduler
from veglia.plugins.schedulers.pbspro import PbsProScheduler, TorqueScheduler
from veglia.plugins.schedulers.sge import SgeScheduler
from veglia.plugins.schedulers.slurm import SlurmScheduler
from veglia.schedulers import SchedulerError
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")


class ShellTransport:
    """Runs a command with bash, with ``path`` first on the PATH (the stand-ins)."""

    def __init__(self, path: Path) -> None:
        self.env = {**os.environ, "PATH": f"{path}:{os.environ['PATH']}"}

    def exec_command(self, command: str, **kwargs) -> tuple[int, str, str]:
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, env=self.env, timeout=30
        )
        return done.returncode, done.stdout, done.stderr


def _stand_in(folder: Path, name: str, body: str) -> None:
    """A command ``name`` that logs its arguments to ``calls.log``, then runs ``body``."""
    path = folder / name
    path.write_text(f'#!/bin/bash\necho "{name} $*" >> {folder}/calls.log\n{body}\n')
    path.chmod(0o755)


# -- the commands -----------------------------------------------------------------------------
def test_slurm_moves_a_pending_job_with_scontrol_and_never_a_running_one():
    scheduler = SlurmScheduler()
    assert scheduler.move_command("42", "long", 110, running=False) == (
        "scontrol update JobId=42 Partition=long TimeLimit=00:01:50"
    )
    assert scheduler.move_command("42_3", "long", 90061, False).endswith("TimeLimit=1-01:01:01")
    assert scheduler.move_command("42", "long", None, False).endswith("Partition=long")
    # scontrol(1): partition changes are for pending jobs; recorded here for a running job:
    # "Job is no longer pending execution for job 3", exit 1.
    assert scheduler.move_command("42", "long", 110, running=True) is None
    scheduler.parse_move_output(0, "", "")  # recorded: a move prints nothing
    with pytest.raises(SchedulerError, match="no longer pending execution for job 3"):
        scheduler.parse_move_output(1, "", "Job is no longer pending execution for job 3\n")
    with pytest.raises(SchedulerError, match="Invalid job id specified"):
        scheduler.parse_move_output(1, "", "Invalid job id specified for job 999999\n")


@pytest.mark.parametrize(
    "scheduler", [SlurmScheduler(), PbsProScheduler(), LsfScheduler(), SgeScheduler()]
)
def test_bad_ids_and_queue_names_never_reach_a_move_command(scheduler):
    for bad in ("1; rm -rf ~", "$(id)", ""):
        with pytest.raises(SchedulerError, match="not a"):
            scheduler.move_command(bad, "long", 60, False)
    if not isinstance(scheduler, SgeScheduler):
        with pytest.raises(SchedulerError, match="queue_name"):
            scheduler.move_command("42", "long\n#SBATCH x", 60, False)


def test_pbs_moves_a_queued_job_with_qmove_then_qalter(tmp_path):
    # pbs_movejob(3B): "A job in the Running, Transiting, or Exiting state cannot be moved."
    for scheduler in (PbsProScheduler(), TorqueScheduler()):
        assert scheduler.move_command("4101.pbs01", "long", 7200, running=True) is None
        assert scheduler.move_command("4101[].pbs01", "long", 7200, False) == (
            "qmove long '4101[].pbs01' && qalter -l walltime=02:00:00 '4101[].pbs01'"
        )
    _stand_in(tmp_path, "qmove", "")
    _stand_in(tmp_path, "qalter", "")
    PbsProScheduler().move(ShellTransport(tmp_path), "4101.pbs01", "long", 7200, False)
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "qmove long 4101.pbs01",
        "qalter -l walltime=02:00:00 4101.pbs01",
    ]
    # qmove's refusal (PBSE_BADSTATE's text) is the error, and qalter never runs.
    (tmp_path / "calls.log").unlink()
    _stand_in(tmp_path, "qmove", 'echo "qmove: Request invalid for state of job $2" >&2; exit 168')
    with pytest.raises(SchedulerError, match="Request invalid for state of job 4101.pbs01"):
        PbsProScheduler().move(ShellTransport(tmp_path), "4101.pbs01", "long", 7200, False)
    assert (tmp_path / "calls.log").read_text().splitlines() == ["qmove long 4101.pbs01"]


def test_lsf_switches_pending_and_running_jobs_with_bswitch_then_bmod(tmp_path):
    # bswitch(1): "Switches unfinished jobs from one queue to another"; a dispatched job keeps
    # its resource limits, so bmod -W sets the run limit (whole minutes, rounded up).
    scheduler = LsfScheduler()
    for running in (False, True):
        assert scheduler.move_command("4101", "long", 110, running) == (
            "bswitch long 4101 && bmod -W 2 4101"
        )
    _stand_in(tmp_path, "bswitch", 'echo "Job <$2> is switched to queue <$1>"')
    _stand_in(tmp_path, "bmod", 'echo "Parameters of job <$3> are being changed"')
    scheduler.move(ShellTransport(tmp_path), "4101", "long", 7200, True)
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        "bswitch long 4101",
        "bmod -W 120 4101",
    ]
    refusal = "Job <$2>: Cannot exceed queue's hard limit(s)"  # bsub's words, for bswitch
    _stand_in(tmp_path, "bswitch", f'echo "{refusal}" >&2; exit 255')
    with pytest.raises(SchedulerError, match="Cannot exceed queue's hard limit"):
        scheduler.move(ShellTransport(tmp_path), "4101", "long", 7200, True)


def test_sge_and_direct_cannot_move_jobs():
    # qalter -l would replace the job's whole list of resource requests (h_vmem too).
    assert SgeScheduler().move_command("4101", "long.q", 7200, False) is None
    assert DirectScheduler().move_command("4101", "long", 7200, False) is None
    with pytest.raises(SchedulerError, match="cannot move a running job"):
        DirectScheduler().move(ShellTransport(Path("/nonexistent")), "1", "long", 60, True)


# -- the engine, on localhost -----------------------------------------------------------------
def _key(computer: str, command: str) -> str:
    """The similarity key of a core.shell job running ``command`` on ``computer`` (jobs of
    another command are not similar)."""
    return shell_similarity_key(command, f"core.shell||{computer}")


def _history(key: str, runtimes: list[int]) -> None:
    """Finished similar jobs that took ``runtimes`` seconds, as their usage recorded."""
    for seconds in runtimes:
        node = orm.CalcJobNode(process_type="core.shell")
        node.process_state = "finished"
        node.store()
        usage = {"runtime_seconds": seconds, "peak_memory_kb": 1024, "source": "sacct"}
        node.set_attributes({SIMILARITY_KEY: key, USAGE: usage})
        node.set_exit(0, None)


def _localhost_with_queues(queues: str = "short:time=2s; long:time=1h") -> None:
    computer = orm.load_computer("localhost")
    computer.properties["queues"] = queues
    computer.save()


def _sleep(seconds: float, **options):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(f"sleep {seconds}; echo done")
    for name, value in options.items():
        builder.metadata.options[name] = value
    return builder


def _report(run_cli, node) -> str:
    result = run_cli("-p", "test", "process", "report", str(node.pk))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_running_job_core_direct_cannot_move_is_left_alone_with_one_note(profile, run_cli):
    _localhost_with_queues()
    _history(_key("localhost", "sleep 3; echo done"), [40, 50, 60])
    _, node = engine.run_get_node(_sleep(3))
    assert node.is_finished_ok, node.exit_message
    [move] = node.get_attribute(QUEUE_MOVES)
    assert (move["state"], move["from"], move["to"], move["moved"]) == (
        "running",
        "short",
        "long",
        False,
    )
    report = _report(run_cli, node)
    assert report.count("left in queue short") == 1, report
    assert "of the 2 s of the limit of queue short, and 3 similar jobs took 60 s" in report
    assert "core.direct cannot move a running job to another queue" in report
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    assert re.search(r"queue moves\s+stayed in short while running \(ran \d+ s", shown), shown


def test_nothing_happens_without_history_or_when_switched_off(profile, run_cli):
    _localhost_with_queues()
    _history(_key("localhost", "sleep 3; echo done"), [40, 50])  # two: too few to go by
    _, node = engine.run_get_node(_sleep(3))
    assert node.is_finished_ok and node.get_attribute(QUEUE_MOVES) is None
    _history(_key("localhost", "sleep 3; echo done"), [60])
    _, node = engine.run_get_node(_sleep(3, move_queue=False))
    assert node.is_finished_ok and node.get_attribute(QUEUE_MOVES) is None
    computer = orm.load_computer("localhost")
    computer.properties["move_jobs"] = False
    computer.save()
    _, node = engine.run_get_node(_sleep(3))
    assert node.is_finished_ok and node.get_attribute(QUEUE_MOVES) is None
    report = _report(run_cli, node)
    assert "left in queue" not in report and "moved from queue" not in report


class _Mover(DirectScheduler):
    """core.direct as a batch system that moves running jobs: its move writes a file."""

    log: Path
    command = "echo {queue} {seconds} >> {log}"

    def move_command(self, job_id, queue, wallclock_seconds, running):
        return self.command.format(queue=queue, seconds=wallclock_seconds, log=self.log)


@pytest.fixture
def mover(profile, monkeypatch, tmp_path):
    _Mover.log = tmp_path / "moves.log"
    monkeypatch.setattr(orm.Computer, "get_scheduler", lambda self: _Mover())
    return _Mover


def test_a_running_job_is_moved_once_where_the_scheduler_can(mover, run_cli):
    _localhost_with_queues("short:time=2s; medium:time=30s; long:time=1h; huge:time=1d")
    _history(_key("localhost", "sleep 3; echo done"), [40, 50, 60])
    _, node = engine.run_get_node(_sleep(3))
    assert node.is_finished_ok, node.exit_message
    # The shortest queue that fits the 60 s similar jobs took, with that as its limit.
    assert mover.log.read_text() == "long 60\n"
    [move] = node.get_attribute(QUEUE_MOVES)
    assert (move["from"], move["to"], move["wallclock_seconds"], move["moved"]) == (
        "short",
        "long",
        60,
        True,
    )
    assert (node.options["queue_name"], node.options["max_wallclock_seconds"]) == ("long", 60)
    report = _report(run_cli, node)
    assert report.count("moved from queue short to long with a time limit of 60 s") == 1
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    assert re.search(r"queue moves\s+short -> long while running, time limit 60 s", shown), shown


def test_a_failed_move_is_reported_once_and_not_tried_again(mover, run_cli):
    _localhost_with_queues()
    _history(_key("localhost", "sleep 3; echo done"), [40, 50, 60])
    mover.command = "echo tried >> {log}; echo 'Job <1>: no such queue <{queue}>' >&2; exit 255"
    _, node = engine.run_get_node(_sleep(3))
    assert node.is_finished_ok, node.exit_message
    assert mover.log.read_text() == "tried\n"
    [move] = node.get_attribute(QUEUE_MOVES)
    assert move["moved"] is False and "no such queue <long>" in move["error"]
    report = _report(run_cli, node)
    assert report.count("could not move the job from queue short to long") == 1, report
    assert "not tried again" in report


# -- the real SLURM -----------------------------------------------------------------------------
@pytest.fixture
def slurm_computer(profile, services_env, ssh_params, slurm):
    return ssh_computer("slurm", services_env, ssh_params, "core.slurm")


def _squeue(*args: str) -> list[list[str]]:
    done = subprocess.run(
        ["squeue", "-h", *args], capture_output=True, text=True, timeout=30, check=True
    )
    return [line.split("|") for line in done.stdout.splitlines() if line.strip()]


@pytest.fixture
def blocker(slurm):
    """A job in `long` holding every CPU of the node, so others stay pending; cancelled at
    the end. ``blocker.release()`` cancels it sooner."""
    [[cpus]] = _squeue_cpus()
    job_id = subprocess.run(
        ["sbatch", "--parsable", "-p", "long", "-c", cpus, "-t", "5", "-J", "veglia-blocker",
         "-o", "/dev/null", "--wrap", "sleep 300"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()  # fmt: skip
    deadline = time.monotonic() + 30
    while _squeue("-j", job_id, "-o", "%T") != [["RUNNING"]]:
        assert time.monotonic() < deadline, "the blocker job did not start"
        time.sleep(0.2)

    class Blocker:
        id = job_id

        @staticmethod
        def release() -> None:
            subprocess.run(["scancel", job_id], timeout=30, check=False)

    yield Blocker
    Blocker.release()


def _squeue_cpus() -> list[list[str]]:
    done = subprocess.run(
        ["sinfo", "-h", "-p", "long", "-o", "%c"], capture_output=True, text=True, timeout=30
    )
    return [[done.stdout.split()[0]]]


@pytest.mark.services
def test_on_slurm_a_pending_job_that_would_outlive_short_is_moved_to_long(
    slurm_computer, blocker, run_cli
):
    _history(_key("slurm", "echo done"), [90, 100, 110])  # 110 s expected: over short's minute
    seen: list[tuple[str, str]] = []

    def watch() -> None:
        """squeue until the job is pending in long, then let it run."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for _, partition, state, name in _squeue("-o", "%i|%P|%T|%j"):
                if name.startswith("veglia-") and name != "veglia-blocker":
                    if (partition, state) not in seen:
                        seen.append((partition, state))
                    if (partition, state) == ("long", "PENDING"):
                        blocker.release()
                        return
            time.sleep(0.1)
        blocker.release()

    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo done")
    builder.metadata.computer = "slurm"
    builder.metadata.options.queue_name = "short"
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    outputs, node = engine.run_get_node(builder)
    took = time.monotonic() - started
    watcher.join(5)

    assert node.is_finished_ok, node.exit_message
    assert outputs["stdout"].get_content() == b"done\n"
    # Seen pending in long (perhaps first in short, if squeue looked before the first poll).
    assert ("long", "PENDING") in seen and seen[0][1] == "PENDING", seen
    [move] = node.get_attribute(QUEUE_MOVES)
    assert (move["state"], move["from"], move["to"], move["moved"]) == (
        "pending",
        "short",
        "long",
        True,
    )
    assert move["wallclock_seconds"] == 110
    assert node.get_attribute(LAST_JOB_INFO)["queue"] == "long"
    report = _report(run_cli, node)
    assert (
        "moved from queue short to long with a time limit of 110 s while pending: 3 similar "
        "jobs took 110 s (mean + 1 SD of their run time), over the 60 s limit of queue short"
    ) in report
    print(f"pending move on SLURM: {took:.1f} s from submission to the end; squeue saw {seen}")


@pytest.mark.services
def test_on_slurm_a_running_job_near_its_limit_is_left_alone_with_one_note(slurm_computer, run_cli):
    # Similar jobs took 60 s: short's minute allows that, so the pending job stays there. Its
    # own request (10 s, which SLURM rounds up to a minute) is what ends it: at 8 s it has run
    # 80 % of it, and SLURM lets no one but its administrator raise a running job's limit.
    _history(_key("slurm", "sleep 11; echo done"), [40, 50, 60])
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 11; echo done")
    builder.metadata.computer = "slurm"
    builder.metadata.options.queue_name = "short"
    builder.metadata.options.max_wallclock_seconds = 10
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    [move] = node.get_attribute(QUEUE_MOVES)
    assert (move["state"], move["from"], move["to"], move["moved"]) == (
        "running",
        "short",
        None,
        False,
    )
    report = _report(run_cli, node)
    assert report.count("left in queue short") == 1
    assert "of the 10 s of its wall-time request, and 3 similar jobs took 60 s" in report
    assert "veglia does not raise a running job's request" in report
