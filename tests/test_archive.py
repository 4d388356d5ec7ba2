"""`veglia archive create / import`: real finished jobs carried from one profile to another,
SQLite to PostgreSQL and back, with their files, links, logs, groups, computer and code; a
second import adds nothing; a damaged archive is refused whole."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from veglia_fixtures.profiles import make_profile


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def _url(request, kind: str, tmp_path: Path, name: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / f'{name}.sqlite'}"
    return request.getfixturevalue("postgres_database")


def _node_count() -> int:
    from veglia.manage import get_storage
    from veglia.storage.models import Node

    with get_storage().session() as session:
        return session.scalar(sa.select(sa.func.count()).select_from(Node))


def snapshot(uuids) -> dict:
    """What a user can see of these nodes, by UUID (pks differ between profiles)."""
    from veglia.orm import load_node
    from veglia.orm.nodes import as_utc

    seen = {}
    for uuid in sorted(uuids):
        node = load_node(uuid)
        attributes = node.attributes
        if "code" in attributes:
            attributes["code"].pop("pk")  # a pk of its profile: checked on its own
        seen[uuid] = {
            "type": node.node_type,
            "label": node.label,
            "ctime": as_utc(node.ctime).isoformat(),
            "attributes": attributes,
            "extras": node.extras,
            "files": {path: node.get_object_content(path) for path in node.list_object_names()},
            "incoming": sorted(
                (label, kind, source.uuid)
                for label, kind, source in node._linked(True, ("input", "create", "output", "call"))
            ),
            "state": getattr(node, "process_state", None),
            "exit": getattr(node, "exit_status", None),
            "logs": [(log.levelname, log.message) for log in getattr(node, "logs", [])],
        }
    return seen


def _archived_uuids(path: Path) -> set[str]:
    with zipfile.ZipFile(path) as archive:
        return {node["uuid"] for node in json.loads(archive.read("data.json"))["nodes"]}


def _run_jobs(tmp_path: Path):
    """On the loaded profile: a core.shell job with an input file and an output file, in
    group 'campaign'; a core.arithmetic.add job through a code on a second computer."""
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("tr a-z A-Z < input.txt > upper.txt; echo done")
    builder.files = {"input.txt": orm.SinglefileData(b"carried over\n", "input.txt")}
    builder.outputs = orm.List(["upper.txt"])
    _, shell = engine.run_get_node(builder)
    assert shell.is_finished_ok, shell.exit_message

    computer = orm.Computer(
        label="elsewhere",
        hostname="localhost",
        transport_type="core.local",
        scheduler_type="core.direct",
        properties={"workdir": str(tmp_path / "elsewhere-work")},
    ).store()
    computer.configure()
    code = orm.Code(
        label="adder",
        computer=computer,
        executable="/bin/bash",
        default_calc_job_plugin="core.arithmetic.add",
    ).store()
    builder = code.get_builder()
    builder.x, builder.y = orm.Int(2), orm.Int(3)
    _, add = engine.run_get_node(builder)
    assert add.is_finished_ok, add.exit_message

    group = orm.Group(label="campaign", description="the shell job").store()
    group.add_nodes(shell)
    return shell, add


@pytest.mark.parametrize(
    ("source_kind", "target_kind"), [("sqlite", "postgresql"), ("postgresql", "sqlite")]
)
def test_round_trip_of_finished_jobs(
    request, run_cli, veglia_home, tmp_path, source_kind, target_kind
):
    from veglia import orm
    from veglia.exceptions import ConfigurationError

    make_profile("source", **{"storage.url": _url(request, source_kind, tmp_path, "source")})
    shell, add = _run_jobs(tmp_path)
    archive = tmp_path / "jobs.zip"
    written = ok(
        run_cli("-p", "source", "archive", "create", str(archive), str(add.pk), "-G", "campaign")
    )
    uuids = _archived_uuids(archive)
    # The jobs, their inputs (the file too), their outputs: each job's 4 or 5 nodes.
    expected = {shell.uuid, add.uuid}
    for job in (shell, add):
        expected |= {node.uuid for _, node in job.inputs.items()}
        expected |= {node.uuid for _, node in job.outputs.items()}
    assert uuids == expected
    assert (
        f"Wrote {archive}: {len(expected)} nodes (2 processes, {len(expected) - 2} data)"
        in written.stdout
    )
    assert "1 group" in written.stdout
    before = snapshot(uuids)

    make_profile("target", **{"storage.url": _url(request, target_kind, tmp_path, "target")})
    imported = ok(run_cli("-p", "target", "archive", "import", str(archive)))
    assert f"Imported {archive}: {len(expected)} new nodes" in imported.stdout
    assert "new group campaign" in imported.stdout
    created = "Created computer 'elsewhere'; set it up to run jobs with `veglia computer configure"
    assert f"{created} elsewhere`" in imported.stdout
    assert "Created code 'adder@elsewhere'" in imported.stdout
    assert "computer 'localhost'" not in imported.stdout  # there already, by label

    assert snapshot(uuids) == before
    shell_here, add_here = orm.load_node(shell.uuid), orm.load_node(add.uuid)
    assert shell_here.outputs.stdout.get_content() == b"done\n"
    assert shell_here.outputs.files__upper_txt.get_content() == b"CARRIED OVER\n"
    assert add_here.outputs.sum.value == 5
    assert add_here.outputs.sum.creator.uuid == add.uuid
    assert add_here.outputs.retrieved.get_object_content("aiida.out") == b"5\n"
    assert {label for label, _ in add_here.inputs.items()} == {"x", "y"}
    code = orm.load_code("adder@elsewhere")
    assert add_here.get_attribute("code")["pk"] == code.pk and code.executable == "/bin/bash"
    assert add_here.computer_pk == orm.load_computer("elsewhere").pk
    with pytest.raises(ConfigurationError, match="not configured"):
        orm.load_computer("elsewhere").get_auth_params()
    assert orm.load_group("campaign").nodes == [shell_here]

    # What the user sees from the command line in the target profile.
    assert (
        ok(run_cli("-p", "target", "calcjob", "outputcat", str(shell_here.pk))).stdout == "done\n"
    )
    assert ok(run_cli("-p", "target", "calcjob", "inputls", str(shell_here.pk))).stdout.split() == [
        "_veglia_submit.sh",
        "_veglia_trace.sh",
        "input.txt",
    ]
    assert (
        ok(run_cli("-p", "target", "calcjob", "inputcat", str(shell_here.pk), "input.txt")).stdout
        == "carried over\n"
    )
    report = ok(run_cli("-p", "target", "process", "report", str(add_here.pk))).stdout
    assert re.search(r"submitted job \d+", report)
    listed = ok(
        run_cli("-p", "target", "process", "list", "-a", "-G", "campaign", "--raw", "-P", "pk")
    )
    assert listed.stdout.split() == [str(shell_here.pk)]

    count = _node_count()
    again = ok(run_cli("-p", "target", "archive", "import", str(archive)))
    assert f"Nothing new in {archive}: its {len(expected)} nodes are here already." in again.stdout
    assert _node_count() == count and snapshot(uuids) == before
    assert len(orm.load_group("campaign").nodes) == 1


def _rewrite(source: Path, target: Path, change) -> None:
    """A copy of the archive with ``change(name, content)`` applied to each member."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for name in old.namelist():
            new.writestr(name, change(name, old.read(name)))


