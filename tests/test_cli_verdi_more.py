"""Commands verdi users reach for (issue #36): `code delete / hide / reveal / duplicate`,
`node attributes / extras / label / description`, `user list`, `computer enable / disable`;
what the user sees of each, errors included (one line, the exit code of docs/cli.md)."""

from __future__ import annotations

import json

import pytest

from veglia import orm
from veglia.exceptions import CliExit
from veglia.orm.loading import load_node
from veglia_fixtures.profiles import ok, one_line_error, stored_process


def _code(run_cli, label: str = "true", *extra: str) -> None:
    ok(run_cli("code", "create", "-L", label, "-Y", "localhost", "-X", "/bin/true", *extra))


def _listed_codes(run_cli, *flags: str) -> list[str]:
    rows = ok(run_cli("code", "list", "--raw", *flags)).stdout.splitlines()
    return [row.split("\t")[1] for row in rows]


def _ran_with(code_label: str, state: str = "finished", exit_status: int | None = 0):
    from veglia.orm.computers import load_code

    code = load_code(code_label)
    return stored_process(
        orm.CalcJobNode,
        state,
        exit_status=exit_status,
        code={"pk": code.pk, "label": code.full_label, "executable": code.executable},
    )


# -- code hide / reveal --------------------------------------------------------------------------
def test_a_hidden_code_is_listed_only_with_all(run_cli, profile):
    _code(run_cli, "true")
    _code(run_cli, "other")
    hid = ok(run_cli("code", "hide", "true@localhost")).stdout
    assert "Hid 'true@localhost'" in hid
    assert _listed_codes(run_cli) == ["other@localhost"]
    assert _listed_codes(run_cli, "-a") == ["true@localhost (hidden)", "other@localhost"]
    assert "yes (`veglia code reveal` lists it again)" in ok(run_cli("code", "show", "true")).stdout
    assert "Revealed 'true@localhost'" in ok(run_cli("code", "reveal", "true")).stdout
    assert _listed_codes(run_cli) == ["true@localhost", "other@localhost"]


def test_hiding_an_unknown_code_names_the_codes_there_are(run_cli, profile):
    _code(run_cli, "true")
    line = one_line_error(run_cli("code", "hide", "nope"), CliExit.STORAGE)
    assert "No code is called 'nope' (codes: true@localhost)" in line


# -- code duplicate ------------------------------------------------------------------------------
def test_code_duplicate_copies_the_fields_not_given(run_cli, profile):
    _code(run_cli, "true", "-P", "core.shell", "--prepend-text", "module load x")
    made = ok(run_cli("code", "duplicate", "true", "copy", "-D", "the copy")).stdout
    assert "Code 'copy@localhost' (pk" in made and "made from 'true@localhost'" in made
    shown = ok(run_cli("code", "show", "copy@localhost")).stdout
    for value in ("/bin/true", "core.shell", "module load x", "the copy"):
        assert value in shown
    # verdi's form, and the original hidden.
    again = ok(run_cli("code", "duplicate", "true", "--label", "third", "-n", "--hide-original"))
    assert "'true@localhost' is hidden now" in again.stdout
    assert _listed_codes(run_cli) == ["copy@localhost", "third@localhost"]


def test_code_duplicate_refuses_a_taken_or_missing_label(run_cli, profile):
    _code(run_cli, "true")
    assert "exists already" in one_line_error(
        run_cli("code", "duplicate", "true", "true"), CliExit.CONFIGURATION
    )
    assert "Give the copy's label" in run_cli("code", "duplicate", "true").stderr
    assert run_cli("code", "duplicate", "true").exit_code == CliExit.USAGE
    relative = one_line_error(run_cli("code", "duplicate", "true", "b", "-X", "bin/b"), 3)
    assert "must be an absolute path" in relative


