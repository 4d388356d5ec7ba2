"""Issue #36's small things (sections 4 and 5): deleting a PostgreSQL profile drops its
tables, a rerun that made other content is recorded once, the daemon says when it runs an
older plugin than the one installed, and `plugin list` says which plugins are loaded."""

from __future__ import annotations

import pytest


def _tables(url: str) -> list[str]:
    import sqlalchemy as sa

    engine = sa.create_engine("postgresql+psycopg://" + url.split("://", 1)[1])
    try:
        with engine.connect() as connection:
            return sorted(sa.inspect(connection).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.services
def test_deleting_a_postgresql_profile_drops_its_tables(run_cli, postgres_database):
    import psycopg

    with psycopg.connect(postgres_database, autocommit=True) as connection:
        connection.execute("CREATE TABLE mine (x integer)")
    made = run_cli("setup", "-n", "--profile-name", "pg", "--storage-url", postgres_database)
    assert made.exit_code == 0, made.output
    assert "nodes" in _tables(postgres_database)

    deleted = run_cli("profile", "delete", "pg", "--force")
    assert deleted.exit_code == 0, deleted.output
    line = " ".join(deleted.stdout.split())
    assert "Deleted profile 'pg', its folder and its" in line
    assert f"tables in {postgres_database} (the database itself stays)." in line
    # Only the table veglia did not make is left.
    assert _tables(postgres_database) == ["mine"]


@pytest.mark.services
def test_deleting_a_postgresql_profile_with_keep_data_keeps_its_tables(run_cli, postgres_database):
    made = run_cli("setup", "-n", "--profile-name", "pg", "--storage-url", postgres_database)
    assert made.exit_code == 0, made.output
    before = _tables(postgres_database)

    deleted = run_cli("profile", "delete", "pg", "--force", "--keep-data")
    assert deleted.exit_code == 0, deleted.output
    line = " ".join(deleted.stdout.split())
    assert f"and its tables in {postgres_database} (--keep-data)." in line
    assert "Deleted profile 'pg'; kept its folder" in line
    assert _tables(postgres_database) == before
    # The same database makes a profile again, migrated from where it was.
    again = run_cli("setup", "-n", "--profile-name", "pg2", "--storage-url", postgres_database)
    assert again.exit_code == 0, again.output


def test_a_rerun_that_made_other_content_is_recorded_and_not_offered_again(profile, run_cli):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory
    from veglia.manage import get_storage
    from veglia.orm import load_node

    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("date +%s%N > stamp.txt")
    builder.outputs = orm.List(["stamp.txt"])
    _, node = engine.run_get_node(builder)
    record = next(r for r in node.outputs.retrieved.list_objects() if r.path == "stamp.txt")
    blob = get_storage().repository.objects / record.sha256[:2] / record.sha256[2:]
    blob.write_bytes(b"tampered\n")

    rerun = run_cli("-p", "test", "verify", str(node.pk), "--rerun")
    assert rerun.exit_code == 1, rerun.output
    rerun_pk = load_node(node.pk).get_attribute("not_reproducible")["rerun"]
    said = " ".join(rerun.stdout.split())
    assert f"process {node.pk} is not reproducible (rerun {rerun_pk} made other content)" in said
    assert load_node(node.pk).get_attribute("not_reproducible")["sha256"] == [record.sha256]

    for _ in range(2):  # known now: reported, no rerun offered, no failure
        later = run_cli("-p", "test", "verify", str(node.pk))
        assert later.exit_code == 0, later.output
        said = " ".join(later.stdout.split())
        assert f"process {node.pk}: not reproducible (rerun {rerun_pk} made other content)" in said
        assert "They were made by" not in said and "--rerun" not in said
        assert said.count("not reproducible") == 1
