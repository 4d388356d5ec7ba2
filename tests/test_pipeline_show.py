"""A pipeline setup's progress as users see it: `veglia pipeline show` and `list` count its
elements, estimate the time left, say what the last look at its source found and which
elements failed and why; `veglia process list --setup` lists its runs with their element.
The state is built through the intake's own storage functions, without a daemon, on SQLite
and PostgreSQL."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from veglia.cli.cmd_pipeline import eta_text
from veglia.pipeline_elements import Progress


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def make_setup(name: str, folder: Path, max_active: int | None = None):
    from veglia.pipeline_setups import PipelineSetup, set_pipeline_enabled

    data = {
        "name": name,
        "process": "core.shell",
        "input_port": "files",
        "inputs": {"command": "wc -l *.txt"},
        "options": {"computer": "localhost", "max_wallclock_seconds": 600},
        "source": {"entry_point": "core.folder", "settings": {"path": str(folder)}},
    }
    if max_active:
        data["max_active"] = max_active
    setup = PipelineSetup.from_dict(data).store()
    set_pipeline_enabled(name, True)
    return setup


def element(identity: str):
    from veglia.datasources import Element

    return Element(identity, (f"/data/{identity}",), f"{len(identity):064x}"[-64:])


def run_of(setup, row, state: str, exit_status: int | None = None, took: float | None = None):
    """A stored run of element ``row`` (as the intake stores one), its claim marked
    started; ``took`` seconds from its creation to its end."""
    import sqlalchemy as sa

    from veglia import orm
    from veglia.manage import get_storage
    from veglia.orm.attributes import PIPELINE_RUN
    from veglia.pipeline_elements import mark_started
    from veglia.storage import tables
    from veglia_fixtures.profiles import stored_process

    run = {"setup": setup.name, "version": setup.version, "element": row.id}
    node = stored_process(
        orm.CalcJobNode,
        state,
        label=f"run of {row.identity}",
        exit_status=exit_status,
        **{PIPELINE_RUN: {**run, "identity": row.identity}},
    )
    mark_started([(row.id, node.pk)], "w")
    if took is not None:
        nodes = tables.nodes
        with get_storage().connection() as connection:
            ended = connection.scalar(sa.select(nodes.c.mtime).where(nodes.c.id == node.pk))
            connection.execute(
                sa.update(nodes)
                .where(nodes.c.id == node.pk)
                .values(ctime=ended - timedelta(seconds=took), mtime=ended)
            )
    return node.pk


@pytest.fixture
def state(any_profile, tmp_path):
    """Setup ``count-lines`` (at most 4 at once): of its 6 elements a.txt and b.txt are done
    (in 2 and 4 minutes), c.txt failed, d.txt runs, e.txt was refused, f.txt waits to
    start; its source's last look found a problem and g.txt still being written. Setup
    ``many``: 12 elements refused, one to start, and its source failing now. One process
    of no setup, and one of ``many``'s runs, are not ``count-lines``'."""
    from veglia import orm
    from veglia.datasources import Listing
    from veglia.pipeline_elements import (
        claim_new,
        mark_refused,
        record_listing,
        record_source_error,
        release_claims,
    )
    from veglia_fixtures.profiles import stored_process

    setup = make_setup("count-lines", tmp_path, max_active=4)
    listing = Listing(
        elements=tuple(element(f"{x}.txt") for x in "abcdef"),
        problems=("notes.md: not matched by *.txt",),
        waiting=("g.txt",),
    )
    assert record_listing(setup, listing) == 6
    rows = {row.identity: row for row in claim_new(setup, None, "w")}
    pks = {
        "a.txt": run_of(setup, rows["a.txt"], "finished", 0, took=120),
        "b.txt": run_of(setup, rows["b.txt"], "finished", 0, took=240),
        "c.txt": run_of(setup, rows["c.txt"], "finished", 1, took=60),
        "d.txt": run_of(setup, rows["d.txt"], "running"),
    }
    mark_refused(rows["e.txt"].id, "its files could not be read: /data/e.txt is gone", "w")
    release_claims([rows["f.txt"].id], "w")

    many = make_setup("many", tmp_path)
    record_listing(many, Listing(elements=tuple(element(f"m{n:02}.txt") for n in range(13))))
    for row in claim_new(many, 12, "w"):
        mark_refused(row.id, f"{row.identity} does not fit the input port", "w")
    record_source_error("many", "cannot list /data/many: No such file or directory")
    other = make_setup("other", tmp_path)
    record_listing(other, Listing(elements=(element("a.txt"),)))
    (other_row,) = claim_new(other, None, "w")
    others = [
        run_of(other, other_row, "running"),
        stored_process(orm.CalcJobNode, "running", label="not a run").pk,
    ]
    return pks, others


def field(text: str, name: str) -> str:
    found = re.search(rf"^{re.escape(name)}  +(.*?)\s*$", text, re.MULTILINE)
    assert found, (name, text)
    return found.group(1)


def test_show_counts_elements_estimates_and_names_failures(state, run_cli):
    pks, _ = state
    shown = ok(run_cli("pipeline", "show", "count-lines")).stdout
    assert re.search(r"max active\s+4", shown)  # what it showed before stays
    counts = {
        name: field(shown, name)
        for name in ("elements seen", "to start", "running", "done", "failed")
    }
    assert counts == {
        "elements seen": "6",
        "to start": "1",
        "running": "1",
        "done": "2",
        "failed": "2",
    }
    # Runs take 3 minutes on average; 2 left, 4 at once.
    assert field(shown, "time to finish") == (
        "about 1m 30s for 2 (a run took 3m 0s on average, 4 at once)"
    )
    assert re.fullmatch(r"\d+s ago \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)", field(shown, "last look"))
    assert field(shown, "listed") == "6 element(s)"
    assert field(shown, "problems") == "notes.md: not matched by *.txt"
    assert field(shown, "being written") == "g.txt"
    assert "error" not in shown
    failed = shown[shown.index("Failed element") :]
    assert re.search(rf"^c\.txt\s+{pks['c.txt']}\s+exit 1\s*$", failed, re.MULTILINE), failed
    refused = r"^e\.txt\s+-\s+its files could not be read: /data/e\.txt is gone\s*$"
    assert re.search(refused, failed, re.MULTILINE), failed
    assert "a.txt" not in failed and "d.txt" not in failed and "and " not in failed
    assert "veglia process list --setup count-lines -a" in failed


def test_show_caps_failures_and_says_the_source_error(state, run_cli):
    shown = ok(run_cli("pipeline", "show", "many")).stdout
    assert field(shown, "failed") == "12"
    assert field(shown, "time to finish") == "unknown until a run is done"
    assert field(shown, "error") == "cannot list /data/many: No such file or directory"
    assert "listed" not in shown  # what an earlier look listed is not news
    failed = re.findall(r"^m\d\d\.txt\s+-\s+(.*?)\s*$", shown, re.MULTILINE)
    assert failed == [f"m{n:02}.txt does not fit the input port" for n in range(10)]
    assert "... and 2 more: `veglia pipeline show many --failed` lists them all." in shown

    every = ok(run_cli("pipeline", "show", "many", "--failed")).stdout
    assert re.findall(r"^(m\d\d\.txt)\s", every, re.MULTILINE) == [
        f"m{n:02}.txt" for n in range(12)
    ]
    assert "more" not in every and "max active" not in every
    assert "process list" not in shown  # none of its elements has a run to list
    none = ok(run_cli("pipeline", "show", "other", "--failed")).stdout
    assert "No element of pipeline setup 'other' failed." in none


def test_list_has_a_progress_column(state, run_cli):
    listed = ok(run_cli("pipeline", "list")).stdout
    assert re.search(r"^count-lines\s.*\s2/6 done, 1 running, 2 failed\s*$", listed, re.MULTILINE)
    assert re.search(r"^many\s.*\s0/13 done, 12 failed\s*$", listed, re.MULTILINE)
    assert re.search(r"^other\s.*\s0/1 done, 1 running\s*$", listed, re.MULTILINE)
    raw = ok(run_cli("pipeline", "list", "--raw")).stdout.splitlines()
    assert [line.split("\t")[-1] for line in raw] == [
        "2/6 done, 1 running, 2 failed",
        "0/13 done, 12 failed",
        "0/1 done, 1 running",
    ]


def test_process_list_setup_lists_exactly_its_runs_with_their_element(state, run_cli):
    pks, others = state
    listed = ok(run_cli("process", "list", "--setup", "count-lines", "-a")).stdout
    assert re.search(r"PK\s+Created\s+Label\s+Element\s+Process type", listed), listed
    for identity, pk in pks.items():
        assert re.search(rf"^{pk}\s.*run of {re.escape(identity)}\s+{identity}\s", listed, re.M)
    raw = ok(
        run_cli("process", "list", "--setup", "count-lines", "-a", "--raw", "-P", "pk,element")
    )
    found = dict(line.split("\t") for line in raw.stdout.splitlines())
    assert found == {str(pk): identity for identity, pk in pks.items()}
    assert not set(map(str, others)) & set(found)

    # The other filters apply too: the active runs alone, or the failed.
    active = ok(run_cli("process", "list", "--setup", "count-lines", "--raw", "-P", "pk"))
    assert active.stdout.split() == [str(pks["d.txt"])]
    failed = ok(
        run_cli("process", "list", "--setup", "count-lines", "--failed", "--raw", "-P", "pk")
    )
    assert failed.stdout.split() == [str(pks["c.txt"])]

    assert "No active process matches" in ok(run_cli("process", "list", "--setup", "many")).stdout
    unknown = run_cli("process", "list", "--setup", "nope")
    assert unknown.exit_code != 0 and "No pipeline setup 'nope'" in unknown.stderr


def test_runs_shorter_than_a_second_do_not_read_as_taking_no_time():
    progress = Progress(seen=5, to_start=2, done=3, seconds_per_run=0.3, eta_seconds=0.2)
    assert eta_text(progress, None) == "under 1s for 2 (a run took under 1s on average)"