# -- code delete ---------------------------------------------------------------------------------
def test_code_delete_asks_and_dry_run_keeps_it(run_cli, profile):
    _code(run_cli, "true")
    dry = ok(run_cli("code", "delete", "true", "--dry-run")).stdout
    assert "Deleting code 'true@localhost'" in dry and "Dry run: nothing was deleted." in dry
    no = run_cli("code", "delete", "true", input="n\n")
    assert no.exit_code == 1 and "Nothing done." in no.stdout
    assert _listed_codes(run_cli) == ["true@localhost"]
    yes = ok(run_cli("code", "delete", "true", input="y\n"))
    assert "Deleted code 'true@localhost'." in yes.stdout
    assert _listed_codes(run_cli) == []


def test_code_delete_of_a_code_jobs_ran_with_needs_force(run_cli, profile):
    _code(run_cli, "true")
    job = _ran_with("true@localhost")
    line = one_line_error(run_cli("code", "delete", "true"), CliExit.STORAGE)
    assert f"was used by process {job.pk} (finished)" in line
    assert "`veglia code delete true@localhost --force`" in line
    assert _listed_codes(run_cli) == ["true@localhost"]
    deleted = ok(run_cli("code", "delete", "true", "--force")).stdout
    assert "Deleted code 'true@localhost'." in deleted
    assert _listed_codes(run_cli) == []
    # The job keeps its record of the code.
    assert job.refresh().get_attribute("code")["executable"] == "/bin/true"


def test_code_delete_is_refused_while_a_job_with_it_runs(run_cli, profile):
    _code(run_cli, "true")
    job = _ran_with("true@localhost", "waiting", None)
    line = one_line_error(run_cli("code", "delete", "true", "--force"), CliExit.FAILED)
    assert f"process {job.pk} (waiting) runs with it and has not ended" in line
    assert _listed_codes(run_cli) == ["true@localhost"]


# -- node attributes / extras --------------------------------------------------------------------
def test_node_attributes_as_json_with_keys(run_cli, profile):
    node = stored_process(orm.CalcJobNode, "finished", exit_status=0, alpha=1, beta=[1, 2])
    shown = ok(run_cli("node", "attributes", str(node.pk))).stdout
    assert shown.startswith(f"PK: {node.pk}\n")
    assert json.loads(shown.split("\n", 1)[1])["beta"] == [1, 2]
    only = ok(run_cli("node", "attributes", str(node.pk), "-k", "alpha", "--raw")).stdout
    assert json.loads(only) == [{"PK": node.pk, "attributes": {"alpha": 1}}]
    by_uuid = json.loads(ok(run_cli("node", "attributes", str(node.pk), "-i", "uuid", "-r")).stdout)
    assert by_uuid[0]["UUID"] == node.uuid
    line = one_line_error(
        run_cli("node", "attributes", str(node.pk), "-k", "gamma"), CliExit.STORAGE
    )
    assert f"Node {node.pk} has no attribute 'gamma' (attributes: alpha, beta)." in line
    yaml = one_line_error(run_cli("node", "attributes", str(node.pk), "-f", "yaml"), CliExit.USAGE)
    assert "veglia writes this as: -f json" in yaml


def test_node_extras_set_show_and_delete(run_cli, profile):
    first, second = orm.Int(1).store(), orm.Int(2).store()
    pks = (str(first.pk), str(second.pk))
    done = ok(run_cli("node", "extras", *pks, "--set", "score=0.5", "-s", "tag=best run")).stdout
    assert "Extras of 2 nodes: set score, tag." in done
    shown = json.loads(ok(run_cli("node", "extras", *pks, "--raw")).stdout)
    assert shown[1] == {"PK": second.pk, "extras": {"score": 0.5, "tag": "best run"}}
    ok(run_cli("node", "extras", str(first.pk), "--delete", "tag"))
    assert load_node(first.pk).extras == {"score": 0.5}
    bad = run_cli("node", "extras", str(first.pk), "--set", "novalue")
    assert bad.exit_code == CliExit.USAGE and "'novalue' is not KEY=VALUE" in bad.stderr
    line = one_line_error(run_cli("node", "extras", str(first.pk), "-k", "tag"), CliExit.STORAGE)
    assert "has no extra 'tag' (extras: score)" in line


