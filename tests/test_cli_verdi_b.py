"""Commands verdi users reach for (issue #36, section 1, part B): ``daemon incr / decr``,
``archive inspect``, ``run`` and ``python``, and ``calcjob gotocomputer`` opening its session."""

from __future__ import annotations

import json
import os
import time

import pytest

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia.exceptions import CliExit
from veglia_fixtures.profiles import make_profile, pid_alive, wait_for

ShellJob = CalculationFactory("core.shell")


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def one_line_error(result, code: int) -> str:
    """The one line a refused command prints, and its exit code."""
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


# -- daemon incr / decr ------------------------------------------------------------------------
def _worker_pids(run_cli) -> list[int]:
    raw = ok(run_cli("-p", "test", "daemon", "status", "--raw")).stdout
    return [int(line.split("\t")[0]) for line in raw.splitlines()]


@pytest.mark.services
def test_daemon_incr_and_decr_change_the_workers_of_a_running_daemon(
    veglia_home, rabbitmq_url, daemon, run_cli
):
    make_profile(**{"broker.url": rabbitmq_url, "daemon.lease_timeout": "5"})
    daemon(1)
    (first,) = _worker_pids(run_cli)

    added = ok(run_cli("-p", "test", "daemon", "incr", "2"))
    assert "Daemon of 'test' now has 3 workers (added 2)." in added.stdout
    pids = _worker_pids(run_cli)
    assert len(pids) == 3 and pids[0] == first and all(pid_alive(str(p)) for p in pids)
    status = ok(run_cli("-p", "test", "daemon", "status")).stdout
    assert "3 workers" in status.splitlines()[0]
    assert "now has 4 workers (added 1)" in ok(run_cli("-p", "test", "daemon", "incr")).stdout

    # Jobs running in the workers that go are taken up by those that stay, and finish.
    nodes = [engine.submit(ShellJob, command=orm.Str(f"sleep 3; echo {i}")) for i in range(8)]
    wait_for(nodes, lambda n: n.job_id is not None, timeout=60)
    removed = ok(run_cli("-p", "test", "daemon", "decr", "2"))
    assert "now has 2 workers (removed 2)" in removed.stdout
    assert _worker_pids(run_cli) == pids[:2]
    gone = pids[2:]
    deadline = time.monotonic() + 40  # SIGTERM: they stop, not killed at 30 s
    while any(pid_alive(str(pid)) for pid in gone):
        assert time.monotonic() < deadline, "a removed worker did not stop"
        time.sleep(0.2)
    wait_for(nodes, lambda n: n.is_terminated, timeout=120)
    assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
    assert [n.outputs.stdout.get_content() for n in nodes] == [f"{i}\n".encode() for i in range(8)]
    assert len({n.job_id for n in nodes}) == 8  # none submitted twice

    # Never below one worker: the first, which keeps house, stays.
    clamped = ok(run_cli("-p", "test", "daemon", "decr", "5"))
    assert "now has 1 worker (removed 1: it keeps one)" in clamped.stdout
    assert _worker_pids(run_cli) == [first]
    line = one_line_error(run_cli("-p", "test", "daemon", "decr"), CliExit.DAEMON)
    assert "has 1 worker, the fewest it runs" in line and "veglia daemon stop" in line
    # A restart keeps the count the daemon has now.
    ok(run_cli("-p", "test", "daemon", "incr"))
    ok(run_cli("-p", "test", "daemon", "restart"))
    assert len(_worker_pids(run_cli)) == 2


def test_daemon_incr_and_decr_without_a_running_daemon_say_so(run_cli, profile):
    for command in ("incr", "decr"):
        line = one_line_error(run_cli("-p", "test", "daemon", command), CliExit.DAEMON)
        assert line == (
            "Error: The daemon of 'test' is not running; start it with `veglia daemon start N`."
        )
    usage = run_cli("-p", "test", "daemon", "incr", "0")
    assert usage.exit_code == CliExit.USAGE and "0 is not in the range 1<=x<=256" in usage.stderr


def test_daemon_without_a_broker_keeps_its_one_worker(run_cli, profile, daemon):
    daemon(1)
    line = one_line_error(run_cli("-p", "test", "daemon", "incr", "2"), CliExit.DAEMON)
    assert "runs without a broker, so with one worker; set broker.url" in line
    one_line_error(run_cli("-p", "test", "daemon", "decr"), CliExit.DAEMON)
    assert len(DaemonFiles(profile).read_status()["workers"]) == 1


