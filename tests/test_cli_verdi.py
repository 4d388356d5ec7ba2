"""A ``verdi`` user's forms of veglia's commands: each works, or ends with wrong usage (exit 2)
and the one line that says how veglia writes it (docs/cli.md, "From verdi")."""

from __future__ import annotations

from pathlib import Path

from veglia import orm
from veglia.cli.verdi_forms import VERDI_FORMS
from veglia.exceptions import CliExit
from veglia_fixtures.profiles import stored_process


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def hint(result) -> str:
    """The one line a verdi form veglia writes otherwise gives, and nothing on stdout."""
    assert result.exit_code == CliExit.USAGE, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_code_create_core_code_installed_with_verdis_options(run_cli, profile):
    verdi = "code create core.code.installed -n --label true --computer localhost"
    result = ok(run_cli(*verdi.split(), "--filepath-executable", "/bin/true"))
    assert "Code 'true@localhost'" in result.stdout and "created for /bin/true" in result.stdout


def test_code_create_of_a_portable_code_says_how_veglia_writes_it(run_cli, profile):
    line = hint(run_cli("code", "create", "core.code.portable", "--label", "x"))
    assert line == (
        "Error: veglia writes this as: veglia code create --label L --computer C --executable "
        "/ABSOLUTE/PATH (veglia's codes are installed on the computer: copy the files there "
        "first)"
    )


def test_computer_configure_with_the_transport_first(run_cli, profile):
    result = ok(run_cli("computer", "configure", "core.local", "localhost", "-n"))
    assert "Computer 'localhost' configured" in result.stdout


def test_computer_configure_with_another_transport_than_the_computers(run_cli, profile):
    line = hint(run_cli("computer", "configure", "core.ssh", "localhost", "-n"))
    assert line == (
        "Error: veglia writes this as: veglia computer configure localhost (its transport is "
        "core.local, not core.ssh)"
    )


def test_group_add_nodes_and_remove_nodes_with_the_group_as_an_option(run_cli, profile):
    node = orm.Int(1).store()
    ok(run_cli("group", "create", "campaign"))
    added = ok(run_cli("group", "add-nodes", "-G", "campaign", "-f", str(node.pk)))
    assert "Added 1 node to group 'campaign' (it holds 1)." in added.stdout
    removed = ok(run_cli("group", "remove-nodes", "--group", "campaign", "-f", str(node.pk)))
    assert "Removed 1 node from group 'campaign' (it holds 0)." in removed.stdout
    ok(run_cli("group", "add-nodes", "-G", "campaign", "-f", str(node.pk)))
    cleared = ok(run_cli("group", "remove-nodes", "-G", "campaign", "-c", "-f"))
    assert "Removed 1 node from group 'campaign'; it is empty." in cleared.stdout
    # veglia's own help lists its names only.
    shown = ok(run_cli("group", "--help")).stdout
    assert "add-nodes" not in shown and "remove-nodes" not in shown


def test_process_list_failed_raw_and_paused_as_verdi_writes_them(run_cli, profile):
    failed = stored_process(orm.CalcJobNode, "finished", "relax", 410)
    stored_process(orm.CalcJobNode, "finished", "fine", 0)
    paused = stored_process(orm.CalcJobNode, "waiting", "bands", paused=True)
    stored_process(orm.CalcJobNode, "waiting", "scf")
    assert ok(run_cli("process", "list", "-X", "-r", "-P", "pk")).stdout.split() == [str(failed.pk)]
    assert ok(run_cli("process", "list", "--paused", "-r", "-P", "pk")).stdout.split() == [
        str(paused.pk)
    ]


def test_config_set_global_says_options_are_per_profile(run_cli, profile):
    line = hint(run_cli("config", "set", "--global", "logging.level", "debug"))
    assert line == (
        "Error: veglia writes this as: veglia config set logging.level debug (options are per "
        "profile: -p PROFILE before `config` for another)"
    )


def test_profile_setdefault(run_cli, profile):
    result = ok(run_cli("profile", "setdefault", "test"))
    assert "'test' is now the default profile." in result.stdout
    assert "setdefault" not in ok(run_cli("profile", "--help")).stdout


def test_every_verdi_form_is_in_the_docs_table():
    text = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    table = text.split("## From verdi", 1)[1].split("\n## ", 1)[0]
    verdi_cells = [row.split(" | ")[0] for row in table.splitlines() if row.startswith("| `")]
    missing = [form for form in VERDI_FORMS if not any(f"`{form}`" in c for c in verdi_cells)]
    assert not missing, missing
