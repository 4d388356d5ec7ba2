"""A calc job interrupted at any step resumes from its checkpoint and is submitted once."""

from __future__ import annotations

import asyncio

from veglia import engine, orm
from veglia.engine.calcjob import tasks as calcjob_tasks
from veglia.engine.process import load_process, save_checkpoint
from veglia.engine.runner import Runner, set_runner
from veglia.entry_points import CalculationFactory

ShellJob = CalculationFactory("core.shell")


def _crash_when(process, runner, condition):
    """Run the process until ``condition(node)`` holds, then drop it as a dying worker would."""

    async def until() -> None:
        task = asyncio.ensure_future(process.step_until_terminated())
        while not condition(process.node.refresh()):
            assert not task.done(), "the process ended before the crash point"
            await asyncio.sleep(0.02)
        # Everything the dead worker had under way dies with it.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for pending_task in pending:
            pending_task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    runner.loop.run_until_complete(until())


def test_job_killed_after_submission_resumes_without_resubmitting(profile):
    runner = Runner()
    set_runner(runner)
    process = runner.instantiate(ShellJob, {"command": orm.Str("sleep 1; echo done")})
    _crash_when(process, runner, lambda node: node.job_id is not None)
    node = process.node.refresh()
    job_id = node.job_id
    assert node.process_state == "waiting"

    fresh = Runner()
    set_runner(fresh)
    resumed = load_process(node, loop=fresh.loop)
    fresh.run_until_terminated(resumed)
    node.refresh()
    assert node.is_finished_ok, node.exit_message
    assert node.job_id == job_id
    assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
    assert node.outputs.stdout.get_content() == b"done\n"


def test_what_a_job_keeps_in_memory_is_not_checkpointed_and_starts_afresh(profile):
    """``CalcJob.runtime`` (failed polls, the monitors' calls, the live trace read...) lives
    in the process object only: the checkpoint is the same plain data, and a worker that
    loads the job starts with a fresh one."""
    runner = Runner()
    set_runner(runner)
    process = runner.instantiate(ShellJob, {"command": orm.Str("sleep 1; echo done")})
    _crash_when(process, runner, lambda node: node.job_id is not None)
    process.runtime.update_failures = 2
    process.runtime.links_reported.add(("watcher", "out.log"))
    save_checkpoint(process)
    node = process.node.refresh()
    checkpoint = node.get_checkpoint()
    assert "update_failures" not in checkpoint and "links_reported" not in checkpoint

    fresh = Runner()
    set_runner(fresh)
    resumed = load_process(node, loop=fresh.loop)
    assert resumed.runtime is not process.runtime
    assert resumed.runtime.update_failures == 0 and not resumed.runtime.links_reported
    assert resumed.runtime.live_trace.job is resumed and resumed.runtime.queue_moves.job is resumed
    fresh.run_until_terminated(resumed)
    assert node.refresh().is_finished_ok, node.exit_message


def test_a_checkpoint_naming_a_class_from_before_the_engine_moved_still_loads(profile):
    """A job waiting through an upgrade: its checkpoint names the state class where it was."""
    runner = Runner()
    set_runner(runner)
    process = runner.instantiate(ShellJob, {"command": orm.Str("sleep 1; echo done")})
    _crash_when(process, runner, lambda node: node.job_id is not None)
    node = process.node.refresh()
    checkpoint = node.get_checkpoint()
    assert "veglia.engine.calcjob.commands:JobWaiting" in checkpoint
    node.set_checkpoint(
        checkpoint.replace(
            "veglia.engine.calcjob.commands:JobWaiting", "veglia.engine.calcjob:JobWaiting"
        )
    )

    fresh = Runner()
    set_runner(fresh)
    fresh.run_until_terminated(load_process(node, loop=fresh.loop))
    assert node.refresh().is_finished_ok, node.exit_message
    assert node.outputs.stdout.get_content() == b"done\n"


def test_job_interrupted_while_uploading_uploads_again(profile):
    runner = Runner()
    set_runner(runner)
    process = runner.instantiate(ShellJob, {"command": orm.Str("echo once")})
    node = process.node
    assert node.refresh().process_state == "created"
    fresh = Runner()
    set_runner(fresh)
    resumed = load_process(node, loop=fresh.loop)
    fresh.run_until_terminated(resumed)
    assert node.refresh().is_finished_ok


def test_submitting_twice_returns_the_first_job(profile):
    computer = orm.load_computer("localhost")
    with computer.get_transport() as transport:
        root = computer.get_workdir(transport.whoami(), transport.home())
        workdir = computer.job_workdir(root, "0123456789abcdef")
        transport.makedirs(workdir)
        transport.write_bytes(f"{workdir}/{calcjob_tasks.SCRIPT_NAME}", b"sleep 0.1\n")
        first = calcjob_tasks.submit(transport, computer, workdir)
        second = calcjob_tasks.submit(transport, computer, workdir)
    assert first == second


def test_foreground_runs_are_not_taken_by_the_daemon(profile):
    _, node = engine.run_get_node(ShellJob, command=orm.Str("true"))
    assert node.get_attribute("daemon") is None


def test_a_kill_during_the_submission_records_the_job_and_cancels_it(profile, caplog, monkeypatch):
    """The submission under way is let finish; the job id it got is recorded, committed
    before the kill waits for the scheduler (no write is held across that wait), and that
    job is cancelled."""
    import subprocess

    runner = Runner()
    set_runner(runner)
    process = runner.instantiate(ShellJob, {"command": orm.Str("sleep 60")})
    real_submit = calcjob_tasks.submit
    started = []

    def submit_then_kill(transport, *args):
        job_id = real_submit(transport, *args)
        started.append(job_id)
        runner.loop.call_soon_threadsafe(process.kill, "killed while submitting")
        return job_id

    monkeypatch.setattr(calcjob_tasks, "submit", submit_then_kill)
    caplog.set_level("WARNING", logger="veglia")
    runner.run_until_terminated(process)

    node = process.node.refresh()
    assert node.process_state == "killed"
    assert started and node.job_id == started[0]
    assert [log.message for log in node.logs if log.message.startswith("submitted job")] == [
        f"submitted job {started[0]}"
    ]
    state = subprocess.run(
        ["ps", "-o", "stat=", "-p", started[0]], capture_output=True, text=True
    ).stdout.strip()
    assert state in ("", "Z"), f"the job still runs ({state})"
    assert "awaited after its closing writes" not in caplog.text
