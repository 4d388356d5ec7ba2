"""Pipelines that start themselves (issue #33): the daemon lists each enabled setup's data
source and starts one run per new element, one per changed content, never two for the
same; with a real daemon, on this machine and over SSH, with workers killed and restarted."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from veglia.engine.daemon import DaemonFiles
from veglia.manage import get_storage
from veglia.orm.attributes import PIPELINE_RUN
from veglia.orm.nodes import load_node
from veglia.storage import tables


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def runs_of(name: str) -> dict[str, list[int]]:
    """Every run of setup ``name`` by element identity, from the nodes themselves (not the
    intake's own records): what a second start would show."""
    nodes = tables.nodes
    with get_storage().connection() as connection:
        rows = connection.execute(
            sa.select(nodes.c.id, nodes.c.attributes[PIPELINE_RUN]).where(
                nodes.c.attributes[(PIPELINE_RUN, "setup")].as_string() == name
            )
        ).all()
    found: dict[str, list[int]] = {}
    for pk, run in rows:
        found.setdefault(run["identity"], []).append(pk)
    return {identity: sorted(pks) for identity, pks in sorted(found.items())}


def until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.3)


def settled_file(folder: Path, name: str, text: str, age: float = 600) -> Path:
    """A file written ``age`` seconds ago (left alone long enough to be taken)."""
    path = folder / name
    path.write_text(text)
    past = time.time() - age
    os.utime(path, (past, past))
    return path


def make_setup(
    name: str,
    folder: str,
    computer: str = "localhost",
    source_computer: str | None = None,
    settled: float = 3,
    max_active: int | None = None,
    command: str = "cat *.txt",
    **source: object,
):
    from veglia.pipeline_setups import PipelineSetup, set_pipeline_enabled

    data = {
        "name": name,
        "process": "core.shell",
        "input_port": "files",
        "inputs": {"command": command},
        "options": {"computer": computer, "max_wallclock_seconds": 600},
        "source": {
            "entry_point": "core.folder",
            "settings": {"path": folder, "glob": "*.txt", "settled": settled, **source},
        },
    }
    if source_computer:
        data["source"]["computer"] = source_computer
    if max_active:
        data["max_active"] = max_active
    setup = PipelineSetup.from_dict(data).store()
    set_pipeline_enabled(name, True)
    return setup


def ended(pks) -> bool:
    return all(load_node(pk).is_terminated for pk in pks)


def stdout(pk: int) -> bytes:
    return load_node(pk).outputs.stdout.get_content()


def test_the_daemon_runs_each_new_element_once_and_a_changed_one_again(
    veglia_home, smtp_server, daemon, run_cli, tmp_path
):
    """One worker, no broker: each settled file runs once; a file still being written waits;
    a touched file starts nothing; a changed one runs again; the last run ended, one
    notification says the setup has done its source."""
    from veglia.engine.runner import set_runner
    from veglia.pipeline_elements import pipeline_progress
    from veglia_fixtures.profiles import make_profile

    make_profile(
        **{
            "pipeline.poll_interval": "1",
            "notify.email": "lab@example.org",
            "notify.smtp_host": "127.0.0.1",
            "notify.smtp_port": str(smtp_server.port),
        }
    )
    data = tmp_path / "data"
    data.mkdir()
    settled_file(data, "a.txt", "alpha\n")
    settled_file(data, "b.txt", "beta\n")
    make_setup("cat-files", str(data))
    daemon(1)

    first = until(lambda: len(runs_of("cat-files")) == 2 and runs_of("cat-files"), 60, "2 runs")
    assert list(first) == ["a.txt", "b.txt"]
    until(lambda: ended(sum(first.values(), [])), 120, "the first runs to end")
    assert stdout(first["a.txt"][0]) == b"alpha\n"
    until(lambda: smtp_server.messages, 30, "the notification that all elements ended")
    (_, message), = smtp_server.messages
    assert "pipeline cat-files: all 2 elements ended (0 failed)" in message["Subject"]

    # Still being written (changed within `settled`): not taken until left alone.
    (data / "c.txt").write_text("gamma\n")
    time.sleep(2)
    assert "c.txt" not in runs_of("cat-files")
    until(lambda: "c.txt" in runs_of("cat-files"), 30, "c.txt to be taken once settled")

    # Touched, content unchanged: nothing new. Changed: a second run of b.txt.
    os.utime(data / "a.txt")
    settled_file(data, "b.txt", "beta, corrected\n", age=100)
    until(lambda: len(runs_of("cat-files")["b.txt"]) == 2, 30, "the changed b.txt to run again")
    time.sleep(5)  # the touched a.txt settles and is looked at again
    runs = runs_of("cat-files")
    assert {k: len(v) for k, v in runs.items()} == {"a.txt": 1, "b.txt": 2, "c.txt": 1}
    until(lambda: ended(sum(runs.values(), [])), 120, "every run to end")
    assert stdout(runs["b.txt"][1]) == b"beta, corrected\n"

    progress = until(
        lambda: (p := pipeline_progress("cat-files")).done == 4 and p, 30, "4 done runs"
    )
    assert (progress.seen, progress.running, progress.to_start, progress.failed_total) == (
        4, 0, 0, 0
    )
    until(lambda: len(smtp_server.messages) == 2, 30, "a second notification once c and b ended")
    set_runner(None)
