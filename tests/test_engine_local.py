"""Calc jobs on localhost with the direct scheduler, run in the foreground."""

from __future__ import annotations

import pytest

from veglia import engine, orm
from veglia.engine import InputValidationError
from veglia.entry_points import CalculationFactory

ShellJob = CalculationFactory("core.shell")
AddJob = CalculationFactory("core.arithmetic.add")


def test_shell_job_runs_and_records_provenance(profile):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("cat in.txt; echo oops >&2; tr a-z A-Z < in.txt > out.txt")
    builder.files = {"in.txt": orm.SinglefileData(b"hello\n", "in.txt")}
    builder.outputs = orm.List(["out.txt"])
    builder.metadata.label = "first"
    outputs, node = engine.run_get_node(builder)

    assert node.is_finished_ok, (node.exit_status, node.exit_message)
    assert node.label == "first" and node.job_id
    assert outputs["stdout"].get_content() == b"hello\n"
    assert outputs["stderr"].get_content() == b"oops\n"
    assert outputs["files"]["out_txt"].get_content() == b"HELLO\n"
    assert set(node.inputs) == {"command", "files__in.txt", "outputs"}
    assert {"remote_folder", "retrieved", "stdout", "stderr", "files__out_txt"} <= set(node.outputs)
    assert node.outputs.stdout.creator == node
    assert "_veglia_submit.sh" in node.list_object_names()
    assert "stdout" in node.outputs.retrieved.list_object_names()
    messages = [log.message for log in node.logs]
    assert any(m.startswith("submitted job") for m in messages)
    assert node.get_checkpoint() is None  # terminated: nothing left to resume


def test_nonzero_exit_fails_the_job_with_its_status(profile):
    _, node = engine.run_get_node(ShellJob, command=orm.Str("echo partial; exit 3"))
    assert node.is_failed
    assert node.exit_status == 400
    assert node.exit_message == "The command exited with status 3."


def test_arithmetic_add(profile):
    outputs = engine.run(AddJob, x=orm.Int(2), y=orm.Int(40))
    assert outputs["sum"].value == 42


def test_a_job_is_never_seen_with_its_outputs_but_not_finished(profile, monkeypatch):
    """The parser's outputs and the job's end are one commit: another reader (the CLI,
    another worker) sees both or neither, never a parsed job that has not ended."""
    import sqlalchemy as sa

    from veglia.engine.process import Process
    from veglia.manage import get_storage
    from veglia.storage.tables import links

    seen = []
    transition_to = Process.transition_to

    def watched(self, new_state, **kwargs):
        if getattr(new_state, "LABEL", None) is not None and new_state.LABEL.value == "finished":
            with get_storage().engine.connect() as other:  # what a reader sees just before
                seen.append(
                    other.execute(
                        sa.select(sa.func.count())
                        .select_from(links)
                        .where(links.c.input_id == self.node.pk, links.c.label == "sum")
                    ).scalar()
                )
        return transition_to(self, new_state, **kwargs)

    monkeypatch.setattr(Process, "transition_to", watched)
    outputs, node = engine.run_get_node(AddJob, x=orm.Int(1), y=orm.Int(2))
    assert node.is_finished_ok and outputs["sum"].value == 3
    assert seen == [0]
    assert node.outputs.sum.value == 3  # and once it ended, there they are


def test_the_parser_runs_before_its_job_writes_anything_of_the_end(profile, monkeypatch):
    """A parser runs while the job holds no write transaction: another writer (the other
    daemon worker, the CLI) is not kept waiting for it; its outputs are then stored and
    linked in the order it gave them, with the end."""
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.storage.tables import nodes

    written = []

    def parse_and_write_elsewhere(self, retrieved, outcome):
        # Another connection that will not wait: on SQLite it fails at once while this
        # job's transaction holds the write lock.
        engine_ = get_storage().engine
        with engine_.connect().execution_options(isolation_level="AUTOCOMMIT") as other:
            if engine_.dialect.name == "sqlite":
                other.exec_driver_sql("PRAGMA busy_timeout=0")
            other.execute(
                sa.update(nodes).where(nodes.c.id == self.node.pk).values(label="parsing")
            )
            written.append(
                other.execute(sa.select(nodes.c.label).where(nodes.c.id == self.node.pk)).scalar()
            )
        self.out("sum", orm.Int(int(retrieved.get_object_content("aiida.out"))))
        return None

    monkeypatch.setattr(AddJob, "parse_retrieved", parse_and_write_elsewhere)
    outputs, node = engine.run_get_node(AddJob, x=orm.Int(20), y=orm.Int(22))
    assert written == ["parsing"]
    assert node.is_finished_ok and outputs["sum"].value == 42
    labels = list(node.outputs)  # in link order
    assert labels.index("retrieved") < labels.index("sum")


def test_a_job_leaves_no_local_folders_behind(profile, monkeypatch, tmp_path):
    """The folder the inputs were written in and the one the files were retrieved into are
    deleted (off the engine's loop, so soon after the job ends rather than before)."""
    import tempfile
    import time

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    outputs, node = engine.run_get_node(AddJob, x=orm.Int(1), y=orm.Int(1))
    assert node.is_finished_ok and outputs["sum"].value == 2
    deadline = time.monotonic() + 10
    while any(scratch.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(scratch.iterdir())


def test_builder_names_the_wrong_port(profile):
    builder = AddJob.get_builder()
    with pytest.raises(InputValidationError, match="'x'"):
        builder.x = orm.Str("two")
    with pytest.raises(InputValidationError, match="Unknown input 'z'"):
        builder.z = orm.Int(1)
    with pytest.raises(InputValidationError, match="metadata.options.max_memory_kb"):
        builder.metadata.options.max_memory_kb = -5


def test_missing_command_is_refused_before_anything_runs(profile):
    with pytest.raises(ValueError, match="give a `command`"):
        engine.run(ShellJob)


def test_memory_request_is_enforced_on_direct(profile):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("python3 -c 'x = bytearray(400 * 1024 * 1024)'")
    builder.metadata.options.max_memory_kb = 100 * 1024
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 400


def test_code_runs_with_arguments(profile):
    computer = orm.load_computer("localhost")
    code = orm.Code("echo", computer, "/bin/echo", default_calc_job_plugin="core.shell").store()
    builder = orm.load_code("echo@localhost").get_builder()
    builder.arguments = orm.List(["-n", "a b"])
    outputs, node = engine.run_get_node(builder)
    assert outputs["stdout"].get_content() == b"a b"
    assert node.get_attribute("code")["label"] == "echo@localhost" == code.full_label
