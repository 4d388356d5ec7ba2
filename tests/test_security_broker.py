"""Broker messages are JSON; a task message that is no veglia task is dropped, never starves."""

from __future__ import annotations

import asyncio
import json
import time

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import wait_for

ShellJob = CalculationFactory("core.shell")

#: What an attacker with access to the broker might publish to a profile's task queue.
GARBAGE = [
    b"\xff\xfe\x00\x80 not even text",
    b"!!python/name:builtins.len",  # YAML-only: a tag kiwipy's default YAML loader resolves
    b"!!python/tuple [{pid: 1}, true]",
    b'{"pid": "abc"}',
    b'[{"pid": "abc"}, true]',
    b'[{"pid": 1.5}, true]',
    b'[{"pid": true}, true]',
    b"[1, 2, 3]",
    b'"ab"',
    b"[" * 50_000,
]
#: Well-formed, but for processes that do not exist (deleted, or never made).
NO_SUCH_PROCESS = [b'[{"pid": 2000000000}, true]']


def _task_queue(profile, work):
    """Run ``work(channel, queue)`` on the profile's task queue, declared as kiwipy does."""
    import aio_pika
    from kiwipy.rmq.tasks import RmqTaskSubscriber

    from veglia.engine.daemon.broker_tasks import queue_names

    async def run():
        connection = await aio_pika.connect(profile.broker_url)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(
                queue_names(profile)["task_queue"],
                durable=True,
                arguments=RmqTaskSubscriber.TASK_QUEUE_ARGUMENTS,
            )
            return await work(channel, queue)

    return asyncio.run(run())


def _publish(profile, bodies: list[bytes]) -> None:
    import aio_pika

    async def publish(channel, queue):
        for body in bodies:
            await channel.default_exchange.publish(aio_pika.Message(body), routing_key=queue.name)

    _task_queue(profile, publish)


def _waiting(profile) -> int:
    async def count(_channel, queue):
        return queue.declaration_result.message_count

    return _task_queue(profile, count)


def test_garbage_task_messages_are_dropped_and_never_starve_the_worker(
    broker_profile, daemon, run_cli
):
    data = orm.Str("a node, but no process")
    data.store()
    not_processes = [*NO_SUCH_PROCESS, f'[{{"pid": {data.pk}}}, true]'.encode()]
    garbage = [GARBAGE[i % len(GARBAGE)] for i in range(1000)] + not_processes
    _publish(broker_profile, garbage)
    assert _waiting(broker_profile) == len(garbage)

    daemon(1)  # one worker, whose 1000 slots the garbage would fill
    node = engine.submit(ShellJob, command=orm.Str("echo ok"))
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_finished_ok
    assert node.outputs.stdout.get_content() == b"ok\n"

    # Stopped, the worker gives back whatever it held: nothing of the garbage is left.
    run_cli("-p", "test", "daemon", "stop")
    assert _waiting(broker_profile) == 0
    daemon(1)  # and after a restart the worker still takes work
    again = engine.submit(ShellJob, command=orm.Str("echo again"))
    wait_for([again], lambda n: n.is_terminated, timeout=60)
    assert again.is_finished_ok

    log = DaemonFiles(broker_profile).log.read_text()
    assert len(log.encode()) < 300_000
    assert "Traceback" not in log
    dropped = [line for line in log.splitlines() if "dropped a task message" in line]
    assert len(dropped) == 1000  # each once, in one line
    for pk in (2000000000, data.pk):
        assert sum(f"no process {pk} " in line for line in log.splitlines()) == 1


def test_tasks_are_sent_as_json(broker_profile):
    node = engine.submit(ShellJob, command=orm.Str("echo queued"))  # no daemon: it waits

    async def take(_channel, queue):
        message = await queue.get(no_ack=True, timeout=10)
        return message.body

    assert json.loads(_task_queue(broker_profile, take)) == [{"pid": node.pk}, True]


def test_pause_play_and_kill_reach_the_worker_through_the_json_codec(
    broker_profile, daemon, run_cli
):
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 60"))
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)

    paused = run_cli("-p", "test", "process", "pause", str(node.pk), "-t", "10")
    assert paused.exit_code == 0, paused.output
    assert "sent to the worker" in paused.output
    wait_for([node], lambda n: n.paused, timeout=10)

    played = run_cli("-p", "test", "process", "play", str(node.pk), "-t", "10")
    assert played.exit_code == 0, played.output
    assert "sent to the worker" in played.output
    wait_for([node], lambda n: not n.paused, timeout=10)

    killed = run_cli("-p", "test", "process", "kill", str(node.pk), "-t", "10")
    assert killed.exit_code == 0, killed.output
    assert "sent to the worker" in killed.output
    wait_for([node], lambda n: n.is_terminated, timeout=30)
    assert node.is_killed
    time.sleep(0.5)
    assert "Traceback" not in DaemonFiles(broker_profile).log.read_text()
