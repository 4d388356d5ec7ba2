"""Process leases: one worker per process, on SQLite and PostgreSQL; stranded ones repaired."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

from veglia import engine, orm
from veglia.engine.daemon import leases
from veglia.engine.daemon.leases import WorkerId
from veglia.entry_points import CalculationFactory
from veglia.orm.process_nodes import WorkflowNode
from veglia_fixtures.profiles import wait_for

ShellJob = CalculationFactory("core.shell")


def _process() -> int:
    node = WorkflowNode(process_type="test")
    node.process_state = "waiting"
    node.store()
    return node.pk


def _elsewhere(name: str) -> WorkerId:
    """A worker on another host: its pid means nothing here."""
    return WorkerId(f"host-{name}", 4242, name, "elsewhere")


def test_of_workers_racing_for_a_process_exactly_one_wins(any_profile):
    pks = [_process() for _ in range(10)]
    workers = [_elsewhere(f"w{i}") for i in range(6)]
    wins: dict[int, list[str]] = {pk: [] for pk in pks}
    barrier = threading.Barrier(len(workers))

    def race(worker: WorkerId) -> None:
        barrier.wait()
        for pk in pks:
            if leases.acquire(pk, worker, timeout=60):
                wins[pk].append(worker.token)

    threads = [threading.Thread(target=race, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(len(winners) == 1 for winners in wins.values()), wins


def test_a_live_lease_is_never_taken_and_an_expired_one_is(any_profile):
    pk = _process()
    first, second = _elsewhere("first"), _elsewhere("second")
    assert leases.acquire(pk, first, timeout=1.5)
    assert not leases.acquire(pk, second, timeout=1.5)
    time.sleep(1.0)
    assert leases.renew(first, [pk]) == {pk}  # renewed: alive for another 1.5 s
    time.sleep(0.8)
    assert not leases.acquire(pk, second, timeout=1.5)
    assert leases.holder(pk, timeout=1.5).live
    time.sleep(1.8)
    assert not leases.holder(pk, timeout=1.5).live
    assert leases.acquire(pk, second, timeout=1.5)
    assert leases.renew(first, [pk]) == set()  # the first worker learns it lost it
    leases.release(pk, first)  # not its lease any more: nothing happens
    assert leases.holder(pk, timeout=1.5).worker == str(second)
    leases.release(pk, second)
    assert leases.holder(pk, timeout=1.5) is None


def test_a_dead_worker_of_this_host_is_replaced_at_once(any_profile):
    pk = _process()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    me = leases.this_worker()
    dead = WorkerId(me.host, gone.pid, "dead", me.pid_space)
    assert leases.acquire(pk, dead, timeout=300)
    assert not leases.holder(pk, timeout=300).live
    assert leases.acquire(pk, me, timeout=300)


def _purge_process_queue(profile) -> None:
    import aio_pika

    from veglia.engine.daemon.broker_tasks import queue_names

    async def purge() -> None:
        connection = await aio_pika.connect(profile.broker_url)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(queue_names(profile)["task_queue"], passive=True)
            await queue.purge()

    asyncio.run(purge())


def test_a_process_whose_task_was_lost_is_repaired_by_the_daemon(broker_profile, daemon, run_cli):
    daemon(1)
    run_cli("-p", "test", "daemon", "stop")  # declares the queue, then leaves it unread
    node = engine.submit(ShellJob, command=orm.Str("echo found again"))
    _purge_process_queue(broker_profile)
    listed = run_cli("-p", "test", "process", "repair", "--dry-run")
    assert f"Held by no live worker: {node.pk}" in listed.stdout
    assert "0 task(s) wait in the broker for a worker: these are stranded." in listed.stdout

    daemon(1)
    wait_for([node], lambda n: n.is_terminated, timeout=90)
    assert node.is_finished_ok
    status = run_cli("-p", "test", "daemon", "status")
    assert "Stranded processes queued again: 1" in status.stdout
    again = run_cli("-p", "test", "process", "repair", "--dry-run")
    assert "No stranded process" in again.stdout


def test_a_lost_task_behind_a_backlog_is_repaired_after_the_backlog_patience(
    broker_profile, daemon, run_cli
):
    from veglia.engine.daemon.reconcile import Reconciler, queued_tasks

    daemon(1)
    run_cli("-p", "test", "daemon", "stop")  # declares the queue, then leaves it unread
    lost = engine.submit(ShellJob, command=orm.Str("echo lost"))
    _purge_process_queue(broker_profile)
    waiting = engine.submit(ShellJob, command=orm.Str("echo waiting its turn"))
    assert queued_tasks(broker_profile) == 1

    reconciler = Reconciler(broker_profile, backlog_patience=30)
    assert reconciler.step(now=0) == []  # a first look
    assert reconciler.step(now=5) == []  # a backlog: either may be waiting its turn
    assert reconciler.step(now=31) == [lost.pk, waiting.pk]  # the patience is over
    assert queued_tasks(broker_profile) == 3
    assert reconciler.repaired == 2

    daemon(1)  # the duplicate of the waiting one is dropped: each runs once
    wait_for([lost, waiting], lambda n: n.is_terminated, timeout=90)
    assert lost.is_finished_ok and waiting.is_finished_ok
    for node in (lost, waiting):
        assert sum(log.message.startswith("submitted job") for log in node.logs) == 1


def test_a_process_whose_worker_stopped_is_repaired_at_once_behind_a_backlog(
    broker_profile, daemon, run_cli
):
    """A dehydrated process's task was acknowledged: when its worker stops, nothing waits
    in the broker for it, so the backlog's patience would only delay it."""
    from veglia.engine.daemon.reconcile import Reconciler, queued_tasks

    daemon(1)
    run_cli("-p", "test", "daemon", "stop")  # declares the queue, then leaves it unread
    asleep = engine.submit(ShellJob, command=orm.Str("echo asleep"))
    _purge_process_queue(broker_profile)  # as its worker acknowledged it when it dehydrated
    waiting = engine.submit(ShellJob, command=orm.Str("echo waiting its turn"))
    assert queued_tasks(broker_profile) == 1
    assert leases.acquire(asleep.pk, _elsewhere("stopped"), timeout=3600)
    broker_profile.options["daemon.lease_timeout"] = 1.0
    time.sleep(1.5)  # its lease expires: the worker holding it stopped renewing

    reconciler = Reconciler(broker_profile, backlog_patience=30)
    assert reconciler.step(now=0) == []  # a first look
    assert reconciler.step(now=5) == [asleep.pk]  # stranded for sure, backlog or not
    assert reconciler.step(now=31) == [waiting.pk]  # may have been waiting its turn

    daemon(1)
    wait_for([asleep, waiting], lambda n: n.is_terminated, timeout=90)
    assert asleep.is_finished_ok and waiting.is_finished_ok


