"""Storage on SQLite and PostgreSQL: migrations, schema checks, the graph, the repository."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import shutil

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from veglia.config.profile import mask_url
from veglia.exceptions import (
    NotExistent,
    RepositoryIntegrityError,
    SchemaNewerError,
    SchemaOutdatedError,
    StorageError,
)
from veglia.storage import FileRepository, StorageBackend
from veglia.storage.models import Base, Computer, Link, Log, Node, RepositoryFile, User
from veglia_fixtures.profiles import make_profile


def test_empty_database_asks_for_migration(storage_url, tmp_path):
    backend = StorageBackend(storage_url, tmp_path / "repo")
    with pytest.raises(SchemaOutdatedError, match="veglia storage migrate"):
        backend.check_schema()
    before, after = backend.migrate()
    assert before is None and after == backend.schema_status().head
    backend.check_schema()
    assert backend.migrate() == (after, after)
    backend.close()


def test_a_database_at_the_newest_schema_opens_without_alembic(storage_url, tmp_path):
    """Opening the storage (each daemon worker and CLI command does) loads no alembic, which
    costs 10 MB; the schema is still checked, and alembic's head is the one read."""
    import subprocess
    import sys

    backend = StorageBackend(storage_url, tmp_path / "repo")
    backend.migrate()
    backend.close()
    code = (
        "import sys; from veglia.storage import StorageBackend; "
        f"b = StorageBackend({storage_url!r}, {str(tmp_path / 'repo')!r}); b.check_schema(); "
        "print('alembic' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"
    from veglia.storage.backend import SCHEMA_HEAD

    assert StorageBackend(storage_url, tmp_path / "repo").schema_status().head == SCHEMA_HEAD


# SQLite's expression indexes (migration 0006) cannot be reflected, so they are not compared
# there; test_migration_0006_adds_the_scale_indexes_and_downgrades checks that they exist.
@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_models_match_migrations(storage):
    # The core's tables against the core's migrations, each plugin's against its own.
    differences = storage.schema_differences()
    assert differences == {"core": [], "core.tower": []}, "tables changed without a migration"
    with storage.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        unfiltered = compare_metadata(context, Base.metadata)
    # Without the filter, only the plugins' tables (and their indexes) and version table
    # differ from the core's.
    left_to_plugins = {(diff[1].table if diff[0] == "remove_index" else diff[1]).name
                       for diff in unfiltered}  # fmt: skip
    assert left_to_plugins == {"report_outbox", "report_runs", "alembic_version_tower"}


def test_database_from_newer_release_is_refused(storage):
    with storage.engine.begin() as connection:
        connection.execute(sa.text("UPDATE alembic_version SET version_num = 'f00dcafe'"))
    with pytest.raises(SchemaNewerError, match="Upgrade veglia"):
        storage.check_schema()
    with pytest.raises(SchemaNewerError):
        storage.migrate()


def test_provenance_graph_round_trip(storage):
    with storage.session() as session:
        user = User(email="ada@example.org")
        computer = Computer(
            label="cluster",
            hostname="cluster.example.org",
            scheduler_type="core.slurm",
            transport_type="core.ssh",
            properties={"workdir": "/scratch/{username}"},
        )
        session.add_all([user, computer])
        session.flush()
        data = Node(node_type="data.int", attributes={"value": 3}, user_id=user.id)
        calc = Node(
            node_type="process.calculation.calcjob",
            process_type="core.shell",
            process_state="finished",
            exit_status=0,
            user_id=user.id,
            computer_id=computer.id,
            checkpoint='{"version": 1}',
        )
        session.add_all([data, calc])
        session.flush()
        session.add(Link(input_id=data.id, output_id=calc.id, label="x", link_type="input"))
        session.add(Log(node_id=calc.id, levelname="REPORT", message="submitted job 7"))
        data_id, calc_id = data.id, calc.id

    with storage.session() as session:
        calc = session.get(Node, calc_id)
        assert calc.process_state == "finished" and calc.checkpoint == '{"version": 1}'
        assert session.get(Node, data_id).attributes == {"value": 3}
        link = session.scalars(sa.select(Link).where(Link.output_id == calc_id)).one()
        assert (link.input_id, link.label, link.link_type) == (data_id, "x", "input")
        assert [log.message for log in session.scalars(sa.select(Log))] == ["submitted job 7"]


def test_unknown_link_type_and_dangling_link_are_refused(storage):
    with storage.session() as session:
        node = Node(node_type="data.int")
        session.add(node)
        session.flush()
        node_id = node.id
    with pytest.raises(sa.exc.IntegrityError), storage.session() as session:
        session.add(Link(input_id=node_id, output_id=node_id, label="x", link_type="bogus"))
    with pytest.raises(sa.exc.IntegrityError), storage.session() as session:
        session.add(Link(input_id=node_id, output_id=99999, label="x", link_type="input"))


def test_deleting_a_node_removes_its_links_logs_and_file_records(storage):
    sha256, size = storage.repository.put_bytes(b"data")
    with storage.session() as session:
        node = Node(node_type="data.file")
        other = Node(node_type="data.int")
        session.add_all([node, other])
        session.flush()
        session.add(Link(input_id=other.id, output_id=node.id, label="a", link_type="input"))
        session.add(Log(node_id=node.id, levelname="INFO", message="m"))
        session.add(RepositoryFile(node_id=node.id, path="a.txt", sha256=sha256, size=size))
        node_id = node.id
    with storage.session() as session:
        session.execute(sa.delete(Node).where(Node.id == node_id))
    with storage.session() as session:
        for model in (Link, Log, RepositoryFile):
            assert session.scalars(sa.select(model)).all() == []


def test_sqlite_runs_in_wal_mode(tmp_path):
    backend = StorageBackend(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "repo")
    with backend.engine.connect() as connection:
        assert connection.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(sa.text("PRAGMA foreign_keys")).scalar() == 1
    backend.close()


def test_unreachable_database_says_what_to_check(tmp_path):
    backend = StorageBackend("postgresql://nobody@127.0.0.1:1/none", tmp_path / "repo")
    with pytest.raises(StorageError, match="Cannot reach the database"):
        backend.check_schema()


def test_repository_stores_each_content_once_and_detects_tampering(tmp_path):
    repository = FileRepository(tmp_path / "repo")
    sha_a, size = repository.put_bytes(b"hello")
    sha_b, _ = repository.put_bytes(b"hello")
    assert sha_a == sha_b and size == 5
    assert list(repository) == [sha_a]
    assert repository.get_bytes(sha_a) == b"hello"
    repository.verify(sha_a)

    blob = tmp_path / "repo" / "objects" / sha_a[:2] / sha_a[2:]
    blob.write_bytes(b"HELLO")
    with pytest.raises(RepositoryIntegrityError, match=sha_a):
        repository.verify(sha_a)
    blob.unlink()
    with pytest.raises(NotExistent, match="missing"):
        repository.get_bytes(sha_a)
    assert not list((tmp_path / "repo" / "tmp").iterdir())


def test_files_are_stored_whole_and_stored_content_writes_no_file(tmp_path):
    repository = FileRepository(tmp_path / "repo")
    small, large = tmp_path / "small", tmp_path / "large"
    small.write_bytes(b"0\n")
    large.write_bytes(bytes(range(256)) * 8192)  # 2 MiB: streamed through a temporary file
    for path in (small, large):
        sha256, size = repository.put_file(path)
        assert repository.get_bytes(sha256) == path.read_bytes() and size == path.stat().st_size
    temporary = repository.temporary_folder()
    os.utime(temporary, (0, 0))
    # The same small content again (an empty stderr, an exit status): hashed in memory,
    # no temporary file made and removed.
    assert repository.put_file(small)[0] == hashlib.sha256(b"0\n").hexdigest()
    assert temporary.stat().st_mtime == 0
    assert list(temporary.iterdir()) == []


def test_a_retrieved_file_is_linked_into_the_repository_not_copied(tmp_path):
    repository = FileRepository(tmp_path / "repo")
    retrieved = repository.temporary_folder() / "retrieved-1"
    retrieved.mkdir()
    output, empty = retrieved / "aiida.out", retrieved / "stderr"
    output.write_bytes(b"3\n")
    empty.write_bytes(b"")
    known, _ = repository.put_bytes(b"")  # stored before: an empty stderr of another job
    sha256, size = repository.adopt(output)
    blob = repository.objects / sha256[:2] / sha256[2:]
    assert (sha256, size) == (hashlib.sha256(b"3\n").hexdigest(), 2)
    assert blob.stat().st_ino == output.stat().st_ino  # the same file: no copy
    assert blob.stat().st_mode & 0o077 == 0
    assert repository.adopt(empty)[0] == known
    assert (repository.objects / known[:2] / known[2:]).stat().st_ino != empty.stat().st_ino
    # Removing the retrieved folder (after the parse's commit) leaves the blobs.
    shutil.rmtree(retrieved)
    assert repository.get_bytes(sha256) == b"3\n" and repository.get_bytes(known) == b""
    # A file anywhere else is the user's: copied, never linked.
    mine = tmp_path / "mine.txt"
    mine.write_bytes(b"mine")
    copied, _ = repository.adopt(mine)
    assert (repository.objects / copied[:2] / copied[2:]).stat().st_ino != mine.stat().st_ino


def test_repository_writes_again_after_its_folders_were_removed(tmp_path):
    """The repository checks its folders once per process; one removed later (a user
    cleaning up, a restore) is made again rather than failing every later write."""
    repository = FileRepository(tmp_path / "repo")
    first, _ = repository.put_bytes(b"first")
    shutil.rmtree(tmp_path / "repo")
    second, _ = repository.put_bytes(b"second")
    with io.BytesIO(b"third") as stream:
        third, _ = repository.put_stream(stream)
    assert repository.get_bytes(second) == b"second"
    assert repository.get_bytes(third) == b"third"
    assert not repository.has(first)
    assert repository.put_bytes(b"first")[0] == first  # content removed is stored again
    assert repository.get_bytes(first) == b"first"
    assert (tmp_path / "repo").stat().st_mode & 0o077 == 0


def test_database_repository_stores_once_detects_tampering_and_reads_older_folder_blobs(
    storage_url, tmp_path
):
    folder = FileRepository(tmp_path / "repo")
    old_sha, _ = folder.put_bytes(b"written before the switch")
    backend = StorageBackend(storage_url, tmp_path / "repo", repository="database")
    backend.migrate()
    repository = backend.repository
    sha_a, size = repository.put_bytes(b"hello")
    assert repository.put_bytes(b"hello") == (sha_a, size) and size == 5
    assert not folder.has(sha_a), "a database blob must not need the folder"
    assert repository.get_bytes(sha_a) == b"hello"
    assert repository.get_bytes(old_sha) == b"written before the switch"
    assert sorted(repository) == sorted([sha_a, old_sha])
    repository.verify(sha_a)

    with backend.session() as session:
        session.execute(sa.text("UPDATE repository_chunks SET content = :c"), {"c": b"HELLO"})
    with pytest.raises(RepositoryIntegrityError, match=sha_a):
        repository.verify(sha_a)
    moved = repository.quarantine(sha_a)
    assert moved is not None and moved.read_bytes() == b"HELLO"
    with pytest.raises(NotExistent, match="storage.repository"):
        repository.get_bytes(sha_a)
    repository.put_bytes(b"hello")  # the true content again restores it
    repository.verify(sha_a)
    backend.close()


def test_a_job_stored_in_the_database_repository_needs_no_folder(postgres_database):
    import shutil

    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory
    from veglia.orm.loading import load_node

    profile = make_profile(**{"storage.url": postgres_database, "storage.repository": "database"})
    _, node = engine.run_get_node(
        CalculationFactory("core.shell"), command=orm.Str("echo from the database")
    )
    assert node.is_finished_ok, node.exit_message
    shutil.rmtree(profile.repository_path, ignore_errors=True)  # another host has no folder
    assert load_node(node.pk).outputs.stdout.get_content() == b"from the database\n"


def test_process_attributes_from_two_writers_are_both_kept(storage_url, tmp_path, monkeypatch):
    """The engine and the CLI change different keys of one node: neither loses the other's."""
    import veglia.manage as manage
    from veglia.orm.loading import load_node
    from veglia.orm.process_nodes import ProcessNode

    backend = StorageBackend(storage_url, tmp_path / "repo2")
    backend.migrate()
    monkeypatch.setattr(manage, "get_storage", lambda: backend)
    import veglia.orm.loading as loading_module
    import veglia.orm.nodes as nodes_module
    import veglia.orm.process_nodes as process_nodes_module

    monkeypatch.setattr(loading_module, "get_storage", lambda: backend)
    monkeypatch.setattr(nodes_module, "get_storage", lambda: backend)
    monkeypatch.setattr(process_nodes_module, "get_storage", lambda: backend)
    # Where it is called: the module bound the name when it was imported.
    monkeypatch.setattr(nodes_module, "get_default_user", lambda: type("U", (), {"pk": None})())
    engine_copy = ProcessNode(process_type="test").store()
    cli_copy = load_node(engine_copy.pk)
    engine_copy.set_attributes({"scheduler_state": "running", "key.with spaces": 1})
    cli_copy.set_attribute("control_request", {"action": "pause"})
    engine_copy.set_attribute("job_id", "7")
    assert load_node(engine_copy.pk).attributes == {
        "scheduler_state": "running",
        "key.with spaces": 1,
        "control_request": {"action": "pause"},
        "job_id": "7",
    }
    cli_copy.delete_attribute("control_request")
    assert "control_request" not in engine_copy.refresh().attributes
    # A value the other writer changed to an equal one of another type (1 -> True, as JSON
    # 1 -> true) is read as the new one by the next patch, and by a refresh.
    cli_copy.set_attributes({"flag": 1, "limits": {"memory": 1}})
    engine_copy.set_attribute("job_id", "8")
    cli_copy.set_attributes({"flag": True, "limits": {"memory": 2}})
    engine_copy.set_attribute("job_id", "9")
    assert engine_copy.get_attribute("flag") is True
    assert engine_copy.get_attribute("limits") == {"memory": 2}
    cli_copy.set_attribute("flag", 1)
    assert type(engine_copy.refresh().get_attribute("flag")) is int
    with pytest.raises(ValueError, match="quotes"):
        engine_copy.set_attribute('say "hi"', 1)
    backend.close()


def test_stored_nodes_load_as_their_class_whichever_orm_module_was_imported():
    """``load_node`` finds a node's class by its stored ``node_type``; the data and process
    classes live in their own modules and are registered even when a program imports only
    ``veglia.orm.loading`` (where ``load_node`` lives)."""
    import subprocess
    import sys

    code = (
        "import veglia.orm.loading as loading, veglia.orm.nodes as n; "
        "assert loading.node_type_class('data.int').__name__ == 'Int'; "
        "print(' '.join(sorted(n._NODE_CLASSES)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split() == [
        "data",
        "data.bool",
        "data.dict",
        "data.float",
        "data.folder",
        "data.int",
        "data.list",
        "data.remote",
        "data.singlefile",
        "data.str",
        "process",
        "process.calcjob",
        "process.workflow",
    ]


def _index_names(backend) -> set[str]:
    """Every index of ``nodes``, expression indexes too (SQLAlchemy does not reflect those
    on SQLite)."""
    if backend.engine.dialect.name == "postgresql":
        query = "SELECT indexname FROM pg_indexes WHERE tablename = 'nodes'"
    else:
        query = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'nodes'"
    with backend.engine.connect() as connection:
        return set(connection.exec_driver_sql(query).scalars())


def test_migration_0006_adds_the_scale_indexes_and_downgrades(storage):
    from alembic import command

    from veglia.storage.models import INDEXED_ATTRIBUTES

    assert set(INDEXED_ATTRIBUTES) <= _index_names(storage)
    config = storage._alembic_config()
    with storage.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0005")
    assert storage.schema_status().current == "0005"
    assert not set(INDEXED_ATTRIBUTES) & _index_names(storage)
    with pytest.raises(SchemaOutdatedError, match="needs 0014"):
        storage.check_schema()
    assert storage.migrate() == ("0005", "0014")
    assert set(INDEXED_ATTRIBUTES) <= _index_names(storage)


def test_the_schema_head_is_the_newest_migration(storage):
    """``check_schema`` trusts ``SCHEMA_HEAD`` without asking Alembic."""
    from veglia.storage.backend import SCHEMA_HEAD

    assert storage.schema_status().head == SCHEMA_HEAD


def test_indexed_attributes_are_the_engine_s_names():
    from veglia.orm.attributes import CACHE_HASH, SIMILARITY_KEY
    from veglia.storage.models import INDEXED_ATTRIBUTES

    assert sorted(INDEXED_ATTRIBUTES.values()) == sorted([CACHE_HASH, SIMILARITY_KEY])


def test_look_ups_by_an_indexed_attribute_use_its_index(storage):
    """The caching and right-sizing look-ups among many finished jobs read the index, not
    every job: the planner matches the expression ``attribute_text`` writes."""
    from veglia.storage.attribute_text import attribute_text
    from veglia.storage.models import INDEXED_ATTRIBUTES

    postgres = storage.engine.dialect.name == "postgresql"
    with storage.engine.connect() as connection:
        if postgres:  # on a near-empty table a scan is cheaper: ask whether it can use it
            connection.exec_driver_sql("SET enable_seqscan = off")
        for name, key in INDEXED_ATTRIBUTES.items():
            query = sa.select(Node.id).where(
                Node.node_type == "process.calcjob", attribute_text(Node.attributes, key) == "k"
            )
            compiled = query.compile(connection)
            params = compiled.params
            if not postgres:
                params = tuple(params[name] for name in compiled.positiontup)
            prefix = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
            plan = connection.exec_driver_sql(prefix + str(compiled), params).all()
            assert name in " ".join(str(row[-1]) for row in plan), plan


def _plan(connection, query) -> str:
    """The query plan of ``query`` as one line (EXPLAIN on PostgreSQL, EXPLAIN QUERY PLAN on
    SQLite)."""
    postgres = connection.dialect.name == "postgresql"
    compiled = query.compile(connection, compile_kwargs={"literal_binds": True})
    prefix = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
    plan = connection.exec_driver_sql(prefix + str(compiled)).all()
    return " ".join(str(row[-1]) for row in plan)


def test_the_look_up_of_cancels_to_do_uses_its_index(storage):
    """``process list`` and the daemon ask every time for the ended processes whose
    scheduler job is still to be cancelled: the partial index answers, not a read of every
    killed process's attributes (33 to 68 ms with 1,000,000 nodes)."""
    from veglia.orm.queries import CANCEL_PENDING_QUERY

    with storage.engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql("SET enable_seqscan = off")
        assert "ix_nodes_cancel_pending" in _plan(connection, CANCEL_PENDING_QUERY)


def test_migration_0013_adds_the_cancel_index_and_downgrades(storage):
    from alembic import command

    assert "ix_nodes_cancel_pending" in _index_names(storage)
    config = storage._alembic_config()
    with storage.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0012")
    assert "ix_nodes_cancel_pending" not in _index_names(storage)
    assert storage.migrate() == ("0012", "0014")
    assert "ix_nodes_cancel_pending" in _index_names(storage)


def _index_definitions(backend) -> dict[str, str]:
    """The CREATE INDEX text of every index of ``nodes``, by name."""
    if backend.engine.dialect.name == "postgresql":
        query = "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'nodes'"
    else:
        query = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'nodes'"
    with backend.engine.connect() as connection:
        return dict(connection.exec_driver_sql(query).all())


def test_migration_0014_adds_the_indexes_of_successful_runs_and_downgrades(storage):
    """The indexes of the successful runs hold the type (after the similarity key, for the
    second) and the id, and only the processes that finished with exit status 0."""
    from alembic import command

    names = ("ix_nodes_finished_ok_type", "ix_nodes_finished_ok_key")
    found = _index_definitions(storage)
    for name in names:
        assert "process_type, id)" in found[name], found[name]
        assert "'finished'" in found[name] and "exit_status = 0" in found[name], found[name]
    config = storage._alembic_config()
    with storage.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0013")
    assert not set(names) & _index_names(storage)
    assert storage.migrate() == ("0013", "0014")
    assert set(names) <= _index_names(storage)


def test_a_transaction_commits_its_sessions_together_or_not_at_all(storage, storage_url, tmp_path):
    """What a state change writes (its state, checkpoint, logs, ...) is seen by another
    process all at once, or, when it fails, not at all; and an inner failure that the code
    caught still fails the whole transaction rather than losing a write without a word."""
    observer = StorageBackend(storage_url, tmp_path / "observer")

    def seen() -> set[str]:
        with observer.session() as session:
            return set(session.scalars(sa.select(Node.label).where(Node.label.like("tx-%"))))

    def add(label: str) -> None:
        with storage.session() as session:
            session.add(Node(node_type="data.int", label=label, attributes={}))

    with storage.transaction():
        add("tx-a")
        add("tx-b")
        assert seen() == set()  # written, not committed: another process sees neither
    assert seen() == {"tx-a", "tx-b"}

    with pytest.raises(RuntimeError, match="midway"), storage.transaction():
        add("tx-c")
        raise RuntimeError("midway")
    assert seen() == {"tx-a", "tx-b"}

    def add_twice(label: str) -> None:
        with storage.session() as session:
            session.execute(
                sa.insert(Computer).values(
                    label=label,
                    hostname="h",
                    scheduler_type="core.direct",
                    transport_type="core.local",
                )
            )

    add_twice("dup")
    with pytest.raises(sa.exc.IntegrityError), storage.transaction():
        add("tx-d")
        with contextlib.suppress(sa.exc.IntegrityError):
            add_twice("dup")  # a unique label taken: this write fails, and is caught
        add("tx-e")  # runs on a session of its own, as plumpy's EXCEPTED record does
    assert "tx-d" not in seen()
    observer.close()


def _add_core(storage: StorageBackend, label: str) -> None:
    """A node row written through the table (the engine's Core path)."""
    with storage.connection() as connection:
        connection.execute(
            Node.__table__.insert().values(
                node_type="data.int", label=label, attributes={}, extras={}
            )
        )


def _labels_seen(observer: StorageBackend, prefix: str) -> set[str]:
    """The labels starting with ``prefix`` that another connection sees (committed)."""
    table = Node.__table__
    with observer.connection() as connection:
        query = sa.select(table.c.label).where(table.c.label.like(prefix + "%"))
        return set(connection.execute(query).scalars())


def test_connection_blocks_share_the_transaction_with_session_blocks(
    storage, storage_url, tmp_path
):
    """The engine's Core writes (``connection()``) and ORM writes (``session()``) in one
    transaction block commit together; a failed Core write, even caught, fails the block
    and undoes the ORM write made before it."""
    observer = StorageBackend(storage_url, tmp_path / "observer")
    table = Node.__table__

    def seen() -> set[str]:
        return _labels_seen(observer, "cx-")

    def add_core(label: str) -> None:
        _add_core(storage, label)

    def add_orm(label: str) -> None:
        with storage.session() as session:
            session.add(Node(node_type="data.int", label=label, attributes={}))

    with storage.transaction():
        add_orm("cx-a")
        add_core("cx-b")
        assert seen() == set()
    assert seen() == {"cx-a", "cx-b"}

    add_core("cx-c")  # outside a block: committed at once
    assert "cx-c" in seen()

    with storage.connection() as connection:
        taken = connection.execute(sa.select(table.c.uuid).where(table.c.label == "cx-a")).scalar()
    with pytest.raises(sa.exc.IntegrityError), storage.transaction():
        add_orm("cx-d")
        with contextlib.suppress(sa.exc.IntegrityError), storage.connection() as connection:
            connection.execute(  # a UUID taken: this write fails, and is caught
                table.insert().values(node_type="data.int", label="cx-x", uuid=taken, attributes={})
            )
        add_core("cx-e")  # on a connection of its own, committed
    assert "cx-d" not in seen()
    assert "cx-e" in seen()


def test_a_held_transaction_commits_with_the_block_given_it(storage, storage_url, tmp_path):
    """What a step writes at its end waits in a held transaction for the commit of the
    state change that follows (one commit, seen together); blocks in between join it."""
    observer = StorageBackend(storage_url, tmp_path / "observer")

    def seen() -> set[str]:
        return _labels_seen(observer, "hx-")

    def add(label: str) -> None:
        _add_core(storage, label)

    held = storage.hold()
    add("hx-a")
    add("hx-b")  # a block of its own joins the held transaction
    assert seen() == set()
    with storage.transaction(held):
        add("hx-c")
        assert seen() == set()
    assert seen() == {"hx-a", "hx-b", "hx-c"}
    assert storage.held() is None
    add("hx-d")  # committed at once again
    assert "hx-d" in seen()
    observer.close()


def test_a_transaction_held_across_an_await_is_committed_before_another_task_writes(
    storage, storage_url, tmp_path, caplog
):
    """A task that awaits with a held transaction open would leave the database's write
    lock taken while the worker's other processes run in the same thread: the next block
    of another task commits it first, and says so."""
    observer = StorageBackend(storage_url, tmp_path / "observer")

    def add(label: str) -> None:
        _add_core(storage, label)

    async def careless() -> None:
        storage.hold()
        add("ax-a")
        await asyncio.sleep(0.01)

    async def other() -> None:
        await asyncio.sleep(0)
        add("ax-b")

    async def both() -> None:
        await asyncio.gather(careless(), other())

    asyncio.run(both())
    assert _labels_seen(observer, "ax-") == {"ax-a", "ax-b"}
    assert "held open across an await" in caplog.text
    observer.close()
    observer.close()


def _rows(backend, table):
    with backend.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(sa.select(table).order_by(table.c.id))]


