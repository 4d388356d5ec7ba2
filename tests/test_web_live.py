"""`veglia web`'s live hub and its change probe (issue #31): a watched view is loaded again
only when a change touched what it shows, and the views of one kind are loaded together, at
most once an interval, however many browsers watch how many of them."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

from veglia import orm
from veglia.plugins.web.live import EVERYTHING, Changes, LiveHub, view_key


async def wait_until(condition: Any, deadline: float = 10.0) -> None:
    """Until ``condition()`` holds; fails after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the condition never held"
        await asyncio.sleep(0.01)


def _covers(view: dict) -> frozenset[int]:
    return frozenset({view["pk"]})


def test_fifty_watched_jobs_are_loaded_in_one_round_an_interval_and_only_those_changed():
    interval = 0.2
    database = {pk: 0 for pk in range(50)}
    changes: list[Changes] = []
    loads: list[tuple[float, int]] = []

    def probe() -> Changes:
        return changes.pop(0) if changes else Changes()

    def load_of(pk: int):
        def load() -> dict:
            loads.append((time.monotonic(), pk))
            time.sleep(0.005)  # the first round lasts longer than a probe's interval
            return {"pk": pk, "value": database[pk]}

        return load

    async def scenario() -> dict[int, list[int]]:
        hub = LiveHub(interval, probe=probe, slow_interval=60)
        seen: dict[int, list[int]] = {pk: [] for pk in database}

        async def watch(pk: int, record: bool) -> None:
            key = view_key("job", {"pk": pk})
            async for view in hub.watch(key, load_of(pk), covers=_covers):
                if view is not None and record:
                    seen[pk].append(view["value"])

        # Writes elsewhere while the first round loads: they touch none of the fifty.
        changes.extend([Changes(frozenset({999}))] * 3)
        watchers = [asyncio.create_task(watch(pk, n == 0)) for pk in database for n in range(2)]
        await wait_until(lambda: all(seen.values()))
        assert hub.rounds["job"] == 1 and len(loads) == 50  # one round for all fifty
        await asyncio.sleep(10 * interval)
        assert len(loads) == 50 and not changes  # nothing they show changed: nothing loaded
        quiet_from = len(loads)
        for pk in (3, 7):
            database[pk] += 1
        changes.append(Changes(frozenset({3, 7, 999})))
        await wait_until(lambda: seen[3][-1] == 1 and seen[7][-1] == 1)
        assert sorted(pk for _, pk in loads[quiet_from:]) == [3, 7]  # only those it touched
        for _ in range(10):  # every job changes at every probe
            for pk in database:
                database[pk] += 1
            changes.append(Changes(frozenset(database)))
            await asyncio.sleep(interval / 2)
        await wait_until(lambda: all(values[-1] == database[pk] for pk, values in seen.items()))
        for watcher in watchers:
            watcher.cancel()
        return seen

    started = time.monotonic()
    seen = asyncio.run(scenario())
    rounds = sorted({round(at, 3) for at, _ in loads})
    starts = [rounds[0]]
    for at in rounds[1:]:  # a round's loads follow each other: its start is its first load
        if at - starts[-1] >= interval * 0.95:
            starts.append(at)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert all(gap >= interval * 0.95 for gap in gaps), gaps
    assert len(starts) <= (time.monotonic() - started) / interval + 1
    assert all(values == sorted(set(values)) for values in seen.values())  # only changes


def test_a_watched_view_is_loaded_again_only_when_the_probe_sees_a_change():
    interval = 0.2
    database = {"changes": Changes(), "value": "first"}
    loads: list[str] = []

    def load() -> dict:
        loads.append(database["value"])
        return {"value": database["value"]}

    async def scenario() -> list[dict]:
        hub = LiveHub(interval, probe=lambda: database["changes"], slow_interval=60)
        key = view_key("overview", {})
        seen: list[dict] = []

        async def watch() -> None:
            async for view in hub.watch(key, load):
                if view is not None:
                    seen.append(view)
                if len(seen) == 2:
                    return

        watching = asyncio.create_task(watch())
        await wait_until(lambda: seen and hub.probes >= 2)
        quiet_from, probes_from = len(loads), hub.probes
        await asyncio.sleep(15 * interval)  # quiet: the probe runs, nothing is loaded
        assert len(loads) == quiet_from, loads
        assert hub.probes > probes_from
        # A page asked meanwhile is answered from the watched view: no load.
        assert (await hub.view(key, load))["value"] == "first" and len(loads) == quiet_from
        database.update(changes=Changes(elsewhere=True), value="second")
        await asyncio.wait_for(watching, 10 * interval)
        return seen

    seen = asyncio.run(scenario())
    assert [view["value"] for view in seen] == ["first", "second"]