def test_a_request_no_supervisor_takes_is_withdrawn(profile, monkeypatch):
    """A supervisor that does not answer (stopping, hung): the request does not stay behind
    to change a later daemon, and the error says nothing changed."""
    from veglia.engine.daemon.scaling import request_change
    from veglia.exceptions import DaemonError

    files = DaemonFiles(profile)
    files.folder.mkdir(parents=True, exist_ok=True)
    with pytest.raises(DaemonError, match="within 1 s; nothing was changed"):
        request_change(files, 2, timeout=1)
    assert not list(files.folder.glob("scale-*"))


# -- archive inspect ---------------------------------------------------------------------------
@pytest.fixture
def archive(profile, tmp_path, run_cli):
    """An archive of one shell job (with its inputs and outputs) and a group."""
    _, node = engine.run_get_node(ShellJob, command=orm.Str("echo hi"))
    assert node.is_finished_ok, node.exit_message
    orm.Group(label="campaign").store().add_nodes([node])
    path = tmp_path / "job.zip"
    ok(run_cli("-p", "test", "archive", "create", str(path), "-G", "campaign"))
    return path


def test_archive_inspect_prints_what_an_archive_holds_without_importing(archive, run_cli):
    shown = ok(run_cli("-p", "test", "archive", "inspect", str(archive))).stdout
    assert "format version" in shown and "1" in shown
    assert "created" in shown and time.strftime("%Y") in shown
    for row in ("CalcJobNode", "Str", "FolderData", "links", "groups", "computers"):
        assert row in shown, (row, shown)

    data = json.loads(
        ok(run_cli("-p", "test", "archive", "inspect", "--json", str(archive))).stdout
    )
    assert data["version"] == 1 and data["format"] == "veglia-archive"
    assert data["created"].startswith(time.strftime("%Y"))
    assert data["counts"]["groups"] == 1 and data["counts"]["computers"] == 1
    assert data["nodes"]["CalcJobNode"] == 1
    assert sum(data["nodes"].values()) == data["counts"]["nodes"]
    assert data["counts"]["links"] >= 3


def test_archive_inspect_needs_no_profile(archive, run_cli, veglia_home, tmp_path):
    elsewhere = {"VEGLIA_HOME": str(tmp_path / "empty-home")}
    shown = run_cli("archive", "inspect", "--json", str(archive), env=elsewhere)
    assert json.loads(ok(shown).stdout)["nodes"]["CalcJobNode"] == 1


def test_archive_inspect_of_a_bad_file_is_one_line(run_cli, tmp_path, archive):
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(os.urandom(200))
    line = one_line_error(run_cli("archive", "inspect", str(garbage)), CliExit.INVALID_INPUT)
    assert "is not a veglia archive, or is damaged" in line
    missing = one_line_error(run_cli("archive", "inspect", "nope.zip"), CliExit.INVALID_INPUT)
    assert "No archive file nope.zip" in missing
    cut = tmp_path / "cut.zip"
    cut.write_bytes(archive.read_bytes()[:-300])
    one_line_error(run_cli("archive", "inspect", str(cut)), CliExit.INVALID_INPUT)


