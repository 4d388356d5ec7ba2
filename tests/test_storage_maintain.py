"""`veglia storage maintain` frees the files of deleted nodes, and nothing a node refers to
or a running job is about to refer to, on each database and repository."""

from __future__ import annotations

import hashlib
import os
import time

import pytest
import sqlalchemy as sa

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.manage import get_storage
from veglia.storage.repository import FileRepository
from veglia_fixtures.profiles import make_profile, wait_for

ShellJob = CalculationFactory("core.shell")


@pytest.fixture(params=["folder", "database"])
def repository_profile(request, storage_url):
    """A loaded profile `test` on each database, with each kind of repository."""
    from veglia.engine.runner import set_runner

    yield make_profile(**{"storage.url": storage_url, "storage.repository": request.param})
    set_runner(None)


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def _age(sha256: str, seconds: float) -> None:
    """Make the blob look stored ``seconds`` earlier than it was."""
    repository = get_storage().repository
    if isinstance(repository, FileRepository):
        path = repository.objects / sha256[:2] / sha256[2:]
        then = path.stat().st_mtime - seconds
        os.utime(path, (then, then))
        return
    with get_storage().connection() as connection:
        connection.execute(
            sa.text("UPDATE repository_blobs SET written = written - :s WHERE sha256 = :h"),
            {"s": seconds, "h": sha256},
        )


def _age_all(seconds: float) -> None:
    for sha256 in list(get_storage().repository):
        _age(sha256, seconds)


def _sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def test_maintain_frees_the_files_of_deleted_nodes_and_keeps_the_rest(repository_profile, run_cli):
    repository = get_storage().repository
    doomed = orm.SinglefileData(b"d" * 100_000, "big.dat").store()
    shared_doomed = orm.SinglefileData(b"in two nodes", "a.txt").store()
    kept = orm.SinglefileData(b"kept", "kept.txt").store()
    shared_kept = orm.SinglefileData(b"in two nodes", "b.txt").store()
    damaged, _ = repository.put_bytes(b"damaged, then quarantined")
    quarantined = repository.quarantine(damaged)
    ok(run_cli("-p", "test", "node", "delete", str(doomed.pk), str(shared_doomed.pk), "--force"))
    _age_all(120)
    # Written by a running job whose node is not committed yet: young, so it stays.
    in_flight, _ = repository.put_bytes(b"a job's output, its node not yet written")

    plan = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "60", "--dry-run"))
    assert _sha(b"d" * 100_000) in plan.stdout
    assert "Would free 1 unreferenced blob, 100000 bytes" in plan.stdout
    assert repository.has(_sha(b"d" * 100_000))

    done = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "60"))
    assert "Freed 1 unreferenced blob, 100000 bytes" in done.stdout
    # The user is told what the grace period kept, and how to free it when no job runs.
    assert "Kept 1 unreferenced blob stored within the grace period (1m)" in done.stdout
    assert "--grace-period 1s" in done.stdout
    assert not repository.has(_sha(b"d" * 100_000))
    assert kept.get_content() == b"kept" and shared_kept.get_content() == b"in two nodes"
    assert repository.get_bytes(in_flight) == b"a job's output, its node not yet written"
    assert quarantined is not None and quarantined.read_bytes() == b"damaged, then quarantined"
    assert "match their SHA-256" in ok(run_cli("-p", "test", "verify")).stdout

    refused = run_cli("-p", "test", "storage", "maintain", "--grace-period", "soon")
    assert refused.exit_code == 2 and "'soon' is not a duration" in refused.stderr
    again = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "1m"))
    assert "Freed 0 unreferenced blobs, 0 bytes" in again.stdout


def test_a_blob_stored_again_for_a_new_node_is_not_freed(repository_profile, run_cli):
    """A job that stores content already there (left by a deleted node) is about to refer to
    it: storing it again, or keeping it (an archive import), makes it young again."""
    repository = get_storage().repository
    old = orm.SinglefileData(b"the same output", "out.txt").store()
    sha256 = _sha(b"the same output")
    ok(run_cli("-p", "test", "node", "delete", str(old.pk), "--force"))

    _age(sha256, 120)
    assert repository.put_bytes(b"the same output")[0] == sha256  # the job's node not yet written
    done = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "60"))
    assert "Freed 0 unreferenced blobs" in done.stdout and repository.has(sha256)

    _age(sha256, 120)
    assert repository.keep(sha256)
    done = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "60"))
    assert "Freed 0 unreferenced blobs" in done.stdout and repository.has(sha256)

    _age(sha256, 120)  # and no node came to refer to it
    done = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "60"))
    assert "Freed 1 unreferenced blob, 15 bytes" in done.stdout and not repository.has(sha256)


