"""verdi's command lines that click refuses get the one line of how veglia writes them; the
verdi forms that mean one thing work; bad input to those commands is one line (issue #36,
section 1, as a verdi user tried it from outside)."""

from __future__ import annotations

import zipfile

import pytest

from veglia import orm
from veglia.cli.verdi_forms import USAGE_HINTS
from veglia.exceptions import CliExit
from veglia.orm.loading import load_node
from veglia.orm.queries import node_pks
from veglia_fixtures.profiles import ok, one_line_error, stored_process

#: A command line a verdi user types for each entry of USAGE_HINTS.
VERDI_LINES = {
    "node graph generate": ["node", "graph", "generate", "1"],
    "daemon logshow": ["daemon", "logshow"],
    "storage info --detailed": ["storage", "info", "--detailed"],
    "storage version": ["storage", "version"],
    "code setup": ["code", "setup"],
    "user configure": ["user", "configure", "--email", "me@example.org"],
    "user set-default": ["user", "set-default", "me@example.org"],
    "python SCRIPT": ["-p", "test", "python", "script.py"],
}


def test_every_usage_hint_has_a_line_here():
    assert set(VERDI_LINES) == set(USAGE_HINTS)


@pytest.mark.parametrize("form", sorted(VERDI_LINES))
def test_a_verdi_line_click_refuses_says_how_veglia_writes_it(run_cli, profile, form):
    line = one_line_error(run_cli(*VERDI_LINES[form]), CliExit.USAGE)
    assert line == f"Error: veglia writes this as: {USAGE_HINTS[form]}"


def test_a_line_that_is_no_verdi_form_keeps_clicks_message(run_cli, profile):
    result = run_cli("node", "nosuch")
    assert result.exit_code == CliExit.USAGE
    assert "No such command 'nosuch'" in result.stderr and "veglia writes" not in result.stderr


def test_computer_configure_show_and_a_transport_without_a_label(run_cli, profile):
    shown = one_line_error(run_cli("computer", "configure", "show", "localhost"), CliExit.USAGE)
    assert shown == "Error: veglia writes this as: veglia computer show localhost"
    result = run_cli("computer", "configure", "core.ssh")
    assert result.exit_code == CliExit.USAGE
    assert "Missing argument LABEL: the computer to configure over core.ssh." in result.stderr


def test_a_port_out_of_range_is_refused_and_nothing_changes(run_cli, profile):
    ok(
        run_cli(
            "computer",
            "setup",
            "-L",
            "far",
            "-H",
            "far.example.org",
            "-T",
            "core.ssh",
            "-S",
            "core.direct",
            "-n",
        )
    )
    line = one_line_error(run_cli("computer", "configure", "far", "-n", "--port", "99999"), 3)
    assert line == "Error: --port: 99999 is not between 1 and 65535."
    line = one_line_error(run_cli("computer", "configure", "far", "-n", "--timeout", "-1"), 3)
    assert line == "Error: --timeout: -1.0 is not at least 0.1."
    ok(run_cli("computer", "configure", "far", "-n", "--port", "2222"))
    assert "2222" in ok(run_cli("computer", "show", "far")).stdout


# -- archives --------------------------------------------------------------------------------
def test_archive_info_and_create_all_and_nodes_as_aiida_2_writes_them(run_cli, profile, tmp_path):
    first, second = orm.Int(1).store(), orm.Str("two").store()
    orm.Group(label="numbers").store().add_nodes([first])
    everything = tmp_path / "all.zip"
    ok(run_cli("archive", "create", "--all", str(everything)))
    shown = ok(run_cli("archive", "info", str(everything))).stdout
    assert "Int" in shown and "Str" in shown and "groups" in shown
    one = tmp_path / "one.zip"
    ok(run_cli("archive", "create", str(one), "-N", str(second.pk)))
    with zipfile.ZipFile(one) as archive:
        assert archive.read("data.json").count(second.uuid.encode()) >= 1
        assert first.uuid.encode() not in archive.read("data.json")
    both = run_cli("archive", "create", "--all", str(tmp_path / "x.zip"), str(first.pk))
    assert both.exit_code == CliExit.USAGE and "not both" in both.stderr
    assert "info" not in ok(run_cli("archive", "--help")).stdout