# -- run and python ----------------------------------------------------------------------------
SCRIPT = """\
import sys
import helper  # beside the script, as with `python SCRIPT`
print("name", __name__)
print("argv", sys.argv)
print("profile", get_profile().name)
print("names", orm is veglia.orm, engine is veglia.engine, callable(run), callable(submit))
print("node", load_node(int(sys.argv[1])).value, Int.__name__, Group.__name__)
print("shell", CalculationFactory("core.shell").__name__, callable(WorkflowFactory))
if sys.argv[2] == "raise":
    helper.fail()
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture
def script(tmp_path):
    folder = tmp_path / "scripts"
    folder.mkdir()
    (folder / "helper.py").write_text("def fail():\n    raise ValueError('the script failed')\n")
    path = folder / "job.py"
    path.write_text(SCRIPT)
    return path


def test_run_runs_a_script_as_main_with_its_arguments_and_veglias_names(run_cli, profile, script):
    node = orm.Int(42).store()
    result = ok(run_cli("-p", "test", "run", str(script), str(node.pk), "0", "-p", "--x"))
    assert result.stdout.splitlines() == [
        "name __main__",
        f"argv ['{script}', '{node.pk}', '0', '-p', '--x']",
        "profile test",
        "names True True True True",
        "node 42 Int Group",
        "shell ShellJob True",
    ]
    assert run_cli("-p", "test", "run", str(script), str(node.pk), "3").exit_code == 3


def test_run_takes_the_profile_given_with_p(run_cli, profile, tmp_path):
    ok(run_cli("presto", "--profile-name", "other", "--no-broker"))
    node = orm.Int(7).store()  # in `test`; `other` has its own nodes
    script = tmp_path / "which.py"
    script.write_text("print(get_profile().name, orm.Int(8).store().pk)\n")
    other = ok(run_cli("-p", "other", "run", str(script))).stdout.split()
    mine = ok(run_cli("-p", "test", "run", str(script))).stdout.split()
    assert other[0] == "other" and mine == ["test", str(node.pk + 1)]


def test_run_shows_the_scripts_traceback_and_exits_1(run_cli, profile, script):
    node = orm.Int(1).store()
    result = run_cli("-p", "test", "run", str(script), str(node.pk), "raise")
    assert result.exit_code == 1, result.output
    assert "node 1 Int Group" in result.stdout  # what it printed before
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: the script failed"
    assert f'File "{script}", line 10, in <module>' in result.stderr
    assert "helper.py" in result.stderr and "veglia" not in result.stderr


def test_run_of_a_missing_or_broken_script(run_cli, profile, tmp_path):
    line = one_line_error(run_cli("-p", "test", "run", "nope.py"), CliExit.INVALID_INPUT)
    assert line == "Error: No script nope.py; check the name."
    one_line_error(run_cli("-p", "test", "run", str(tmp_path)), CliExit.INVALID_INPUT)
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\ndef (\n")
    result = run_cli("-p", "test", "run", str(broken))
    assert result.exit_code == 1 and result.stderr.strip().endswith("SyntaxError: invalid syntax")
    assert f'File "{broken}", line 2' in result.stderr and "veglia" not in result.stderr
    no_profile = run_cli("-p", "nosuch", "run", str(broken))
    assert no_profile.exit_code == CliExit.CONFIGURATION
    assert len(no_profile.stderr.strip().splitlines()) == 1


def test_python_opens_a_console_with_veglias_names(run_cli, profile):
    node = orm.Str("hello").store()
    lines = f"print(load_node({node.pk}).value, get_profile().name, Int(2).value)\n"
    for args in (("--plain",), ()):  # without IPython installed, Python's own console
        result = ok(run_cli("-p", "test", "python", *args, input=lines))
        assert "hello test 2" in result.stdout, result.output
    console = ok(run_cli("-p", "test", "python", "--plain", input="")).output
    assert "profile 'test'" in console and "load_node" in console and "submit" in console


def test_veglia_shell_without_a_command_points_a_verdi_user_to_python(run_cli, profile):
    result = run_cli("-p", "test", "shell")
    assert result.exit_code == CliExit.USAGE and result.stdout == ""
    assert result.stderr.strip() == (
        "Error: veglia writes this as: veglia python (an interactive Python with the profile "
        "loaded; `veglia shell COMMAND` runs COMMAND as a calc job)"
    )


# -- calcjob gotocomputer ----------------------------------------------------------------------
@pytest.fixture
def job(profile):
    _, node = engine.run_get_node(ShellJob, command=orm.Str("echo hi"))
    assert node.is_finished_ok, node.exit_message
    return node


def test_gotocomputer_print_prints_the_command_line(run_cli, job):
    printed = ok(run_cli("-p", "test", "calcjob", "gotocomputer", str(job.pk), "--print"))
    assert printed.stdout == f'cd {job.remote_workdir} && exec "${{SHELL:-bash}}" -l\n'


def test_gotocomputer_opens_your_shell_in_the_work_dir_of_a_local_job(run_cli, job, tmp_path):
    shell = tmp_path / "myshell"
    shell.write_text('#!/bin/sh\necho "in $PWD with $*"\n')
    shell.chmod(0o755)
    result = ok(
        run_cli("-p", "test", "calcjob", "gotocomputer", str(job.pk), env={"SHELL": str(shell)})
    )
    assert result.stdout.splitlines() == [
        f"Opening a shell in localhost:{job.remote_workdir}",
        f"in {job.remote_workdir} with -l",
    ]
    # An interactive shell reading what is typed; without input, it ends at once.
    typed = ok(
        run_cli(
            "-p",
            "test",
            "calcjob",
            "gotocomputer",
            str(job.pk),
            input="pwd\n",
            env={"SHELL": "bash"},
        )
    )
    assert typed.stdout.splitlines()[-1] == job.remote_workdir


# -- help --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        ("daemon", "incr"),
        ("daemon", "decr"),
        ("archive", "inspect"),
        ("run",),
        ("python",),
        ("calcjob", "gotocomputer"),
    ],
    ids=" ".join,
)
def test_every_new_command_has_help(run_cli, command):
    result = ok(run_cli(*command, "--help"))
    assert result.stdout.startswith(f"Usage: veglia {' '.join(command)} ")
    assert len(result.stdout.split("\n\n")[1].strip()) > 30