@pytest.mark.parametrize(
    ("storage_url", "repository"),
    [("sqlite", "folder"), ("postgresql", "database")],
    indirect=["storage_url"],
)
def test_maintain_while_the_daemon_runs_jobs_loses_no_file(
    storage_url, repository, daemon, run_cli
):
    from veglia.engine.runner import set_runner

    make_profile(**{"storage.url": storage_url, "storage.repository": repository})
    try:
        # The outputs the jobs will write, left by deleted nodes long ago: each job stores
        # its output again while maintain may be taking the old blob away.
        leftovers = [orm.SinglefileData(f"{i}\n".encode()).store() for i in range(4)]
        doomed = orm.SinglefileData(b"x" * 50_000).store()
        pks = [str(node.pk) for node in (*leftovers, doomed)]
        ok(run_cli("-p", "test", "node", "delete", *pks, "--force"))
        _age_all(1000)

        daemon(1)
        nodes = [
            engine.submit(ShellJob, command=orm.Str(f"echo {i % 4}; echo {i} >&2"))
            for i in range(24)
        ]
        freed = 0
        while not all(node.refresh().is_terminated for node in nodes):
            result = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "5"))
            freed += int(result.stdout.split("Freed ")[1].split()[0])
            time.sleep(0.2)
        wait_for(nodes, lambda n: n.is_terminated, timeout=120)

        assert freed >= 1  # the doomed node's file, at least
        assert not get_storage().repository.has(_sha(b"x" * 50_000))
        assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
        for i, node in enumerate(nodes):
            assert node.outputs.stdout.get_content() == f"{i % 4}\n".encode()
            assert node.outputs.stderr.get_content() == f"{i}\n".encode()
        assert "match their SHA-256" in ok(run_cli("-p", "test", "verify")).stdout
    finally:
        set_runner(None)


def test_what_a_writer_that_died_left_goes_after_the_grace_period(repository_profile, run_cli):
    """Half-written content (chunks without their blob's row, a temporary file) belongs to a
    writer still at work while young, and to one that died once old."""
    repository = get_storage().repository
    folder = repository if isinstance(repository, FileRepository) else repository.fallback
    abandoned = folder.temporary_folder() / "tmpdead"
    abandoned.write_bytes(b"x" * 700)
    then = time.time() - 120
    os.utime(abandoned, (then, then))
    writing = folder.temporary_folder() / "tmpbusy"
    writing.write_bytes(b"y" * 300)
    # The retrieved files of a job whose worker died before the parse took them, and of one
    # being parsed now.
    dead_retrieval = folder.temporary_folder() / "retrieved-dead"
    (dead_retrieval / "sub").mkdir(parents=True)
    (dead_retrieval / "aiida.out").write_bytes(b"o" * 50)
    (dead_retrieval / "sub" / "out").write_bytes(b"s" * 25)
    os.utime(dead_retrieval, (then, then))
    live_retrieval = folder.temporary_folder() / "retrieved-live"
    live_retrieval.mkdir()
    (live_retrieval / "aiida.out").write_bytes(b"o")
    expected = 700 + 75
    if not isinstance(repository, FileRepository):
        now = (
            "extract(epoch from clock_timestamp())"
            if get_storage().engine.dialect.name == "postgresql"
            else "(julianday('now') - 2440587.5) * 86400.0"
        )
        with get_storage().connection() as connection:
            for sha256, age in ((_sha(b"dead"), 120), (_sha(b"busy"), 0)):
                connection.execute(
                    sa.text(
                        "INSERT INTO repository_chunks (sha256, seq, content, written) "
                        f"VALUES (:h, 0, :c, {now} - :age)"
                    ),
                    {"h": sha256, "c": b"z" * 40, "age": age},
                )
        expected += 40

    done = ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "60"))
    assert f", {expected} bytes" in done.stdout
    assert not abandoned.exists() and writing.exists()
    assert not dead_retrieval.exists() and (live_retrieval / "aiida.out").exists()
    if not isinstance(repository, FileRepository):
        with get_storage().connection() as connection:
            left = set(connection.scalars(sa.text("SELECT sha256 FROM repository_chunks")))
        assert _sha(b"busy") in left and _sha(b"dead") not in left


def test_a_blob_a_dead_maintain_set_aside_is_put_back(profile, run_cli):
    kept = orm.SinglefileData(b"still needed").store()
    repository = get_storage().repository
    path = repository.objects / _sha(b"still needed")[:2] / _sha(b"still needed")[2:]
    aside = repository.root / "maintain"
    aside.mkdir()
    path.rename(aside / _sha(b"still needed"))  # as a maintain killed mid-way leaves it

    ok(run_cli("-p", "test", "storage", "maintain", "--grace-period", "1s"))
    assert kept.get_content() == b"still needed"
    assert "match their SHA-256" in ok(run_cli("-p", "test", "verify")).stdout
