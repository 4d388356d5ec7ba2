"""Issue 16: submission writes a job in one commit, reads its computer from the runner's
cache (this process's own changes seen at once), and queues its broker task without
waiting for the confirmation, losing none: a task the broker did not take is sent again,
or the user is told."""

from __future__ import annotations

import concurrent.futures
import logging
import threading

import pytest
import sqlalchemy as sa

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.exceptions import BrokerError, NotExistent
from veglia.orm.attributes import DAEMON

AddJob = CalculationFactory("core.arithmetic.add")


def test_a_submission_is_one_commit_with_the_daemon_flag(profile):
    engine.submit(AddJob, x=orm.Int(1), y=orm.Int(2))  # the first reads the computer
    commits = []

    def count(connection):
        commits.append(connection)

    sa.event.listen(sa.engine.Engine, "commit", count)
    try:
        node = engine.submit(AddJob, x=orm.Int(3), y=orm.Int(4))
    finally:
        sa.event.remove(sa.engine.Engine, "commit", count)
    assert len(commits) == 1
    node = orm.load_node(node.pk)
    assert node.get_attribute(DAEMON) is True
    assert node.process_state == "created"
    assert node.get_checkpoint()
    assert sorted(node.inputs) == ["x", "y"]


def test_a_computer_changed_here_is_seen_by_the_next_submission_at_once(profile):
    first = engine.submit(AddJob, x=orm.Int(1), y=orm.Int(2))
    computer = orm.load_computer("localhost")
    computer.label = "renamed"
    computer.save()  # within the cache's second: only the local change says so
    node = engine.submit(AddJob, x=orm.Int(1), y=orm.Int(2), metadata={"computer": "renamed"})
    assert node.computer_pk == first.computer_pk
    assert node.get_attribute("computer") == "renamed"
    with pytest.raises(NotExistent):
        engine.submit(AddJob, x=orm.Int(1), y=orm.Int(2), metadata={"computer": "localhost"})


class _Scheduler:
    def __init__(self) -> None:
        self.futures: list[concurrent.futures.Future] = []

    def await_submit(self, coroutine):
        coroutine.close()  # never run: the test decides the broker's answer
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.futures.append(future)
        return future


class _Kiwipy:
    def task_send(self, task, no_reply=False):
        async def send():
            return None

        return send()


class _Communicator:
    def __init__(self) -> None:
        self._loop_scheduler = _Scheduler()
        self._communicator = _Kiwipy()


@pytest.fixture
def fake_broker(profile, monkeypatch):
    """A pipeline whose broker answers as the test says; the waiting sends it falls back
    to are recorded (and fail when ``refuse`` is set)."""
    from veglia.engine.daemon import broker_tasks
    from veglia.engine.daemon.task_pipeline import TaskPipeline

    communicator = _Communicator()
    waited: list[int] = []
    state = {"refuse": False}

    def send_continue_task(url, pk, patience=60.0):
        if state["refuse"]:
            raise BrokerError(f"Process {pk} is stored but could not be handed to the daemon")
        waited.append(pk)

    monkeypatch.setattr(broker_tasks, "_shared", lambda profile: communicator)
    monkeypatch.setattr(broker_tasks, "send_continue_task", send_continue_task)
    return TaskPipeline(max_in_flight=2), communicator._loop_scheduler, waited, state


def test_a_refused_task_is_sent_again_the_waiting_way(fake_broker):
    pipeline, scheduler, waited, _ = fake_broker
    pipeline.send("amqp://x", 1)  # a new connection: the first waits for the broker
    assert waited == [1]
    pipeline.send("amqp://x", 2)
    pipeline.send("amqp://x", 3)
    assert waited == [1] and len(scheduler.futures) == 2
    scheduler.futures[0].set_exception(RuntimeError("channel closed"))
    scheduler.futures[1].set_result(None)
    pipeline.check()
    assert waited == [1, 2]
    assert pipeline.flush() == []


def test_a_task_that_cannot_be_handed_over_is_raised_at_the_next_check(fake_broker):
    pipeline, scheduler, _, state = fake_broker
    pipeline.send("amqp://x", 1)
    pipeline.send("amqp://x", 2)
    state["refuse"] = True
    scheduler.futures[0].set_exception(RuntimeError("nack"))
    with pytest.raises(BrokerError, match="Process 2 is stored"):
        pipeline.check()


def test_at_flush_a_lost_task_is_logged_and_named(fake_broker, caplog):
    pipeline, scheduler, _, state = fake_broker
    pipeline.send("amqp://x", 1)
    pipeline.send("amqp://x", 2)
    state["refuse"] = True
    scheduler.futures[0].set_exception(RuntimeError("nack"))
    with caplog.at_level(logging.ERROR, logger="veglia.broker"):
        assert pipeline.flush() == [2]
    assert "Process 2 is stored" in caplog.text


def test_past_the_limit_a_submission_waits_for_the_oldest(fake_broker):
    pipeline, scheduler, waited, _ = fake_broker
    pipeline.send("amqp://x", 1)
    for pk in (2, 3):
        pipeline.send("amqp://x", pk)
    # Three in flight is over the limit of two: the next send waits until the broker
    # confirms the oldest (here from another thread, a moment later).
    timer = threading.Timer(0.2, scheduler.futures[0].set_result, [None])
    timer.start()
    pipeline.send("amqp://x", 4)
    timer.join()
    assert [f.done() for f in scheduler.futures] == [True, False, False]
    assert waited == [1]
