"""Pipelines that start themselves (issue #33): the daemon lists each enabled setup's data
source and starts one run per new element, one per changed content, never two for the
same; with a real daemon, on this machine and over SSH, with workers killed and restarted."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import sqlalchemy as sa

from veglia.engine.daemon import DaemonFiles
from veglia.manage import get_storage
from veglia.orm.attributes import PIPELINE_RUN
from veglia.orm.loading import load_node
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
    wallclock: int = 600,
    **source: object,
):
    from veglia.pipeline_setups import PipelineSetup, set_pipeline_enabled

    data = {
        "name": name,
        "process": "core.shell",
        "input_port": "files",
        "inputs": {"command": command},
        "options": {"computer": computer, "max_wallclock_seconds": wallclock},
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
    until(lambda: ended([pk for pks in first.values() for pk in pks]), 120, "the first runs to end")
    assert stdout(first["a.txt"][0]) == b"alpha\n"
    until(lambda: smtp_server.messages, 30, "the notification that all elements ended")
    ((_, message),) = smtp_server.messages
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
    until(lambda: ended([pk for pks in runs.values() for pk in pks]), 120, "every run to end")
    assert stdout(runs["b.txt"][1]) == b"beta, corrected\n"

    progress = until(
        lambda: (p := pipeline_progress("cat-files")).done == 4 and p, 30, "4 done runs"
    )
    assert (progress.seen, progress.running, progress.to_start, progress.failed_total) == (
        4,
        0,
        0,
        0,
    )
    until(lambda: len(smtp_server.messages) == 2, 30, "a second notification once c and b ended")
    set_runner(None)


def drop_over_ssh(transport, folder: str, name: str, text: str) -> None:
    """Write a file on the SSH host as a person's upload does: under a temporary name, then
    renamed, so nobody reads half of it (the glob does not match the temporary name)."""
    transport.write_bytes(f"{folder}/.{name}.part", text.encode())
    transport.exec_command(f"mv {folder}/.{name}.part {folder}/{name}")


def test_files_dropped_over_ssh_run_once_through_a_killed_worker_and_a_restart(
    veglia_home, rabbitmq_url, services_env, ssh_params, daemon, run_cli
):
    """Two workers with a broker; the source is a folder on the SSH host, the runs on this
    machine. The worker taking in elements is killed while it starts them, and the daemon
    is stopped and started again: every element still has exactly one run. A file still
    being written is not taken; a touched one starts nothing; a changed one runs again."""
    import uuid

    from veglia.engine.runner import set_runner
    from veglia_fixtures.profiles import make_profile
    from veglia_fixtures.services import ssh_computer

    profile = make_profile(**{"broker.url": rabbitmq_url, "pipeline.poll_interval": "1"})
    drop = ssh_computer("drop", services_env, ssh_params, "core.direct")
    folder = f"{services_env['SSH_USER_HOME']}/intake-{uuid.uuid4().hex[:8]}"
    with drop.get_transport() as transport:
        transport.makedirs(folder)
        for i in range(40):
            drop_over_ssh(transport, folder, f"s{i:03d}.txt", f"sample {i}\n")
        make_setup("from-ssh", folder, source_computer="drop", settled=2)
        daemon(2)
        victim = DaemonFiles(profile).read_status()["workers"][0]["pid"]  # the first: intake
        until(lambda: runs_of("from-ssh"), 60, "the first runs")
        os.kill(victim, signal.SIGKILL)
        for i in range(40, 60):
            drop_over_ssh(transport, folder, f"s{i:03d}.txt", f"sample {i}\n")
        until(lambda: len(runs_of("from-ssh")) == 60, 120, "a run for each of 60 files")
        ok(run_cli("-p", "test", "daemon", "stop"))
        daemon(2)
        for i in range(60, 65):
            drop_over_ssh(transport, folder, f"s{i:03d}.txt", f"sample {i}\n")
        until(lambda: len(runs_of("from-ssh")) == 65, 60, "a run for each of 65 files")
        # Written in place, a line every half second: not taken while it grows.
        for part in range(6):
            transport.exec_command(f"echo part {part} >> {folder}/s900.txt")
            time.sleep(0.5)
            assert "s900.txt" not in runs_of("from-ssh")
        until(lambda: "s900.txt" in runs_of("from-ssh"), 30, "s900.txt, once left alone")
        # Touched (its content the same): nothing. Changed: a second run.
        transport.exec_command(f"touch {folder}/s000.txt")
        transport.write_bytes(f"{folder}/s001.txt", b"sample 1, again\n")
        until(lambda: len(runs_of("from-ssh")["s001.txt"]) == 2, 30, "s001.txt to run again")
        time.sleep(4)  # the touched s000.txt has settled and been looked at again
        runs = runs_of("from-ssh")
        until(lambda: ended([pk for pks in runs.values() for pk in pks]), 180, "every run")
        time.sleep(3)  # looks after the last: nothing new
        transport.rmtree(folder)
    runs = runs_of("from-ssh")
    assert {identity: len(pks) for identity, pks in runs.items()} == {
        **{f"s{i:03d}.txt": 1 for i in range(65)},
        "s001.txt": 2,
        "s900.txt": 1,
    }
    assert all(load_node(pk).is_finished_ok for pks in runs.values() for pk in pks)
    assert stdout(runs["s007.txt"][0]) == b"sample 7\n"
    assert stdout(runs["s001.txt"][1]) == b"sample 1, again\n"
    assert stdout(runs["s900.txt"][0]) == b"".join(b"part %d\n" % n for n in range(6))
    workers = DaemonFiles(profile).read_status()["workers"]
    assert victim not in [w["pid"] for w in workers]
    set_runner(None)


def test_claims_of_a_worker_that_died_while_starting_are_finished_once(profile, daemon, tmp_path):
    """A worker killed between claiming elements and storing their runs: the element whose
    run it never stored is started by the next worker; the one whose run it stored (the run
    names its element in its own commit) is not started again."""
    import subprocess

    from veglia import engine, orm
    from veglia.engine.daemon import leases
    from veglia.engine.process import NODE_ATTRIBUTES
    from veglia.entry_points import CalculationFactory, TransportFactory
    from veglia.pipeline_elements import claim_new, record_listing
    from veglia.pipeline_setups import set_pipeline_enabled
    from veglia.plugins.datasources.folder import FolderSource

    data = tmp_path / "data"
    data.mkdir()
    settled_file(data, "lost.txt", "never stored\n")
    settled_file(data, "stored.txt", "stored, not marked\n")
    setup = make_setup("crash", str(data))
    set_pipeline_enabled("crash", False)  # the daemon must not take it in before the crash
    with TransportFactory("core.local")() as transport:
        listing = FolderSource(setup.source_settings).elements(transport)
    record_listing(setup, listing)
    gone = subprocess.Popen(["true"])
    gone.wait()
    me = leases.this_worker()
    dead = f"{me.host}/{gone.pid}/deadbeef0000/{me.pid_space}"
    rows = {row.identity: row for row in claim_new(setup, None, dead)}
    # The dead worker had stored the run of stored.txt, with its element named in it.
    ShellJob = CalculationFactory("core.shell")
    token = NODE_ATTRIBUTES.set(
        {PIPELINE_RUN: {"setup": "crash", "version": 1, "element": rows["stored.txt"].id,
                        "identity": "stored.txt"}}
    )  # fmt: skip
    try:
        first = engine.submit(ShellJob, command=orm.Str("echo stored"))
    finally:
        NODE_ATTRIBUTES.reset(token)
    set_pipeline_enabled("crash", True)
    daemon(1)
    until(lambda: "lost.txt" in runs_of("crash"), 60, "the lost claim to be started")
    runs = runs_of("crash")
    until(lambda: ended([pk for pks in runs.values() for pk in pks]), 120, "both runs")
    time.sleep(3)
    assert runs_of("crash") == {"lost.txt": runs["lost.txt"], "stored.txt": [first.pk]}
    assert stdout(runs["lost.txt"][0]) == b"never stored\n"


def test_max_active_caps_a_setups_runs_at_once(veglia_home, daemon, tmp_path):
    from veglia.engine.runner import set_runner
    from veglia.pipeline_elements import pipeline_progress
    from veglia_fixtures.profiles import make_profile

    make_profile(**{"pipeline.poll_interval": "1"})
    data = tmp_path / "data"
    data.mkdir()
    for i in range(6):
        settled_file(data, f"s{i}.txt", f"{i}\n")
    make_setup("capped", str(data), max_active=2, command="sleep 2; cat *.txt")
    daemon(1)
    most = 0
    deadline = time.monotonic() + 120
    while True:
        runs = runs_of("capped")
        active = [pk for pks in runs.values() for pk in pks if not load_node(pk).is_terminated]
        most = max(most, len(active))
        if len(runs) == 6 and not active:
            break
        assert time.monotonic() < deadline, runs
        time.sleep(0.2)
    assert most == 2
    progress = pipeline_progress("capped")
    assert (progress.seen, progress.done, progress.to_start) == (6, 6, 0)
    set_runner(None)