def test_node_commands_name_a_missing_node(run_cli, profile):
    for command in ("attributes", "extras", "label", "description"):
        line = one_line_error(run_cli("node", command, "999999"), CliExit.STORAGE)
        assert "999999" in line, command


def test_a_pk_past_what_the_database_holds_is_no_such_node(run_cli, profile):
    """SQLite's driver cannot send a number past 64 bits: such a pk names no node, as any
    other missing one, instead of an "Unexpected OverflowError"."""
    huge = "99999999999999999999999"
    for command in (
        ("node", "attributes"),
        ("process", "show"),
        ("process", "kill"),
        ("calcjob", "gotocomputer", "--print"),
        ("verify",),
    ):
        line = one_line_error(run_cli(*command, huge), CliExit.STORAGE)
        assert "No node with pk" in line and huge in line, command
    assert "No computer" in one_line_error(run_cli("computer", "show", huge), CliExit.STORAGE)
    assert "No group" in one_line_error(run_cli("group", "show", huge), CliExit.STORAGE)
    for option in ("--limit", "--past-days", "--exit-status", "--called-by"):
        result = run_cli("process", "list", option, huge)
        assert result.exit_code == CliExit.USAGE and "is not in the range" in result.stderr


# -- node label / description --------------------------------------------------------------------
def test_node_label_shows_and_sets(run_cli, profile):
    node = orm.Int(1).store()
    node.set_label("before")
    assert ok(run_cli("node", "label", str(node.pk), "--raw")).stdout == "before\n"
    done = ok(run_cli("node", "label", str(node.pk), "--set", "after")).stdout
    assert "Set the label 'after' of 1 node." in done
    assert load_node(node.pk).label == "after"
    # verdi's form: -L LABEL, and -f that veglia does not need.
    ok(run_cli("node", "label", str(node.pk), "-L", "verdi", "-f"))
    table = ok(run_cli("node", "label", str(node.pk))).stdout
    assert "Label" in table and "verdi" in table
    long = run_cli("node", "label", str(node.pk), "--set", "x" * 256)
    assert long.exit_code == CliExit.USAGE and "at most 255 characters" in long.stderr


def test_node_description_shows_and_sets(run_cli, profile):
    first, second = orm.Int(1).store(), orm.Int(2).store()
    pks = (str(first.pk), str(second.pk))
    done = ok(run_cli("node", "description", *pks, "-s", "from the first run")).stdout
    assert "Set the description of 2 nodes." in done
    raw = ok(run_cli("node", "description", *pks, "-r")).stdout
    assert raw == "from the first run\nfrom the first run\n"
    ok(run_cli("node", "description", str(first.pk), "-D", "verdi's way", "--force"))
    assert load_node(first.pk).description == "verdi's way"


# -- user list -----------------------------------------------------------------------------------
def test_user_list_marks_the_profiles_user(run_cli, profile):
    from veglia.manage import get_storage
    from veglia.orm.users import get_default_user
    from veglia.storage import models

    email = get_default_user().email
    with get_storage().session() as session:
        session.add(models.User(email="colleague@example.org", first_name="Ada"))
    rows = [row.split("\t") for row in ok(run_cli("user", "list", "-r")).stdout.splitlines()]
    assert ["", "colleague@example.org", "Ada", "", ""] in rows
    assert ["*", email, "", "", ""] in rows
    shown = ok(run_cli("user", "list")).stdout
    assert f"* the profile's user, {email}" in shown