def test_a_view_of_some_nodes_ignores_changes_to_others_and_reloads_on_everything():
    assert not Changes(frozenset({1, 2})).touch(frozenset({3}))
    assert Changes(frozenset({1, 3})).touch(frozenset({3}))
    assert not Changes(frozenset(), elsewhere=True).touch(frozenset({3}))
    assert Changes(frozenset(), elsewhere=True).touch(None)
    assert Changes(frozenset({1})).touch(None)
    assert not Changes().touch(None)
    assert EVERYTHING.touch(frozenset({3})) and EVERYTHING.touch(None)


def _job() -> orm.CalcJobNode:
    node = orm.CalcJobNode(process_type="core.shell")
    node.process_state = "waiting"
    node.computer_pk = orm.load_computer("localhost").pk
    node.store()
    return node


def test_the_probe_names_the_nodes_each_write_shows_on(any_profile):
    from veglia.manage import get_storage
    from veglia.orm.deletion import delete_nodes, plan_deletion
    from veglia.plugins.web.probe import ChangeProbe
    from veglia.storage.tables import nodes

    workers = {"stamp": ()}
    probe = ChangeProbe(outside=lambda: workers["stamp"])
    job, other = _job(), _job()
    assert probe() == EVERYTHING  # the first call knows nothing before it
    assert probe() == Changes()  # nothing changed
    job.set_attribute("scheduler_state", "R")
    assert probe() == Changes(frozenset({job.pk}))
    assert probe() == Changes()  # said once
    made = orm.FolderData()
    made.store([(job, "create", "retrieved")])
    assert probe() == Changes(frozenset({made.pk, job.pk}))  # the job shows its new output
    other.add_log("REPORT", "a line")
    assert probe() == Changes(frozenset({other.pk}))
    workers["stamp"] = ((123, True),)
    assert probe() == Changes(frozenset(), elsewhere=True)  # a worker started
    orm.Computer("cluster", "nowhere.invalid", "core.ssh", "core.slurm").store()
    assert probe() == EVERYTHING
    assert probe() == Changes()
    # A transaction that wrote before the newest write but committed after it: seen once.
    late = datetime.now(timezone.utc) - timedelta(seconds=2)
    with get_storage().engine.begin() as connection:
        connection.execute(sa.update(nodes).where(nodes.c.id == other.pk).values(mtime=late))
    assert probe() == Changes(frozenset({other.pk}))
    assert probe() == Changes()
    # Two writes within one second of a clock of whole seconds leave the same mtime.
    whole_second = datetime.now(timezone.utc).replace(microsecond=0)
    for _ in range(2):
        with get_storage().engine.begin() as connection:
            connection.execute(
                sa.update(nodes).where(nodes.c.id == job.pk).values(mtime=whole_second)
            )
        assert probe() == Changes(frozenset({job.pk}))
    time.sleep(1.1)
    probe()  # may say it once more: it cannot tell a third write in that second from none
    assert probe() == Changes()  # a second after it, the same mtime is no longer news
    alone = orm.Int(5).store()
    assert probe() == Changes(frozenset({alone.pk}))
    delete_nodes(plan_deletion([alone.pk]))
    assert probe() == EVERYTHING
    assert probe() == Changes()


def test_the_probe_of_a_quiet_database_is_one_statement(any_profile):
    from veglia.manage import get_storage
    from veglia.plugins.web.probe import ChangeProbe
    from veglia.storage.tables import nodes

    _job()
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    with get_storage().engine.begin() as connection:
        connection.execute(sa.update(nodes).values(mtime=an_hour_ago))
    probe = ChangeProbe(outside=None)
    probe()
    statements: list[str] = []
    engine = get_storage().engine
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        assert probe() == Changes()
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    assert len(statements) == 1, statements
