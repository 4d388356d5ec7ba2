"""Pipeline setups: stored, versioned, checked at creation, and managed with `veglia pipeline`
(from a TOML file and through its questions), on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def setup_text(runs: Path, setup_name: str = "count-lines", **changes: str | None) -> str:
    """A setup of core.shell over core.folder on localhost; ``changes`` replace whole lines
    (key = value) or add them to their table."""
    lines = {
        "name": f"'{setup_name}'",
        "description": "'count the lines of each file'",
        "process": "'core.shell'",
        "input_port": "'files'",
        "max_active": "4",
        "inputs.command": "'wc -l *.txt > counts.txt'",
        "inputs.outputs": "['counts.txt']",
        "options.computer": "'localhost'",
        "options.max_wallclock_seconds": "600",
        "source.entry_point": "'core.folder'",
        "source.settings.path": f"'{runs}'",
        "source.settings.glob": "'*.txt'",
    }
    lines.update(changes)
    tables: dict[str, list[str]] = {"": [], "inputs": [], "options": [], "source": []}
    tables["source.settings"] = []
    for key, value in lines.items():
        if value is None:
            continue
        table, _, last = key.rpartition(".")
        tables[table].append(f"{last} = {value}")
    text = "\n".join(tables.pop(""))
    for table, body in tables.items():
        text += f"\n\n[{table}]\n" + "\n".join(body)
    return text + "\n"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


def write(tmp_path: Path, text: str, name: str = "setup.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_setup_from_toml_is_stored_listed_and_shown(any_profile, run_cli, tmp_path, runs):
    from veglia.pipeline_setups import load_pipeline_setup

    created = ok(run_cli("pipeline", "create", "--from-file", write(tmp_path, setup_text(runs))))
    assert "Created pipeline setup 'count-lines' version 1 (disabled)" in created.stdout
    assert "veglia pipeline enable count-lines" in created.stdout

    setup = load_pipeline_setup("count-lines")
    assert (setup.version, setup.enabled, setup.max_active) == (1, False, 4)
    assert setup.inputs == {"command": "wc -l *.txt > counts.txt", "outputs": ["counts.txt"]}
    assert setup.options == {"computer": "localhost", "max_wallclock_seconds": 600}
    # The source's defaults are filled in, so a version means the same later.
    assert setup.source_settings == {
        "path": str(runs),
        "glob": "*.txt",
        "group_by": None,
        "settled": 60.0,
    }
    assert setup.created_by and setup.created is not None

    listed = ok(run_cli("pipeline", "list")).stdout
    assert re.search(r"count-lines\s+1\s+no\s+core\.shell\s+core\.folder\s+\d+s ago", listed)
    shown = ok(run_cli("pipeline", "show", "count-lines")).stdout
    for pattern in (
        r"version\s+1 of 1",
        r"process\s+core\.shell",
        r"input port\s+files",
        r"computer\s+localhost",
        r"max active\s+4",
        r"glob\s+\*\.txt",
        r"command\s+wc -l \*\.txt > counts\.txt",
        r"max_wallclock_seconds\s+600",
    ):
        assert re.search(pattern, shown), (pattern, shown)

    # The TOML it shows is a setup file again: create another from it.
    toml = ok(run_cli("pipeline", "show", "count-lines", "--toml")).stdout
    data = tomllib.loads(toml)
    assert data["source"]["settings"]["settled"] == 60.0
    assert "group_by" not in data["source"]["settings"]  # None: TOML leaves it out
    copy = write(tmp_path, toml.replace('name = "count-lines"', 'name = "count-2"'), "copy.toml")
    ok(run_cli("pipeline", "create", "--from-file", copy))
    assert load_pipeline_setup("count-2").to_dict() == {**setup.to_dict(), "name": "count-2"}

    again = run_cli("pipeline", "create", "--from-file", write(tmp_path, setup_text(runs)))
    assert again.exit_code == 9
    assert "exists already (version 1)" in again.stderr and "pipeline edit" in again.stderr


def test_an_edit_makes_a_new_version_and_keeps_the_old(any_profile, run_cli, tmp_path, runs):
    from veglia.pipeline_setups import load_pipeline_setup

    ok(run_cli("pipeline", "create", "--from-file", write(tmp_path, setup_text(runs))))
    edited = ok(
        run_cli(
            "pipeline",
            "edit",
            "count-lines",
            "--set",
            "options.queue_name=long",
            "--set",
            "max_active=2",
            "--set",
            "inputs.command=wc -c *.txt > counts.txt",
        )
    )
    assert "Stored pipeline setup 'count-lines' version 2" in edited.stdout
    old, new = load_pipeline_setup("count-lines", 1), load_pipeline_setup("count-lines")
    assert new.version == 2 and new.max_active == 2 and old.max_active == 4
    assert new.options["queue_name"] == "long" and "queue_name" not in old.options
    assert new.inputs["command"] == "wc -c *.txt > counts.txt"
    assert old.inputs["command"] == "wc -l *.txt > counts.txt"

    shown = ok(run_cli("pipeline", "show", "count-lines", "--version", "1")).stdout
    assert re.search(r"version\s+1 of 2", shown) and "queue_name" not in shown
    assert re.search(r"count-lines\s+2\s", ok(run_cli("pipeline", "list")).stdout)
    every = ok(run_cli("pipeline", "list", "--all-versions")).stdout
    assert re.search(r"count-lines\s+1\s", every) and re.search(r"count-lines\s+2\s", every)

    # A whole file: what it leaves out is gone (max_active).
    whole = write(tmp_path, setup_text(runs, max_active=None), "whole.toml")
    ok(run_cli("pipeline", "edit", "count-lines", "--from-file", whole))
    assert load_pipeline_setup("count-lines").max_active is None
    assert load_pipeline_setup("count-lines").version == 3

    same = run_cli("pipeline", "edit", "count-lines", "--from-file", whole)
    assert same.exit_code == 9 and "changes nothing, so no version 4" in same.stderr
    wrong = run_cli("pipeline", "edit", "count-lines", "--set", "options.computer=nowhere")
    assert wrong.exit_code == 9 and "No computer 'nowhere'" in wrong.stderr
    assert load_pipeline_setup("count-lines").version == 3
    missing = run_cli("pipeline", "show", "count-lines", "--version", "7")
    assert missing.exit_code == 4 and "no version 7: its versions are 1 to 3" in missing.stderr
    unknown = run_cli("pipeline", "show", "nope")
    assert unknown.exit_code == 4
    assert "No pipeline setup 'nope' (setups: count-lines)" in unknown.stderr


def test_enable_and_disable_apply_to_every_version(any_profile, run_cli, tmp_path, runs):
    from veglia.pipeline_setups import load_pipeline_setup

    ok(run_cli("pipeline", "create", "--from-file", write(tmp_path, setup_text(runs))))
    ok(run_cli("pipeline", "edit", "count-lines", "--set", "max_active=1"))
    enabled = ok(run_cli("pipeline", "enable", "count-lines")).stdout
    assert "enabled (version 2 is the newest)" in enabled
    assert re.search(r"count-lines\s+2\s+yes", ok(run_cli("pipeline", "list")).stdout)
    assert load_pipeline_setup("count-lines", 1).enabled
    # An edit keeps the setup enabled.
    ok(run_cli("pipeline", "edit", "count-lines", "--set", "max_active=3"))
    assert load_pipeline_setup("count-lines").enabled

    ok(run_cli("pipeline", "disable", "count-lines"))
    assert not any(load_pipeline_setup("count-lines", v).enabled for v in (1, 2, 3))
    missing = run_cli("pipeline", "enable", "nope")
    assert missing.exit_code == 4 and "No pipeline setup 'nope'" in missing.stderr


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"process": "'core.nope'"}, "process: No calculation or workflow 'core.nope'. Installed:"),
        ({"inputs.comand": "'ls'"}, "Unknown input 'comand'; the inputs here are:"),
        ({"inputs.command": None}, "give a `command` (a bash command line) or a `code`"),
        ({"options.computer": "'nowhere'"}, "No computer 'nowhere' (computers: localhost)"),
        ({"options.max_wallclock_seconds": "-5"}, "max_wallclock_seconds"),
        (
            {"options.monitors": "{ stuck = { entry_point = 'core.nope' } }"},
            "options.monitors:",
        ),
        ({"source.settings.path": None}, "setting 'path' is missing"),
        ({"source.entry_point": "'core.nope'"}, "No plugin 'core.nope' in group"),
        ({"source.settings.colour": "'red'"}, "unknown setting 'colour'"),
        ({"input_port": "'stdin'"}, "has no input 'stdin' (its inputs: "),
        ({"input_port": "'arguments'"}, "input_port 'arguments' cannot take a file of core.folder"),
        ({"input_port": "'command'"}, "inputs.command is the input_port: each element goes there"),
        ({"max_active": "0"}, "max_active = 0 will not do"),
        ({"name": "'two words'"}, "name 'two words' will not do"),
        ({"colour": "'red'"}, "unknown key 'colour'"),
    ],
)
def test_a_setup_that_does_not_fit_is_refused_in_one_line(
    profile, run_cli, tmp_path, runs, changes, message
):
    from veglia.pipeline_setups import list_pipeline_setups

    result = run_cli(
        "pipeline", "create", "--from-file", write(tmp_path, setup_text(runs, **changes))
    )
    assert result.exit_code == 9, result.output
    assert message in result.stderr
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert list_pipeline_setups() == []


def test_a_group_source_gives_nodes_and_restart_takes_options_for_its_job(profile, tmp_path, runs):
    from veglia import orm
    from veglia.exceptions import PipelineSetupError
    from veglia.pipeline_setups import PipelineSetup, parse_setup_toml

    orm.Group("reads").store()
    # A node, not a file, cannot go where core.shell wants files.
    nodes_to_files = setup_text(
        runs,
        setup_name="from-group",
        **{
            "source.entry_point": "'core.group'",
            "source.settings.path": None,
            "source.settings.glob": None,
            "source.settings.group": "'reads'",
        },
    )
    with pytest.raises(PipelineSetupError, match="cannot take a node of core.group"):
        PipelineSetup.from_dict(parse_setup_toml(nodes_to_files)).store()

    restart = PipelineSetup.from_dict(
        {
            "name": "count-with-retries",
            "process": "core.restart",
            "input_port": "job.files",
            "inputs": {"process": "core.shell", "job": {"command": "wc -l *.txt"}},
            "options": {"computer": "localhost", "queue_name": "short"},
            "source": {"entry_point": "core.folder", "settings": {"path": str(runs)}},
        }
    ).store()
    assert restart.version == 1 and restart.options["queue_name"] == "short"
    wrong_port = {**restart.to_dict(), "name": "restart-2", "input_port": "files"}
    with pytest.raises(PipelineSetupError, match="has no input 'files'"):
        PipelineSetup.from_dict(wrong_port).store()


def test_create_asks_for_each_part_and_asks_again_after_a_wrong_choice(any_profile, run_cli, runs):
    from veglia.pipeline_setups import load_pipeline_setup

    answers = [
        "core.nowhere",  # not a data source: explained, asked again
        "core.folder",
        str(runs),  # path
        "*.txt",  # glob
        "",  # group_by: none
        "10",  # settled
        "",  # the source's computer: localhost
        "core.arithmetic.add",  # takes no files: not offered
        "core.shell",
        "",  # input_port: files
        "",  # computer: localhost
        "command = 'wc -l *.txt > counts.txt'",
        "outputs = ['counts.txt']",
        "",
        "queue_name = 'short'",
        "",
        "2",  # max_active
        "",  # no step after it
        "two words",  # not a name: asked again
        "count-lines",
        "y",
    ]
    result = ok(run_cli("pipeline", "create", input="\n".join(answers) + "\n"))
    out = result.output
    assert "'core.nowhere' is not one of the data sources offered (core.fofn, core.folder" in out
    assert "'core.arithmetic.add' is not one of the processes offered" in out
    assert "name 'two words' will not do" in out
    assert out.count("Please answer again.") == 3
    assert "the folder on the computer" in out  # each setting's help
    assert 'command = "wc -l *.txt > counts.txt"' in out  # the summary
    assert "Created pipeline setup 'count-lines' version 1 (enabled)" in out

    setup = load_pipeline_setup("count-lines")
    assert (setup.process, setup.input_port, setup.source, setup.max_active) == (
        "core.shell",
        "files",
        "core.folder",
        2,
    )
    assert setup.source_settings["settled"] == 10.0 and setup.source_settings["glob"] == "*.txt"
    assert setup.inputs == {"command": "wc -l *.txt > counts.txt", "outputs": ["counts.txt"]}
    assert setup.options == {"computer": "localhost", "queue_name": "short"}
    assert setup.enabled


def test_migration_0009_adds_pipeline_setups_and_downgrades(storage):
    import sqlalchemy as sa
    from alembic import command

    def tables() -> set[str]:
        return set(sa.inspect(storage.engine).get_table_names())

    assert "pipeline_setups" in tables()
    config = storage._alembic_config()
    with storage.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0008")
    assert "pipeline_setups" not in tables()
    assert storage.migrate() == ("0008", "0014")
    columns = {c["name"] for c in sa.inspect(storage.engine).get_columns("pipeline_setups")}
    assert {"name", "version", "enabled", "process", "inputs", "options", "input_port"} <= columns
    assert {"source", "source_settings", "source_computer", "max_active", "created"} <= columns


def test_list_and_show_load_neither_the_orm_nor_the_engine(profile, tmp_path, runs):
    """`pipeline list` and `show` read rows through tables: a third less start-up."""
    import subprocess
    import sys

    from veglia.pipeline_setups import PipelineSetup, parse_setup_toml

    PipelineSetup.from_dict(parse_setup_toml(setup_text(runs))).store()
    code = (
        "import sys\nfrom veglia.cli.main import main\n"
        "for args in (['pipeline', 'list'], ['pipeline', 'show', 'count-lines']):\n"
        "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
        "print([m for m in ('sqlalchemy.orm', 'plumpy', 'veglia.engine') if m in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "count-lines" in result.stdout
    assert result.stdout.splitlines()[-1] == "[]"