# -- computer enable / disable -------------------------------------------------------------------
def test_a_disabled_computer_takes_no_new_jobs(run_cli, profile):
    done = ok(run_cli("computer", "disable", "localhost")).stdout
    assert "Computer 'localhost' is disabled for" in done
    assert "`veglia computer enable localhost` undoes this" in done
    listed = ok(run_cli("computer", "list")).stdout
    assert "localhost" not in listed.split("1 disabled computer")[0]
    assert "1 disabled computer not shown: -a lists it." in listed
    rows = ok(run_cli("computer", "list", "-a", "-r")).stdout.splitlines()
    assert rows == ["1\tlocalhost\tlocalhost\tcore.local\tcore.direct\tyes, disabled"]
    assert "You disabled it" in ok(run_cli("computer", "show", "localhost")).stdout
    line = one_line_error(run_cli("shell", "echo hi"), CliExit.CONFIGURATION)
    assert "Computer 'localhost' is disabled for" in line
    assert "Run `veglia computer enable localhost` first. Nothing was stored." in line
    assert ok(run_cli("process", "list", "-a", "-r")).stdout == ""
    enabled = ok(run_cli("computer", "enable", "localhost")).stdout
    assert "Computer 'localhost' is enabled for" in enabled
    assert "hi" in ok(run_cli("shell", "echo hi")).stdout
    assert "You disabled it" not in ok(run_cli("computer", "show", "localhost")).stdout


def test_computer_disable_for_another_user(run_cli, profile):
    from veglia.manage import get_storage
    from veglia.storage import models

    unknown = one_line_error(run_cli("computer", "disable", "localhost", "-u", "x@y.z"), 4)
    assert "No user 'x@y.z' in this profile (users:" in unknown
    with get_storage().session() as session:
        session.add(models.User(email="colleague@example.org"))
    line = one_line_error(
        run_cli("computer", "disable", "localhost", "--user", "colleague@example.org"), 3
    )
    assert "not configured for colleague@example.org, so there is nothing to disable" in line
    # The profile's user is not affected.
    assert "localhost" in ok(run_cli("computer", "list", "-r")).stdout


@pytest.mark.parametrize(
    "command",
    [
        ("code", "delete"),
        ("code", "hide"),
        ("code", "reveal"),
        ("code", "duplicate"),
        ("node", "attributes"),
        ("node", "extras"),
        ("node", "label"),
        ("node", "description"),
        ("user", "list"),
        ("computer", "enable"),
        ("computer", "disable"),
    ],
)
def test_every_new_command_has_help(run_cli, command):
    shown = ok(run_cli(*command, "--help")).stdout
    assert shown.startswith(f"Usage: veglia {' '.join(command)}")
    assert len(shown.split("\n\n")[1].strip()) > 20  # a sentence, not nothing


def test_migration_0012_adds_hidden_codes_and_downgrades(storage):
    """Codes stored before 0012 are shown after it; a downgrade drops the column."""
    import sqlalchemy as sa
    from alembic import command

    from veglia.storage.tables import codes

    def columns() -> set[str]:
        return {c["name"] for c in sa.inspect(storage.engine).get_columns("codes")}

    assert "hidden" in columns()
    config = storage._alembic_config()
    with storage.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0011")
    assert "hidden" not in columns()
    with storage.engine.begin() as connection:
        computer = connection.execute(
            sa.text(
                "INSERT INTO computers (uuid, label, hostname, description, scheduler_type, "
                "transport_type, properties) VALUES ('u1', 'c', 'h', '', 'core.direct', "
                "'core.local', '{}') RETURNING id"
            )
        ).scalar_one()
        connection.execute(
            sa.text(
                "INSERT INTO codes (uuid, label, description, computer_id, executable, "
                "prepend_text, append_text, ctime) VALUES ('u2', 'old', '', :c, '/bin/true', "
                "'', '', CURRENT_TIMESTAMP)"
            ),
            {"c": computer},
        )
    assert storage.migrate() == ("0011", "0014")
    with storage.engine.connect() as connection:
        assert connection.execute(sa.select(codes.c.hidden)).scalar_one() is False