def test_control_never_acts_under_a_live_worker(broker_profile, daemon, run_cli):
    daemon(1)
    run_cli("-p", "test", "daemon", "stop")
    node = engine.submit(ShellJob, command=orm.Str("echo never"))
    _purge_process_queue(broker_profile)
    mute = _elsewhere("mute")  # a worker on another host that does not answer
    assert leases.acquire(node.pk, mute, timeout=3600)
    daemon(1)
    refused = run_cli("-p", "test", "process", "kill", str(node.pk), "-t", "5")
    assert refused.exit_code == 1
    assert "run by worker 4242 on host-mute" in refused.output
    assert "nothing was done" in refused.output
    assert not node.refresh().is_terminated

    leases.release(node.pk, mute)  # its lease is gone: the checkpoint is ours to act on
    killed = run_cli("-p", "test", "process", "kill", str(node.pk), "-t", "5")
    assert killed.exit_code == 0, killed.output
    wait_for([node], lambda n: n.is_terminated, timeout=30)
    assert node.process_state == "killed"


def test_a_worker_that_lost_a_lease_stops_and_the_job_still_ends_once(
    broker_profile, daemon, run_cli
):
    import sqlalchemy as sa

    from veglia.config import Config
    from veglia.engine.daemon import DaemonFiles
    from veglia.manage import get_storage
    from veglia.storage.models import ProcessLease

    Config().set_option("test", "daemon.lease_timeout", "6")
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 8; echo still once"))
    wait_for([node], lambda n: n.job_id is not None, timeout=60)
    worker = DaemonFiles(broker_profile).read_status()["workers"][0]["pid"]
    assert leases.holder(node.pk, timeout=6).pid == worker
    # As if the worker had been cut off long enough for another to take the process over.
    with get_storage().session() as session:
        session.execute(
            sa.update(ProcessLease)
            .where(ProcessLease.process_id == node.pk)
            .values(worker=str(_elsewhere("thief")), host="host-thief", pid=4242)
        )
    deadline = time.monotonic() + 30
    while DaemonFiles(broker_profile).read_status()["workers"][0]["pid"] == worker:
        assert time.monotonic() < deadline, "the worker went on without its lease"
        time.sleep(0.2)
    logs = run_cli("-p", "test", "daemon", "logs", "-n", "200").stdout
    assert f"lost the lease on process(es) [{node.pk}]" in logs
    # The thief never renews: its lease expires, the process is repaired and ends, once.
    wait_for([node], lambda n: n.is_terminated, timeout=120)
    assert node.is_finished_ok, node.exit_message
    assert node.outputs.stdout.get_content() == b"still once\n"
    assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