def test_archive_inspect_of_a_bad_file_does_not_speak_of_an_import(run_cli, tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_text("not a zip")
    line = one_line_error(run_cli("archive", "inspect", str(bad)), CliExit.INVALID_INPUT)
    assert "is not a veglia archive" in line and "imported" not in line


# -- processes, extras, codes ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("action", "said"),
    [
        ("kill", "No active process to kill."),
        ("pause", "No active process to pause."),
        ("play", "No paused process to play."),
    ],
)
def test_all_with_nothing_to_act_on_says_so(run_cli, profile, action, said):
    stored_process(orm.CalcJobNode, "finished", "done", 0)
    assert said in ok(run_cli("process", action, "--all")).stdout


def test_an_extra_name_the_database_cannot_hold_is_one_line(run_cli, profile):
    node = orm.Int(1).store()
    for args in (("--set", 'a"b=1'), ("--delete", 'a"b'), ("--delete", "")):
        line = one_line_error(run_cli("node", "extras", str(node.pk), *args), CliExit.INVALID_INPUT)
        assert "may not be empty or hold quotes or backslashes" in line, args


def test_removing_an_extra_that_is_not_there_says_so(run_cli, profile):
    node = orm.Int(1).store()
    said = ok(run_cli("node", "extras", str(node.pk), "--set", "x=1", "--delete", "nosuch"))
    assert "set x; no extra nosuch to remove." in said.stdout
    assert "removed x." in ok(run_cli("node", "extras", str(node.pk), "--delete", "x")).stdout


def test_code_delete_takes_several_codes_and_checks_each_first(run_cli, profile):
    for label in ("one", "two"):
        ok(run_cli("code", "create", "-L", label, "-Y", "localhost", "-X", "/bin/true"))
    missing = one_line_error(run_cli("code", "delete", "one", "nosuch", "-f"), CliExit.STORAGE)
    assert "nosuch" in missing
    assert len(ok(run_cli("code", "list", "--raw")).stdout.splitlines()) == 2  # none went
    said = ok(run_cli("code", "delete", "one", "two", "-f")).stdout
    assert "Deleted code 'one@localhost'." in said and "Deleted code 'two@localhost'." in said
    assert ok(run_cli("code", "list", "--raw")).stdout.strip() == ""


def test_verdis_names_stay_out_of_code_create_help(run_cli, profile):
    shown = ok(run_cli("code", "create", "--help")).stdout
    assert "filepath-executable" not in shown and "core.code.installed" not in shown
    assert "-X, --executable" in shown


def test_a_missing_attribute_is_said_without_a_double_negative(run_cli, profile):
    first, second = orm.Int(1).store(), orm.Int(2).store()
    line = one_line_error(
        run_cli("node", "attributes", str(first.pk), str(second.pk), "-k", "nosuch"),
        CliExit.STORAGE,
    )
    assert "None of these nodes has the attribute 'nosuch'" in line


def test_a_label_of_two_lines_and_an_empty_command_line_are_refused(run_cli, profile):
    node = orm.Int(1).store()
    refused = run_cli("node", "label", str(node.pk), "--set", "two\nlines")
    assert refused.exit_code == CliExit.USAGE and "one line of printable text" in refused.stderr
    empty = run_cli("shell", "  ")
    assert empty.exit_code == CliExit.USAGE and "The command line is empty" in empty.stderr
    assert not [n for n in map(load_node, node_pks()) if isinstance(n, orm.CalcJobNode)]


def test_outputcat_of_a_file_not_retrieved_names_the_job_not_its_folder(run_cli, profile):
    from veglia import engine
    from veglia.entry_points import CalculationFactory

    _, node = engine.run_get_node(CalculationFactory("core.shell"), command=orm.Str("echo hi"))
    for command in ("outputcat", "outputls"):
        line = one_line_error(run_cli("calcjob", command, str(node.pk), "nosuch"), CliExit.STORAGE)
        assert line.startswith(f"Error: Calc job {node.pk} retrieved no file"), line
        assert "<FolderData" not in line and "stdout" in line


def test_the_report_of_a_failed_job_says_why_it_failed(run_cli, profile):
    from veglia import engine
    from veglia.entry_points import CalculationFactory

    _, node = engine.run_get_node(CalculationFactory("core.shell"), command=orm.Str("exit 7"))
    report = ok(run_cli("process", "report", str(node.pk))).stdout
    assert "finished with exit status 400: The command exited with status 7." in report
