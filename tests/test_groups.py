"""Groups of nodes, from Python (as AiiDA's ``Group``) and from `veglia group`, on SQLite and
PostgreSQL; `veglia process list -G` lists a group's processes."""

from __future__ import annotations

import re

import pytest

from veglia.exceptions import InvalidOptionError, NotExistent, StorageError
from veglia_fixtures.profiles import make_profile


def ok(result):
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def db_profile(veglia_home, storage_url):
    """The `test` profile on SQLite, then on a fresh PostgreSQL database."""
    from veglia.engine.runner import set_runner

    yield make_profile(**{"storage.url": storage_url})
    set_runner(None)


def test_group_api_mirrors_aiida(db_profile):
    from veglia import orm

    one, two = orm.Int(1).store(), orm.Str("two").store()
    group = orm.Group(label="inputs", description="numbers").store()
    assert group.is_stored and group.pk and len(group.uuid) == 36 and group.time is not None
    assert group.add_nodes([one, two]) == 2
    assert group.add_nodes(one) == 0  # already in it: nothing changes
    assert group.nodes == [one, two] and group.count() == 2

    loaded = orm.load_group("inputs")
    assert loaded == group and loaded.description == "numbers"
    assert orm.load_group(group.pk) == group == orm.load_group(group.uuid[:8])
    assert [node.value for node in loaded.nodes] == [1, "two"]

    with pytest.raises(StorageError, match="exists already"):
        orm.Group(label="inputs").store()
    with pytest.raises(InvalidOptionError, match="not a number"):
        orm.Group(label="42")
    with pytest.raises(StorageError, match="store it first"):
        group.add_nodes(orm.Int(3))

    assert group.remove_nodes([two]) == 1 and group.nodes == [one]
    group.delete()
    with pytest.raises(NotExistent, match="No group 'inputs'"):
        orm.load_group("inputs")
    assert orm.load_node(one.pk).value == 1  # the nodes stay


def test_deleting_a_node_takes_it_out_of_its_groups(db_profile):
    from veglia import manage, orm
    from veglia.storage.models import Node

    node = orm.Int(5).store()
    group = orm.Group(label="g").store()
    group.add_nodes(node)
    with manage.get_storage().session() as session:
        session.execute(Node.__table__.delete().where(Node.id == node.pk))
    assert group.nodes == [] and group.count() == 0


def test_group_commands(run_cli, profile):
    from veglia import orm

    one, two, three = (orm.Int(n, label=f"n{n}").store() for n in (1, 2, 3))
    empty = ok(run_cli("group", "list")).stdout
    assert "No groups yet" in empty and "veglia group create" in empty

    created = ok(run_cli("group", "create", "numbers", "-d", "three ints"))
    assert "Created group 'numbers'" in created.stdout
    again = run_cli("group", "create", "numbers")
    assert again.exit_code == 4
    assert again.stderr.startswith("Error: A group labelled 'numbers' exists already")
    wrong = run_cli("group", "create", "7")
    assert wrong.exit_code == 3 and "not a number" in wrong.stderr

    prefix = next(two.uuid[:n] for n in range(8, 37) if not two.uuid[:n].isdigit())
    added = ok(run_cli("group", "add", "numbers", str(one.pk), prefix))
    assert "Added 2 nodes to group 'numbers' (it holds 2)" in added.stdout
    added = ok(run_cli("group", "add", "numbers", str(one.pk), str(three.pk)))
    assert "Added 1 node to group 'numbers' (it holds 3); 1 node in it already" in added.stdout
    missing = run_cli("group", "add", "numbers", "99999")
    assert missing.exit_code == 4 and "No node with pk or UUID '99999'" in missing.stderr
    nogroup = run_cli("group", "add", "nope", str(one.pk))
    assert nogroup.exit_code == 4 and "No group 'nope' (groups: numbers)" in nogroup.stderr

    listed = ok(run_cli("group", "list")).stdout
    assert re.search(r"\d+\s+numbers\s+3\s+\d+s ago\s+three ints", listed)
    raw = ok(run_cli("group", "list", "--raw")).stdout.split("\t")
    assert raw[1:3] == ["numbers", "3"]

    shown = ok(run_cli("group", "show", "numbers")).stdout
    assert "three ints" in shown and re.search(r"nodes\s+3", shown)
    for node in (one, two, three):
        assert re.search(rf"{node.pk}\s+{node.uuid[:8]}\s+Int\s+n{node.value}\s", shown), shown
    rows = [
        line.split("\t")
        for line in ok(run_cli("group", "show", "numbers", "--raw")).stdout.splitlines()
    ]
    assert [(row[0], row[1], row[2]) for row in rows] == [
        (str(n.pk), n.uuid, "Int") for n in (one, two, three)
    ]

    removed = ok(run_cli("group", "remove", "numbers", str(two.pk), str(two.pk)))
    assert "Removed 1 node from group 'numbers' (it holds 2)" in removed.stdout
    removed = ok(run_cli("group", "remove", "numbers", str(two.pk)))
    assert "Removed 0 nodes" in removed.stdout and "1 node not in it" in removed.stdout
    assert run_cli("group", "remove", "numbers").exit_code == 3

    refused = run_cli("group", "delete", "numbers")
    assert refused.exit_code == 4 and "holds 2 nodes" in refused.stderr
    assert "--force" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    deleted = ok(run_cli("group", "delete", "numbers", "--force"))
    assert "Deleted group 'numbers'; its 2 nodes stay" in deleted.stdout
    assert [orm.load_node(n.pk).value for n in (one, two, three)] == [1, 2, 3]

    ok(run_cli("group", "create", "empty"))
    assert "Deleted group 'empty'." in ok(run_cli("group", "delete", "empty")).stdout
    assert "No groups yet" in ok(run_cli("group", "list")).stdout


