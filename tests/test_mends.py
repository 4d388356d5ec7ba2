"""Small fixes found in review: each test shows what a user sees."""

from __future__ import annotations

import re

from veglia import engine, orm
from veglia.entry_points import CalculationFactory

ShellJob = CalculationFactory("core.shell")


def test_workdir_root_is_the_workdir_default_that_setup_offers_show_shows_and_jobs_use(
    profile, run_cli, tmp_path
):
    root = tmp_path / "jobs"
    root.mkdir(mode=0o700)
    assert run_cli("-p", "test", "config", "set", "workdir.root", str(root)).exit_code == 0
    profile.options["workdir.root"] = str(root)  # what a process loading the profile now reads

    # Every field a flag but workdir (and the plugins' properties): asked, the root offered.
    setup = run_cli(
        "-p", "test", "computer", "setup", "-L", "rooted", "-H", "localhost", "-D", "",
        "-T", "core.local", "-S", "core.direct", "--safe-interval", "0",
        "--minimum-poll-interval", "0.1",
        input="\n" * 20,
    )  # fmt: skip
    assert setup.exit_code == 0, setup.output
    assert f"workdir [{root}]:" in setup.output

    shown = run_cli("-p", "test", "computer", "show", "rooted")
    assert shown.exit_code == 0, shown.output
    assert re.search(rf"workdir\s+{re.escape(str(root))} \(default\)", shown.stdout)

    orm.load_computer("rooted").configure()
    _, node = engine.run_get_node(
        ShellJob, command=orm.Str("true"), metadata={"computer": "rooted"}
    )
    assert node.is_finished_ok, node.exit_message
    assert node.remote_workdir.startswith(f"{root}/"), node.remote_workdir


def _give_uuids(model: type, pks: list[int], uuids: list[str]) -> None:
    from veglia.manage import get_storage

    with get_storage().session() as session:
        for pk, uuid in zip(pks, uuids, strict=True):
            session.get(model, pk).uuid = uuid


def test_nodes_and_groups_by_uuid_prefix_are_found_or_refused_alike(profile, run_cli):
    from veglia.storage import models

    uuids = ["abcd0000-0000-4000-8000-000000000000", "abcd1111-0000-4000-8000-000000000000"]
    nodes = [orm.Int(1).store(), orm.Int(2).store()]
    _give_uuids(models.Node, [n.pk for n in nodes], uuids)
    groups = [orm.Group("first").store(), orm.Group("second").store()]
    _give_uuids(models.Group, [g.pk for g in groups], uuids)

    not_found = {"node": "No node with pk or UUID 'abce'.", "group": "No group 'abce' ("}
    for kind in ("node", "group"):
        ambiguous = run_cli("-p", "test", kind, "show", "ABCD")
        assert ambiguous.exit_code == 4, ambiguous.output
        assert f"More than one {kind} has a UUID starting with 'ABCD'." in ambiguous.stderr
        found = run_cli("-p", "test", kind, "show", "ABCD1")
        assert found.exit_code == 0 and uuids[1] in found.stdout, found.output
        missing = run_cli("-p", "test", kind, "show", "abce")
        assert missing.exit_code == 4 and not_found[kind] in missing.stderr, missing.output
    # Too short for a prefix: a node says so; a group looks for that label only.
    short = run_cli("-p", "test", "node", "show", "abc")
    assert "a UUID prefix is 4 or more of its first hex digits" in short.stderr
    short = run_cli("-p", "test", "group", "show", "abc")
    assert "No group 'abc' (groups: first, second)" in short.stderr