@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_a_database_of_the_release_before_keeps_every_outbox_record_as_its_plugin_adopts_it(
    storage_url, tmp_path
):
    """Releases before core schema 0011 kept the reporters' outbox in the core's schema; now
    the plugin's own migrations own it, and migrating loses no record."""
    from datetime import datetime, timezone

    from veglia.plugins.tower import tables as tower_tables

    backend = StorageBackend(storage_url, tmp_path / "repo")
    # As the release before left a profile: core schema 0010, with the outbox (its 0002
    # made these tables, in this very shape), records in it and no version table of Tower's.
    backend.migrate("0010")
    tower_tables.metadata.create_all(backend.engine)
    sent = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    with backend.engine.begin() as connection:
        connection.execute(
            tower_tables.report_outbox.insert(),
            [
                {"reporter": "tower", "run_key": "run-1", "kind": "task", "task_id": task,
                 "payload": {"task": task}, "status": "pending" if task > 1 else "sent",
                 "sent_at": None if task > 1 else sent}
                for task in range(1, 6)
            ],
        )  # fmt: skip
        connection.execute(
            tower_tables.report_runs.insert(),
            {"reporter": "tower", "run_key": "run-1", "remote_id": "w1", "state": "begun"},
        )
    outbox = _rows(backend, tower_tables.report_outbox)
    runs = _rows(backend, tower_tables.report_runs)
    assert len(outbox) == 5

    with pytest.raises(SchemaOutdatedError, match="needs 0014. Run `veglia storage migrate`"):
        backend.check_schema()
    assert backend.migrate() == ("0010", "0014")
    backend.check_schema()
    assert _rows(backend, tower_tables.report_outbox) == outbox
    assert _rows(backend, tower_tables.report_runs) == runs
    [(plugin, _, status)] = backend.plugin_schema_status()
    assert (plugin, status.current) == ("core.tower", "0001")
    assert backend.schema_differences() == {"core": [], "core.tower": []}
    backend.close()