def test_process_list_by_group(run_cli, profile):
    from veglia import orm

    processes = []
    for label in ("kept", "other", "kept-too"):
        node = orm.CalcJobNode(process_type="core.shell", label=label)
        node.process_state = "finished"
        processes.append(node.store())
        node.set_exit(0, None)
    group = orm.Group(label="campaign").store()
    group.add_nodes([processes[0], processes[2], orm.Int(1).store()])

    rows = ok(run_cli("process", "list", "-a", "-G", "campaign", "--raw", "-P", "pk,label"))
    assert rows.stdout.splitlines() == [f"{processes[0].pk}\tkept", f"{processes[2].pk}\tkept-too"]
    assert ok(run_cli("process", "list", "-G", "campaign", "--raw")).stdout == ""  # none active
    unknown = run_cli("process", "list", "-G", "nope")
    assert unknown.exit_code == 4 and "No group 'nope'" in unknown.stderr


def test_process_list_limit_counts_group_members_only(run_cli, profile):
    from veglia import orm

    members = []
    for i in range(12):
        node = orm.CalcJobNode(process_type="core.shell", label=f"job{i}")
        node.process_state = "finished"
        node.store().set_exit(0, None)
        if i % 3 == 0:
            members.append(node)
    orm.Group(label="every-third").store().add_nodes(members)
    # The newest processes are not in the group: a limit taken before the group filter
    # would leave one member, or none.
    rows = ok(run_cli("process", "list", "-a", "-G", "every-third", "-l", "3", "--raw", "-P", "pk"))
    assert rows.stdout.split() == [str(n.pk) for n in members[-3:]]
    rows = ok(run_cli("process", "list", "-a", "-G", "every-third", "-l", "5", "--raw", "-P", "pk"))
    assert rows.stdout.split() == [str(n.pk) for n in members]


def test_a_uuid_prefix_of_digits_alone_finds_its_group_and_node(db_profile):
    """One UUID in 40 or so starts with eight digits: a prefix of digits that is no pk still
    finds what it starts, as any other prefix does; a number is a pk only."""
    import sqlalchemy as sa

    from veglia import orm
    from veglia.manage import get_storage
    from veglia.storage import models

    node = orm.Int(7).store()
    group = orm.Group(label="digits").store()
    with get_storage().connection() as connection:
        connection.execute(
            sa.update(models.Node.__table__)
            .where(models.Node.__table__.c.id == node.pk)
            .values(uuid="86536159-0000-4000-8000-000000000001")
        )
        connection.execute(
            sa.update(models.Group.__table__)
            .where(models.Group.__table__.c.id == group.pk)
            .values(uuid="12345678-0000-4000-8000-000000000002")
        )
    assert orm.load_node("86536159").pk == node.pk
    assert orm.load_group("12345678").pk == group.pk
    assert orm.load_node(str(node.pk)).pk == node.pk  # digits that are a pk: the pk
    with pytest.raises(NotExistent):
        orm.load_node(86536159)
    with pytest.raises(NotExistent):
        orm.load_group(12345678)
