"""`veglia verify` finds retrieved files that changed after they were stored."""

from __future__ import annotations

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.manage import get_storage

ShellJob = CalculationFactory("core.shell")


def test_tampered_retrieved_file_is_named(profile, run_cli):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo result 42 > result.txt")
    builder.outputs = orm.List(["result.txt"])
    _, node = engine.run_get_node(builder)
    good = run_cli("-p", "test", "verify", str(node.pk))
    assert good.exit_code == 0 and "match their SHA-256" in good.stdout

    retrieved = node.outputs.retrieved
    record = next(r for r in retrieved.list_objects() if r.path == "result.txt")
    blob = get_storage().repository.objects / record.sha256[:2] / record.sha256[2:]
    blob.write_bytes(b"result 41\n")
    bad = run_cli("-p", "test", "verify", str(node.pk))
    assert bad.exit_code == 1
    assert f"node {retrieved.pk}: result.txt now hashes to" in bad.stdout
    assert run_cli("-p", "test", "verify").exit_code == 1  # all nodes
    missing = run_cli("-p", "test", "verify", "99999")
    assert missing.exit_code == 4 and "No node with pk 99999" in missing.stderr