def test_a_damaged_archive_is_refused_and_imports_nothing(run_cli, veglia_home, tmp_path):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    make_profile("source")
    _, job = engine.run_get_node(
        CalculationFactory("core.arithmetic.add"), x=orm.Int(4), y=orm.Int(5)
    )
    archive = tmp_path / "good.zip"
    ok(run_cli("-p", "source", "archive", "create", str(archive), str(job.pk)))
    make_profile("target", **{"storage.url": f"sqlite:///{tmp_path / 'target.sqlite'}"})
    empty = _node_count()

    damaged = {}
    content = archive.read_bytes()
    damaged["truncated"] = content[: len(content) // 2]
    middle = bytearray(content)
    middle[len(middle) // 3] ^= 0xFF
    damaged["flipped"] = bytes(middle)
    damaged["text"] = b"just some text\n"
    for name, data in damaged.items():
        (tmp_path / f"{name}.zip").write_bytes(data)

    def blob(name, data):
        return b"not what was stored" if name.startswith("repo/") and data == b"9\n" else data

    _rewrite(archive, tmp_path / "blob.zip", blob)

    def relabel(name, data):
        return (
            data.replace(b'"core.arithmetic.add"', b'"core.shell"') if name == "data.json" else data
        )

    _rewrite(archive, tmp_path / "rows.zip", relabel)
    _rewrite(archive, tmp_path / "nometa.zip", lambda name, data: data)
    with zipfile.ZipFile(tmp_path / "nometa.zip", "w") as bare:
        bare.writestr("data.json", "{}")

    expected = {
        "truncated": "is not a veglia archive, or is damaged: it is not a whole zip file",
        "flipped": "is damaged",
        "text": "is not a veglia archive, or is damaged",
        "blob": "is damaged: the file content",
        "rows": "is damaged: data.json does not match the checksum in metadata.json",
        "nometa": "is not a veglia archive: it has no metadata.json",
    }
    for name, words in expected.items():
        result = run_cli("-p", "target", "archive", "import", str(tmp_path / f"{name}.zip"))
        assert result.exit_code == 9, (name, result.output)
        message = result.stderr.strip()
        assert len(message.splitlines()) == 1 and message.startswith("Error: "), (name, message)
        assert words in message, (name, message)
        assert "Traceback" not in result.output
        assert _node_count() == empty, name
    assert (
        "Nothing was imported"
        in run_cli("-p", "target", "archive", "import", str(tmp_path / "blob.zip")).stderr
    )
    missing = run_cli("-p", "target", "archive", "import", str(tmp_path / "none.zip"))
    assert missing.exit_code == 9 and "No archive file" in missing.stderr

    ok(run_cli("-p", "target", "archive", "import", str(archive)))  # the good one still does
    assert _node_count() > empty


def test_what_an_archive_takes_and_refuses(run_cli, profile, tmp_path):
    from veglia import orm
    from veglia.orm.archive import collect

    data = orm.Int(1).store()
    workflow = orm.WorkflowNode(process_type="demo.workflow")
    workflow.process_state = "finished"
    workflow.store([(data, "input", "x")])
    step = orm.CalcJobNode(process_type="core.shell")
    step.process_state = "finished"
    step.store([(data, "input", "x"), (workflow, "call", "CALL")])
    made = orm.Str("made").store([(step, "create", "out")])
    other = orm.Str("other").store([(step, "create", "other")])
    unrelated = orm.Int(2).store()

    # Data takes its creator, which takes its inputs, its other outputs and its caller.
    taken = {node["uuid"] for node in collect([made.pk])["nodes"]}
    assert taken == {made.uuid, step.uuid, data.uuid, other.uuid, workflow.uuid}
    assert unrelated.uuid not in taken
    # Input data alone does not take the processes that used it.
    assert {node["uuid"] for node in collect([data.pk])["nodes"]} == {data.uuid}

    running = orm.CalcJobNode(process_type="core.shell")
    running.process_state = "running"
    running.store([(data, "input", "x")])
    refused = run_cli("archive", "create", str(tmp_path / "a.zip"), str(running.pk))
    assert (
        refused.exit_code == 1 and f"Process {running.pk} (running) has not ended" in refused.stderr
    )
    assert not (tmp_path / "a.zip").exists() and not list(tmp_path.glob(".a.zip*"))

    nothing = run_cli("archive", "create", str(tmp_path / "a.zip"))
    assert nothing.exit_code == 9 and "name nodes (PK...) or groups (-G GROUP)" in nothing.stderr
    orm.Group(label="empty").store()
    empty = run_cli("archive", "create", str(tmp_path / "a.zip"), "-G", "empty")
    assert empty.exit_code == 9 and "group 'empty' is empty" in empty.stderr

    target = tmp_path / "b.zip"
    ok(run_cli("archive", "create", str(target), str(made.pk)))
    exists = run_cli("archive", "create", str(target), str(made.pk))
    assert (
        exists.exit_code == 9 and "exists already" in exists.stderr and "--force" in exists.stderr
    )
    ok(run_cli("archive", "create", str(target), str(made.pk), "--force"))


def test_groups_on_import_keep_their_uuid_and_never_take_a_label(run_cli, veglia_home, tmp_path):
    from veglia import orm

    make_profile("source")
    first, second = orm.Int(1).store(), orm.Int(2).store()
    group = orm.Group(label="results").store()
    group.add_nodes(first)
    archive = tmp_path / "one.zip"
    ok(run_cli("-p", "source", "archive", "create", str(archive), "-G", "results"))

    make_profile("target", **{"storage.url": f"sqlite:///{tmp_path / 'target.sqlite'}"})
    orm.Group(label="results", description="mine").store()
    imported = ok(run_cli("-p", "target", "archive", "import", str(archive)))
    assert "Imported" in imported.stdout and "new group results_1" in imported.stdout
    assert "Group 'results' exists here already: imported as 'results_1'." in imported.stdout
    assert orm.load_group("results").nodes == []
    assert [node.uuid for node in orm.load_group("results_1").nodes] == [first.uuid]
    assert orm.load_group("results_1").uuid == group.uuid

    # The same group again, with one more node: the node is added to it, by UUID.
    from veglia import load_profile

    load_profile("source")
    group.add_nodes(second)
    bigger = tmp_path / "two.zip"
    ok(run_cli("-p", "source", "archive", "create", str(bigger), "-G", "results"))
    load_profile("target")
    again = ok(run_cli("-p", "target", "archive", "import", str(bigger)))
    assert "1 new node, 1 here already" in again.stdout
    assert [node.value for node in orm.load_group("results_1").nodes] == [1, 2]
    assert orm.load_group("results").nodes == []