def test_the_core_schema_alone_has_no_plugin_table(storage_url, tmp_path):
    backend = StorageBackend(storage_url, tmp_path / "repo", plugins=[])
    assert backend.migrate() == (None, "0014")
    backend.check_schema()
    tables = set(sa.inspect(backend.engine).get_table_names())
    assert "nodes" in tables and not tables & {"report_outbox", "report_runs"}
    backend.close()


def test_plugin_tables_behind_are_reported_and_migrated(storage_url, tmp_path):
    backend = StorageBackend(storage_url, tmp_path / "repo")
    backend.migrate(plugins=False)
    with pytest.raises(SchemaOutdatedError) as refused:
        backend.check_schema()
    assert str(refused.value) == (
        f"The tables of plugin 'core.tower' in the database at {mask_url(backend.url)} are "
        "absent; "
        "the plugin needs 0001. Run `veglia storage migrate` (back up the database first)."
    )
    assert backend.migrate_plugins() == [("core.tower", None, "0001")]
    backend.check_schema()
    assert backend.migrate_plugins() == [("core.tower", "0001", "0001")]
    with backend.engine.begin() as connection:
        connection.execute(sa.text("UPDATE alembic_version_tower SET version_num = 'beef'"))
    with pytest.raises(SchemaNewerError, match="plugin 'core.tower'.*Upgrade the plugin"):
        backend.check_schema()
    backend.close()
