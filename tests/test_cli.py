"""The `veglia` command line as a new user meets it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

import veglia
from veglia.exceptions import CliExit


def test_version(run_cli):
    result = run_cli("--version")
    assert result.exit_code == 0 and veglia.__version__ in result.stdout


def test_presto_gives_a_healthy_profile(run_cli, veglia_home):
    result = run_cli("presto", "--no-broker")
    assert result.exit_code == 0, result.output
    assert "created computer 'localhost' (core.local, core.direct" in result.stdout

    status = run_cli("status")
    assert status.exit_code == 0, status.output
    for check in ("version", "config", "storage", "broker"):
        assert f"✔ {check}:" in status.stdout
    assert "✘" not in status.stdout

    again = run_cli("presto", "--no-broker")
    assert again.exit_code == 0 and "nothing to do" in again.stdout


def test_presto_uses_the_local_rabbitmq(run_cli, rabbitmq_url):
    result = run_cli("presto")
    assert result.exit_code == 0, result.output
    assert "✔ broker:   RabbitMQ" in result.stdout
    assert ":guest@" not in result.output


def test_status_without_profile_says_how_to_make_one(run_cli):
    result = run_cli("status")
    assert result.exit_code == 3
    assert "veglia presto" in result.stderr
    assert "Traceback" not in result.output


def test_status_shows_a_cross_and_a_hint_for_a_dead_broker(run_cli):
    assert run_cli("presto", "--no-broker").exit_code == 0
    assert run_cli("config", "set", "broker.url", "amqp://guest:pw@127.0.0.1:1/").exit_code == 0
    result = run_cli("status")
    assert result.exit_code == 1
    assert "✘ broker:" in result.stdout and "hint:" in result.stdout
    assert ":pw@" not in result.output


def _answers(storage_url: str) -> str:
    return "\n".join(
        [
            storage_url,  # storage.url (with a password, which must move to the secrets)
            "",  # storage.password (already in the URL)
            "ftp://nowhere",  # broker.url: invalid, must be asked again
            "amqp://guest@127.0.0.1:5672/",  # broker.url
            "guest",  # broker.password
            "ada@example.org",  # user.email
            "",  # computer.default
            "core.direct",  # scheduler.default
            "short:mem=4G:time=1h; long:time=2d",  # scheduler.queues
            "",  # workdir.root
            "0",  # jobs.max_per_user: invalid
            "25",  # jobs.max_per_user
            "",  # notify.email
            "",
        ]
    )


def test_setup_through_a_pipe_reasks_invalid_answers_and_hides_secrets(
    run_cli, veglia_home, postgres_database, rabbitmq_url
):
    secret = "pg-Sup3r-secret"
    url = postgres_database.replace("postgres@", f"postgres:{secret}@")
    result = run_cli("setup", "--profile-name", "site", input=_answers(url))
    assert result.exit_code == 0, result.output
    assert result.stdout.count("broker.url [") + result.stdout.count("  broker.url:") >= 2
    assert "is not a URL of the form amqp://" in result.stderr
    assert "must be a whole number greater than 0" in result.stderr
    assert "Self-test" in result.stdout and "✔ storage:" in result.stdout
    assert "✔ broker:" in result.stdout

    secrets_file = veglia_home / "secrets.json"
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    assert json.loads(secrets_file.read_text())["site"]["storage.password"] == secret
    assert secret not in (veglia_home / "config.json").read_text()
    options = json.loads((veglia_home / "config.json").read_text())["profiles"]["site"]["options"]
    assert options["jobs.max_per_user"] == 25
    assert options["scheduler.queues"][0] == {
        "name": "short",
        "max_memory_mb": 4096,
        "max_walltime_seconds": 3600,
    }

    outputs = [result.output]
    for command in (
        ("status",),
        ("config", "show", "--all"),
        ("config", "get", "storage.password"),
        ("config", "get", "broker.password"),
        ("config", "get", "storage.url"),
        ("profile", "show"),
        ("profile", "list"),
        ("storage", "info"),
        ("-v", "status"),
    ):
        shown = run_cli(*command)
        assert shown.exit_code == 0, (command, shown.output)
        outputs.append(shown.output)
    for output in outputs:
        assert secret not in output
        assert ":guest@" not in output
    assert run_cli("config", "get", "storage.password").stdout.strip() == "****"


def test_setup_non_interactive_takes_flags(run_cli, veglia_home):
    result = run_cli(
        "setup",
        "--non-interactive",
        "--profile-name",
        "batch",
        "--jobs-max-per-user",
        "7",
        "--scheduler-queues",
        "q1:cpus=4",
    )
    assert result.exit_code == 0, result.output
    assert run_cli("-p", "batch", "config", "get", "jobs.max_per_user").stdout.strip() == "7"
    bad = run_cli("setup", "-n", "--profile-name", "other", "--jobs-max-per-user", "x")
    assert bad.exit_code == 3 and "jobs.max_per_user" in bad.stderr
    assert "other" not in json.loads((veglia_home / "config.json").read_text())["profiles"]


def test_errors_are_one_red_line_unless_verbose(run_cli):
    assert run_cli("presto", "--no-broker").exit_code == 0
    result = run_cli("config", "set", "jobs.max_per_user", "-3")
    assert result.exit_code == 3
    assert result.stderr.strip().splitlines() == [
        "Error: Invalid value for jobs.max_per_user: '-3' must be a whole number greater than 0."
    ]
    verbose = run_cli("--verbose", "config", "set", "jobs.max_per_user", "-3")
    assert "Traceback" in verbose.stderr


def test_config_set_get_unset(run_cli):
    assert run_cli("presto", "--no-broker").exit_code == 0
    assert run_cli("config", "set", "engine.poll_interval", "2").exit_code == 0
    assert run_cli("config", "get", "engine.poll_interval").stdout.strip() == "2.0"
    shown = run_cli("config", "show", "--raw").stdout.splitlines()
    assert "engine.poll_interval\t2.0\tprofile" in shown
    assert run_cli("config", "unset", "engine.poll_interval").exit_code == 0
    assert run_cli("config", "get", "engine.poll_interval").stdout.strip() == "5.0"
    unknown = run_cli("config", "get", "engine.pol_interval")
    assert unknown.exit_code == 3 and "Did you mean engine.poll_interval" in unknown.stderr


def test_outdated_schema_is_reported_and_migrated(run_cli, veglia_home):
    assert run_cli("presto", "--no-broker").exit_code == 0
    database = veglia_home / "profiles" / "presto" / "storage.sqlite"
    import sqlite3

    # The database as the release before this one left it: schema 0001.
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0001'")
        # Schema 0001 had no outbox, nor did Tower keep its own tables then.
        tables = ("report_outbox", "report_runs", "alembic_version_tower", "process_leases")
        tables += ("repository_blobs", "repository_chunks")
        tables += ("pipeline_elements", "pipeline_sources")
        for table in (*tables, "group_nodes", "groups", "pipeline_setups"):
            connection.execute(f"DROP TABLE {table}")
        for index in ("ix_nodes_cache_hash", "ix_nodes_similarity_key", "ix_nodes_mtime"):
            connection.execute(f"DROP INDEX {index}")
        connection.execute("ALTER TABLE codes DROP COLUMN hidden")  # 0012
        connection.execute("DROP INDEX ix_nodes_cancel_pending")  # 0013
        connection.execute("DROP INDEX ix_nodes_finished_ok_type")  # 0014
        connection.execute("DROP INDEX ix_nodes_finished_ok_key")  # 0014
    status = run_cli("status")
    assert status.exit_code == 1 and "veglia storage migrate" in status.stdout
    assert "at schema 0001; this release needs 0014" in status.stdout
    migrated = run_cli("storage", "migrate")
    assert migrated.exit_code == 0 and "from 0001 to 0014" in migrated.stdout
    assert "Migrated the tables of plugin 'core.tower' from absent to 0001" in migrated.stdout
    assert run_cli("status").exit_code == 0


def test_a_profile_of_the_release_before_keeps_its_outbox_through_storage_migrate(
    run_cli, veglia_home
):
    """Tower's tables were the core's (schema 0010); `storage migrate` hands them to Tower's
    own migrations, and every queued record is still there to send."""
    import sqlite3

    assert run_cli("presto", "--no-broker").exit_code == 0
    database = veglia_home / "profiles" / "presto" / "storage.sqlite"
    with sqlite3.connect(database) as connection:
        # As the release before left it: schema 0010, the outbox in it, no Tower version.
        connection.execute("UPDATE alembic_version SET version_num = '0010'")
        connection.execute("DROP TABLE alembic_version_tower")
        connection.execute("ALTER TABLE codes DROP COLUMN hidden")  # 0012
        connection.execute("DROP INDEX ix_nodes_cancel_pending")  # 0013
        connection.execute("DROP INDEX ix_nodes_finished_ok_type")  # 0014
        connection.execute("DROP INDEX ix_nodes_finished_ok_key")  # 0014
        for task in range(1, 8):
            connection.execute(
                "INSERT INTO report_outbox (reporter, run_key, kind, task_id, attempt, payload,"
                " status, tries, created) VALUES ('tower', 'run-1', 'task', ?, 1, '{}', ?, 0,"
                " '2026-12-01 10:00:00')",
                (task, "sent" if task <= 2 else "pending"),
            )
        connection.execute(
            "INSERT INTO report_runs (reporter, run_key, state, data) "
            "VALUES ('tower', 'run-1', 'begun', '{}')"
        )
    status = run_cli("status")
    assert status.exit_code == 1 and "at schema 0010; this release needs 0014" in status.stdout
    migrated = run_cli("storage", "migrate")
    assert migrated.exit_code == 0, migrated.output
    assert "from 0010 to 0014" in migrated.stdout
    assert "Migrated the tables of plugin 'core.tower' from absent to 0001" in migrated.stdout
    assert run_cli("status").exit_code == 0
    info = run_cli("storage", "info", "--raw").stdout
    assert "schema of core.tower\t0001 (needs 0001)" in info
    shown = run_cli("tower", "status")
    assert shown.exit_code == 0, shown.output
    assert "pending:   5" in shown.stdout and "sent:      2" in shown.stdout
    assert "1 begun" in shown.stdout


def test_profiles_can_be_listed_switched_and_deleted(run_cli, veglia_home):
    assert run_cli("presto", "--no-broker").exit_code == 0
    assert run_cli("presto", "--no-broker", "--profile-name", "second").exit_code == 0
    listing = run_cli("profile", "list", "--raw").stdout.splitlines()
    assert [line.split("\t")[:2] for line in listing] == [["*", "presto"], ["", "second"]]
    assert run_cli("profile", "set-default", "second").exit_code == 0
    assert run_cli("profile", "show", "--raw").stdout.splitlines()[0] == "name\tsecond"
    assert run_cli("profile", "delete", "presto", "--force").exit_code == 0
    assert not (veglia_home / "profiles" / "presto").exists()
    assert run_cli("-p", "presto", "status").exit_code == 3


@pytest.mark.parametrize("group", ["transports", "schedulers", "monitors"])
def test_plugin_list_shows_builtins(run_cli, group):
    result = run_cli("plugin", "list", group, "--raw")
    assert result.exit_code == 0
    names = [line.split("\t")[1] for line in result.stdout.splitlines()]
    expected = {
        "transports": {"core.local", "core.ssh"},
        "schedulers": {"core.direct"},
        "monitors": {"core.always_kill"},
    }[group]
    assert expected <= set(names)


def test_plugin_list_covers_every_group(run_cli):
    result = run_cli("plugin", "list")
    for group in (
        "calculations",
        "parsers",
        "schedulers",
        "transports",
        "monitors",
        "data",
        "plugins",
    ):
        assert group in result.stdout


def test_plugin_show_prints_docstring_and_signature(run_cli):
    result = run_cli("plugin", "show", "monitors", "core.always_kill")
    assert result.exit_code == 0
    assert "Kill the job at the first scheduler poll" in result.stdout
    assert "core.always_kill(node: Any, transport: Any, message: str" in result.stdout
    shown = run_cli("plugin", "show", "monitors", "core.stalled_output").stdout
    assert "\npath: file to watch, relative to the work directory.\n" in shown
    assert "when path has not grown for seconds (a hung program)" in shown
    assert ":param" not in shown and "``" not in shown
    missing = run_cli("plugin", "show", "monitors", "core.nope")
    assert missing.exit_code == 5 and "Installed: core.always_kill" in missing.stderr


@pytest.mark.parametrize(("command", "code"), [("exit 3", 3), ("true", 0), ("exit 42", 42)])
def test_shell_propagate_exit_hands_on_the_commands_status(run_cli, command, code):
    assert run_cli("presto", "--no-broker").exit_code == 0
    result = run_cli("shell", "--propagate-exit", command)
    assert result.exit_code == code, result.output
    # Without the flag, any failure is 1.
    assert run_cli("shell", command).exit_code == (0 if code == 0 else 1)


def test_shell_propagate_exit_needs_to_wait(run_cli):
    assert run_cli("presto", "--no-broker").exit_code == 0
    result = run_cli("shell", "--submit", "--propagate-exit", "true")
    assert result.exit_code == 2 and "--submit does not wait" in result.stderr


#: Commands that take the PK of a process (or of a calc job, for `calcjob`).
PROCESS_PK_COMMANDS = [
    ("process", "show"),
    ("process", "report"),
    ("process", "watch"),
    ("process", "status"),
    ("process", "dump"),
    ("process", "kill"),
    ("process", "pause"),
    ("process", "play"),
    ("process", "unblock"),
    ("calcjob", "res"),
    ("calcjob", "inputls"),
    ("calcjob", "outputls"),
    ("calcjob", "inputcat"),
    ("calcjob", "outputcat"),
    ("calcjob", "gotocomputer"),
    ("calcjob", "cleanworkdir"),
]
#: Commands that take the PK of any node.
NODE_PK_COMMANDS = [
    ("node", "show"),
    ("node", "graph"),
    ("node", "delete", "--force"),
    ("node", "repo", "ls"),
    ("verify",),
    ("group", "add", "campaign"),
]


@pytest.mark.parametrize("command", PROCESS_PK_COMMANDS + NODE_PK_COMMANDS, ids=" ".join)
def test_a_missing_node_exits_4(run_cli, profile, command):
    from veglia import orm

    orm.Group(label="campaign").store()
    result = run_cli("-p", "test", *command, "999999")
    assert result.exit_code == 4, result.output
    assert "999999" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", PROCESS_PK_COMMANDS, ids=" ".join)
def test_a_node_of_the_wrong_kind_exits_4_saying_what_it_is(run_cli, profile, command):
    from veglia import orm

    pk = orm.Str("not a process").store().pk
    result = run_cli("-p", "test", *command, str(pk))
    assert result.exit_code == 4, result.output
    kind = "a calc job" if command[0] == "calcjob" else "a process"
    assert f"Node {pk} is a Str, not {kind}." in result.stderr
    assert f"veglia node show {pk}" in result.stderr


def test_a_type_name_gets_the_article_it_is_spoken_with(run_cli, profile):
    from veglia import orm

    pk = orm.Int(3).store().pk
    result = run_cli("-p", "test", "process", "show", str(pk))
    assert f"Node {pk} is an Int, not a process." in result.stderr
    with pytest.raises(TypeError, match="Int needs an int, not 'three'"):
        orm.Int("three")


def test_an_invalid_number_for_a_computer_names_its_flag(run_cli, profile):
    setup = ("computer", "setup", "-n", "-L", "x", "-H", "localhost", "-T", "core.local")
    refused = run_cli("-p", "test", *setup, "-S", "core.direct", "--safe-interval", "abc")
    assert refused.exit_code == 3, refused.output
    assert "--safe-interval: 'abc' is not a number >= 0." in refused.stderr
    changed = run_cli("-p", "test", "computer", "set", "localhost", "--minimum-poll-interval", "-1")
    assert changed.exit_code == 3, changed.output
    assert "--minimum-poll-interval: '-1' is not a number >= 0." in changed.stderr


def test_three_characters_are_no_uuid_prefix(run_cli, profile):
    from veglia import orm

    node = orm.Int(1).store()
    while node.uuid[:3].isdigit():  # digits are read as a pk first: take one with a letter
        node = orm.Int(1).store()
    short = run_cli("-p", "test", "node", "show", node.uuid[:3])
    assert short.exit_code == 4, short.output
    assert "a UUID prefix is 4 or more of its first hex digits" in short.stderr
    found = run_cli("-p", "test", "node", "show", node.uuid[:4].upper())
    assert found.exit_code == 0 and node.uuid in found.stdout, found.output


@pytest.mark.parametrize(
    "args",
    [
        ("process", "show"),  # a missing argument
        ("process", "list", "--limit", "abc"),  # not a number
        ("process", "list", "--limit", "0"),  # out of range
        ("process", "list", "--no-such-option"),
        ("no-such-command",),
    ],
    ids=" ".join,
)
def test_wrong_usage_exits_2(run_cli, profile, args):
    result = run_cli("-p", "test", *args)
    assert result.exit_code == 2, result.output
    # One line, as every error, pointing at the help of the command that refused it.
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and line.endswith(" --help`."), line


def test_process_kill_takes_a_uuid_prefix_as_process_show_does(run_cli, profile):
    from veglia import orm
    from veglia_fixtures.profiles import stored_process

    node = stored_process(orm.CalcJobNode, "finished", "done", 0)
    while node.uuid[:4].isdigit():  # digits are read as a pk first: take one with a letter
        node = stored_process(orm.CalcJobNode, "finished", "done", 0)
    result = run_cli("-p", "test", "process", "kill", node.uuid[:6])
    assert f"Process {node.pk} has terminated already (finished)." in result.output


def test_the_exit_codes_in_the_docs_are_the_cli_s():
    text = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {
        int(line.split("|")[1].strip().strip("`"))
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert documented == {int(code) for code in CliExit}
