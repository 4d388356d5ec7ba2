"""Inspecting processes, calc jobs, nodes, computers and codes from the command line, as a user
does: real jobs run on localhost with the direct scheduler, then `veglia` looks at them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import veglia
from veglia_fixtures.profiles import VEGLIA

JOB_SCRIPT = """
import sys
import veglia
from veglia import engine, orm
from veglia.entry_points import CalculationFactory

veglia.load_profile()
builder = CalculationFactory("core.shell").get_builder()
builder.command = orm.Str(sys.argv[1])
builder.metadata.computer = sys.argv[2]
builder.metadata.label = "watched"
engine.run_get_node(builder)
"""


def ok(result):
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def local(veglia_home):
    """A default profile made as `veglia presto --no-broker` does, with fast polling, and
    loaded in this process too (where the jobs run)."""
    from veglia.config import Config
    from veglia.engine.runner import set_runner
    from veglia.profile_setup import create_profile

    create_profile(Config(), "presto", {"engine.poll_interval": 0.1})
    veglia.load_profile()
    set_runner(None)
    yield
    set_runner(None)


def shell_job(command: str, outputs: tuple[str, ...] = (), **metadata):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str(command)
    if outputs:
        builder.outputs = orm.List(list(outputs))
    for key, value in metadata.items():
        setattr(builder.metadata, key, value)
    return engine.run_get_node(builder)[1]


@pytest.fixture
def jobs(local):
    """A job that succeeds (stdout 'hello', file result.txt) and one that exits 3."""
    good = shell_job("echo hello; echo oops >&2; echo 42 > result.txt", ("result.txt",))
    bad = shell_job("exit 3", label="failing")
    assert good.exit_status == 0 and bad.exit_status == 400
    return good, bad


def _raw_rows(result) -> list[list[str]]:
    return [line.split("\t") for line in ok(result).stdout.splitlines()]


# -- process ---------------------------------------------------------------------------------------
def test_process_list_filters_and_columns(run_cli, jobs):
    good, bad = jobs
    assert ok(run_cli("process", "list", "--raw")).stdout == ""  # both terminated: not active
    assert str(good.pk) not in ok(run_cli("process", "list")).stdout.split()

    table = ok(run_cli("process", "list", "-a")).stdout
    assert table.splitlines()[0].split() == [
        "PK", "Created", "Label", "Process", "type", "State", "Status", "Exit",
    ]  # fmt: skip
    assert "✔ Finished [0]" in table and "⨯ Finished [400]" in table and "s ago" in table

    rows = _raw_rows(run_cli("process", "list", "-a", "--raw"))
    assert [row[0] for row in rows] == [str(good.pk), str(bad.pk)]
    assert all(len(row) == 7 for row in rows)
    assert rows[1][2:] == ["failing", "core.shell", "⨯ Finished [400]", "", "400"]

    finished = ["-S", "finished", "--raw", "-P", "pk,state", "-P", "exit_status,job_id"]
    assert _raw_rows(run_cli("process", "list", *finished)) == [
        [str(good.pk), "✔ Finished [0]", "0", good.job_id],
        [str(bad.pk), "⨯ Finished [400]", "400", bad.job_id],
    ]
    assert ok(run_cli("process", "list", "-S", "excepted", "-S", "killed", "--raw")).stdout == ""
    assert _raw_rows(run_cli("process", "list", "-f", "--raw", "-P", "pk")) == [[str(bad.pk)]]
    assert _raw_rows(run_cli("process", "list", "-a", "-l", "1", "--raw", "-P", "pk")) == [
        [str(bad.pk)]
    ]
    assert len(_raw_rows(run_cli("process", "list", "-a", "-p", "1", "--raw"))) == 2

    wrong = run_cli("process", "list", "-P", "pk,gpus")
    assert wrong.exit_code == 2 and "'-P' / '--project': unknown column gpus" in wrong.stderr
    assert "exit_status" in wrong.stderr


def test_process_list_shows_active_processes_and_call_tree(run_cli, local):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory
    from veglia.orm import CalcJobNode, WorkflowNode

    parent = WorkflowNode(process_type="demo.workflow", label="parent")
    parent.process_state = "waiting"
    parent.store()
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("true")
    submitted = engine.submit(builder)  # no daemon runs it: it stays created
    child = CalcJobNode(process_type="core.shell", label="child")
    child.process_state = "waiting"
    child.store()
    child.add_incoming(parent, "call", "CALL_CALC")
    child.set_attributes({"paused": True, "paused_reason": "upload failed on every attempt"})

    lines = ok(run_cli("process", "list")).stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [str(parent.pk), str(child.pk), str(submitted.pk)]
    assert "⏵ Waiting" in lines[0]
    assert "└─ core.shell" in lines[1] and "⏸ Paused" in lines[1]
    assert "upload failed on every attempt" in lines[1]
    assert "⏹ Created" in lines[2]
    raw = ok(run_cli("process", "list", "--raw", "-P", "pk,process_type")).stdout
    assert f"{child.pk}\tcore.shell\n" in raw and "└─" not in raw

    shown = ok(run_cli("process", "show", str(parent.pk))).stdout
    assert re.search(rf"core\.shell\s+{child.pk}\s+⏸ Paused", shown)


def test_process_show_and_report(run_cli, jobs):
    good, bad = jobs
    shown = ok(run_cli("process", "show", str(good.pk), str(bad.pk))).stdout
    assert re.search(rf"scheduler job id\s+{good.job_id}\b", shown)
    assert re.search(rf"work dir\s+{re.escape(good.remote_workdir)}", shown)
    assert re.search(r"computer\s+localhost", shown)
    inputs = {label: node.pk for label, node in good.inputs.items()}
    outputs = {label: node.pk for label, node in good.outputs.items()}
    for label, pk in {**inputs, **outputs}.items():
        assert re.search(rf"{label}\s+{pk}\s+\w+", shown), label
    assert re.search(r"command\s+\d+\s+Str", shown)
    assert "submitted job" in shown  # the last log lines
    assert "The command exited with status 3." in shown

    report = ok(run_cli("process", "report", str(good.pk))).stdout
    assert f"[{good.pk} | REPORT]: submitted job {good.job_id}" in report
    assert "uploaded to localhost:" in report and "retrieved" in report
    only_errors = ok(run_cli("process", "report", str(good.pk), "-l", "ERROR")).stdout
    assert "No log messages" in only_errors


def test_process_watch_follows_a_running_job_to_its_end(run_cli, local, veglia_home):
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.storage import models

    setup = ("computer", "setup", "-n", "-L", "fast", "-H", "localhost", "-T", "core.local")
    ok(run_cli(*setup, "-S", "core.direct", "--minimum-poll-interval", "0.1"))
    ok(run_cli("computer", "configure", "fast", "-n"))
    env = {**os.environ, "VEGLIA_HOME": str(veglia_home)}
    job = subprocess.Popen(
        [sys.executable, "-c", JOB_SCRIPT, "sleep 4; echo done", "fast"], env=env
    )
    try:
        pk = None
        deadline = time.monotonic() + 60  # a loaded machine starts Python slowly
        while time.monotonic() < deadline:
            with get_storage().session() as session:
                pk = session.scalar(sa.select(models.Node.id).where(models.Node.label == "watched"))
            if pk:
                break
            time.sleep(0.05)
        assert pk, "the job did not start"
        watched = ok(run_cli("process", "watch", str(pk), "--timeout", "60")).stdout
    finally:
        assert job.wait(timeout=60) == 0
    assert "⏵ Waiting" in watched
    assert "REPORT: submitted job" in watched and "REPORT: retrieved" in watched
    assert watched.rstrip().splitlines()[-1].endswith("✔ Finished [0]")


def test_process_watch_times_out_and_stops_on_ctrl_c(run_cli, local, veglia_home):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("true")
    node = engine.submit(builder)  # no daemon: it stays created
    timed_out = run_cli("process", "watch", str(node.pk), "--timeout", "0.6")
    assert timed_out.exit_code == 124, timed_out.output
    assert "⏹ Created" in timed_out.stdout
    assert "is still created after 0.6 s" in timed_out.stderr

    watch = subprocess.Popen(
        [VEGLIA, "process", "watch", str(node.pk)],
        env={**os.environ, "VEGLIA_HOME": str(veglia_home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert watch.stdout is not None
    assert "Created" in watch.stdout.readline()
    watch.send_signal(signal.SIGINT)
    stdout, stderr = watch.communicate(timeout=30)
    assert watch.returncode == 130
    assert "Stopped watching" in stdout and "Traceback" not in stderr


# -- calcjob ---------------------------------------------------------------------------------------
def test_calcjob_files_results_and_workdir(run_cli, jobs, local):
    good, _ = jobs
    pk = str(good.pk)
    assert ok(run_cli("calcjob", "outputcat", pk)).stdout == "hello\n"
    assert ok(run_cli("calcjob", "outputcat", pk, "stderr")).stdout == "oops\n"
    assert ok(run_cli("calcjob", "outputcat", pk, "result.txt")).stdout == "42\n"
    missing = run_cli("calcjob", "outputcat", pk, "nope.txt")
    assert missing.exit_code == 4 and "result.txt" in missing.stderr

    script = ok(run_cli("calcjob", "inputcat", pk, "_veglia_submit.sh")).stdout
    assert script.startswith("#!/bin/bash") and "echo hello; echo oops" in script
    assert ok(run_cli("calcjob", "inputcat", pk)).stdout == script
    assert ok(run_cli("calcjob", "inputls", pk)).stdout.split() == [
        "_veglia_submit.sh",
        "_veglia_trace.sh",
    ]
    listed = ok(run_cli("calcjob", "outputls", pk)).stdout.split()
    assert {"stdout", "stderr", "result.txt", "_scheduler-stdout.txt"} <= set(listed)
    long = ok(run_cli("calcjob", "outputls", "-l", pk)).stdout
    assert re.search(r"^\s+6\s+stdout$", long, re.MULTILINE)

    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    _, add = engine.run_get_node(
        CalculationFactory("core.arithmetic.add"), x=orm.Int(2), y=orm.Int(3)
    )
    assert json.loads(ok(run_cli("calcjob", "res", str(add.pk))).stdout) == {"sum": 5}
    assert ok(run_cli("calcjob", "inputcat", str(add.pk), "aiida.in")).stdout == "echo $((2 + 3))\n"
    assert json.loads(ok(run_cli("calcjob", "res", pk)).stdout) == {}

    command = ok(run_cli("calcjob", "gotocomputer", pk, "--print")).stdout.strip()
    assert command == f'cd {good.remote_workdir} && exec "${{SHELL:-bash}}" -l'
    shell = ok(run_cli("calcjob", "gotocomputer", pk, input="pwd\n", env={"SHELL": "bash"}))
    assert shell.stdout.splitlines()[-1] == good.remote_workdir


def test_unknown_or_wrong_pk_is_a_one_line_error_with_exit_code_4(run_cli, jobs):
    good, _ = jobs
    data_pk = str(good.inputs["command"].pk)
    for command in (
        ("process", "show", "9999"),
        ("process", "watch", "9999"),
        ("process", "show", data_pk),
        ("calcjob", "outputcat", "9999"),
        ("calcjob", "inputcat", data_pk),
        ("node", "graph", "9999"),
    ):
        result = run_cli(*command)
        assert result.exit_code == 4, (command, result.output)
        assert len(result.stderr.strip().splitlines()) == 1, (command, result.stderr)
        assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr
    assert "not a process" in run_cli("process", "show", data_pk).stderr


# -- node ------------------------------------------------------------------------------------------
def test_node_show(run_cli, jobs):
    good, _ = jobs
    shown = ok(run_cli("node", "show", str(good.pk))).stdout
    assert "CalcJobNode (process.calcjob)" in shown and good.uuid in shown
    assert f'"job_id": "{good.job_id}"' in shown and "_veglia_submit.sh" in shown
    assert re.search(r"command\s+input\s+\d+\s+Str", shown)
    assert re.search(r"retrieved\s+create\s+\d+\s+FolderData", shown)

    command = good.inputs["command"]
    # A prefix of digits only would be read as a pk: take one with a letter (or the dash).
    prefix = next(command.uuid[:n] for n in range(8, 37) if not command.uuid[:n].isdigit())
    data = ok(run_cli("node", "show", prefix)).stdout
    assert "Str (data.str)" in data and '"value": "echo hello;' in data
    assert re.search(rf"command\s+input\s+{good.pk}\s+CalcJobNode", data)


def _parse_dot(text: str) -> tuple[set[int], list[tuple[int, int, str]]]:
    """Declared nodes and edges of the dot text; fails on any line that is neither."""
    lines = text.strip().splitlines()
    assert re.fullmatch(r"digraph \w+ \{", lines[0]) and lines[-1] == "}"
    nodes, edges = set(), []
    string = r'"(?:[^"\\]|\\.)*"'
    attrs = rf"\[(?:\w+=(?:{string}|[\w.#]+)(?:, )?)+\];"
    for line in lines[1:-1]:
        if match := re.fullmatch(rf"\s*N(\d+) -> N(\d+) {attrs}", line):
            label = re.search(rf"label=({string})", line).group(1)
            edges.append((int(match.group(1)), int(match.group(2)), label))
        elif match := re.fullmatch(rf"\s*N(\d+) {attrs}", line):
            nodes.add(int(match.group(1)))
        else:
            assert re.fullmatch(r"\s*(rankdir=\w+|node \[.*\]);", line), line
    return nodes, edges


def test_node_graph_is_valid_dot_of_the_neighbourhood(run_cli, jobs, tmp_path):
    good, bad = jobs
    nodes, edges = _parse_dot(ok(run_cli("node", "graph", str(good.pk))).stdout)
    assert all(source in nodes and target in nodes for source, target, _ in edges)
    inputs = {node.pk for _, node in good.inputs.items()}
    outputs = {node.pk for _, node in good.outputs.items()}
    assert nodes == {good.pk} | inputs | outputs and bad.pk not in nodes
    assert (good.inputs["command"].pk, good.pk, '"command\\ninput"') in edges
    assert (good.pk, good.outputs["stdout"].pk, '"stdout\\ncreate"') in edges

    target = tmp_path / "graph.dot"
    command = str(good.inputs["command"].pk)
    ok(run_cli("node", "graph", command, "--depth", "2", "-o", str(target)))
    far_nodes, far_edges = _parse_dot(target.read_text())
    assert outputs <= far_nodes and len(far_edges) == len(edges)
    assert _parse_dot(ok(run_cli("node", "graph", command, "-d", "0")).stdout) == (
        {int(command)},
        [],
    )


# -- computer --------------------------------------------------------------------------------------
def test_computer_setup_configure_test_and_run_a_job(run_cli, local, tmp_path):
    from veglia.orm import load_computer

    workdir = tmp_path / "second-work"
    base = ("computer", "setup", "-n", "-L", "second", "-H", "localhost", "-S", "core.direct")
    wrong = run_cli(*base, "-T", "core.telnet")
    assert wrong.exit_code == 3
    assert "'core.telnet' is not an installed transport" in wrong.stderr
    assert "core.local, core.ssh" in wrong.stderr
    missing = run_cli("computer", "setup", "-n", "-L", "second", "-T", "core.local")
    assert missing.exit_code == 3 and "--hostname is required" in missing.stderr
    assert "second" not in ok(run_cli("computer", "list")).stdout

    flags = ("-T", "core.local", "-w", str(workdir), "--minimum-poll-interval", "0.1")
    # core.local takes no connection options: configured at once.
    assert (
        "Next: `veglia computer test second`" in ok(run_cli(*base, *flags, "--fusion", "no")).stdout
    )
    again = run_cli(*base, *flags)
    assert again.exit_code == 3 and "exists already" in again.stderr
    listed = _raw_rows(run_cli("computer", "list", "--raw"))
    assert listed[-1][1:] == ["second", "localhost", "core.local", "core.direct", "yes"]

    ok(run_cli("computer", "configure", "second", "-n"))
    refused = run_cli("computer", "configure", "second", "-n", "--port", "22")
    assert refused.exit_code == 3 and "core.local does not take --port" in refused.stderr
    tested = ok(run_cli("computer", "test", "second")).stdout
    for check in ("connect", "whoami", "work dir", "scheduler"):
        assert f"✔ {check}:" in tested
    assert str(workdir) in tested and "✘" not in tested
    shown = ok(run_cli("computer", "show", "second")).stdout
    assert re.search(rf"workdir\s+{workdir}\s", shown)
    assert re.search(r"safe_interval\s+1.0 \(default\)", shown)
    assert load_computer("second").get_property("minimum_poll_interval") == 0.1

    node = shell_job("pwd", computer="second")
    assert node.is_finished_ok and node.remote_workdir.startswith(str(workdir))


def test_computer_setup_asks_again_after_invalid_answers(run_cli, local, tmp_path):
    answers = [
        "asked",  # label
        "localhost",  # hostname
        "A computer made through prompts",  # description
        "ssh",  # transport: not installed
        "core.local",
        "core.direct",  # scheduler
        "relative/dir",  # workdir: not absolute
        str(tmp_path / "asked"),
        "",  # safe_interval
        "-1",  # minimum_poll_interval: negative
        "2",
        "",  # mpirun_command
        "",  # mpiprocs per machine
        "module load x",  # prepend_text
        "",  # append_text
        "short:time=1h; long",  # queues
        "",  # move_jobs
        "",  # trace (the plugins' properties are asked after the built-in ones)
        "0",  # trace_interval: not more than 0
        "30",
        "",  # measure_usage
        "",  # guards
        "",  # guard_interval
        "",  # guard_away_after
        "",  # guard_grace
        "",  # guard_heartbeat
        "perhaps",  # fusion
        "yes",
    ]
    result = ok(run_cli("computer", "setup", input="\n".join(answers) + "\n"))
    assert "'ssh' is not an installed transport" in result.stderr
    assert "must be an absolute path" in result.stderr and "is not yes or no" in result.stderr
    assert result.stdout.count("Please answer again") == 5
    assert "'0' is not a number of seconds more than 0" in result.stderr
    shown = ok(run_cli("computer", "show", "asked")).stdout
    assert re.search(r"minimum_poll_interval\s+2.0 ", shown)
    assert re.search(r"prepend_text\s+module load x", shown) and re.search(r"fusion\s+yes", shown)
    assert re.search(r"queues\s+short:time=3600s; long", shown)
    assert re.search(r"trace_interval\s+30 ", shown)


def test_ssh_computer_configure_and_test(run_cli, local, services_env, ssh_params):
    host = services_env["SSH_HOST"]
    setup = ("computer", "setup", "-n", "-L", "remote", "-H", host, "-T", "core.ssh")
    ok(run_cli(*setup, "-S", "core.direct"))
    untested = run_cli("computer", "test", "remote")
    assert untested.exit_code == 3 and "veglia computer configure remote" in untested.stderr

    flags = [
        f"--username={ssh_params['username']}",
        f"--port={ssh_params['port']}",
        f"--key-filename={ssh_params['key_filename']}",
        f"--known-hosts={ssh_params['known_hosts']}",
        "--no-look-for-keys",
        "--no-allow-agent",
        "--timeout=10",
    ]
    bad = run_cli("computer", "configure", "remote", "-n", *flags, "--keepalive-interval", "x")
    assert bad.exit_code == 3 and "--keepalive-interval: 'x' is not a whole number" in bad.stderr
    ok(run_cli("computer", "configure", "remote", "-n", *flags))
    tested = ok(run_cli("computer", "test", "remote")).stdout
    assert f"✔ connect:   core.ssh to {host}" in tested
    assert f"✔ whoami:    commands run as {ssh_params['username']}" in tested
    assert "✔ work dir:" in tested and "✔ scheduler: `ps " in tested
    shown = ok(run_cli("computer", "show", "remote")).stdout
    assert re.search(rf"port\s+{ssh_params['port']} ", shown)
    assert re.search(r"look_for_keys\s+no ", shown)

    # Interactive: keep every answer but the port, which is wrong, then closed.
    answers = ["", "not-a-port", "1", *[""] * 20]
    ok(run_cli("computer", "configure", "remote", input="\n".join(answers)))
    failed = run_cli("computer", "test", "remote")
    assert failed.exit_code == 1 and "✘ connect:" in failed.stdout and "hint:" in failed.stdout
    assert "whoami" not in failed.stdout


# -- code ------------------------------------------------------------------------------------------
def test_code_create_list_show_and_run(run_cli, local):
    from veglia import engine, orm

    create = ("code", "create", "--label", "echo", "--computer", "localhost")
    created = ok(run_cli(*create, "--executable", "/bin/echo", "-P", "core.shell", "-D", "Echo"))
    assert "echo@localhost" in created.stdout
    duplicate = run_cli(*create, "--executable", "/bin/echo")
    assert duplicate.exit_code == 3 and "exists already" in duplicate.stderr
    relative = run_cli("code", "create", "--label", "e", "--computer", "localhost", "-X", "echo")
    assert relative.exit_code == 3 and "absolute path" in relative.stderr
    plugin = run_cli(*create[:3], "x", *create[4:], "-X", "/bin/echo", "-P", "core.nope")
    assert plugin.exit_code == 3 and "core.shell" in plugin.stderr
    nowhere = run_cli("code", "create", "--label", "e", "--computer", "mars", "-X", "/bin/echo")
    assert nowhere.exit_code == 4 and "veglia computer setup" in nowhere.stderr

    shown = ok(run_cli("code", "show", "echo@localhost")).stdout
    assert re.search(r"executable\s+/bin/echo", shown) and re.search(r"computer\s+localhost", shown)
    assert re.search(r"default plugin\s+core\.shell", shown)
    listed = _raw_rows(run_cli("code", "list", "--raw"))
    assert [row[1:] for row in listed] == [["echo@localhost", "/bin/echo", "core.shell", "Echo"]]
    unknown = run_cli("code", "show", "cat@localhost")
    assert unknown.exit_code == 4 and "echo@localhost" in unknown.stderr

    builder = orm.load_code("echo@localhost").get_builder()
    builder.arguments = orm.List(["from", "a", "code"])
    _, node = engine.run_get_node(builder)
    assert ok(run_cli("calcjob", "outputcat", str(node.pk))).stdout == "from a code\n"
    assert re.search(r"code\s+echo@localhost", ok(run_cli("process", "show", str(node.pk))).stdout)


def test_commands_need_a_profile(run_cli):
    result = run_cli("process", "list")
    assert result.exit_code == 3 and "veglia presto" in result.stderr


def test_a_workflow_without_history_has_no_estimate_not_overdue(run_cli, local):
    from veglia.orm import CalcJobNode, WorkflowNode
    from veglia.orm.attributes import SIMILARITY_KEY

    def process(node_class, process_type, state, key=None):
        node = node_class(process_type=process_type)
        node.process_state = state
        node.store()
        if key:
            node.set_attribute(SIMILARITY_KEY, key)
        if state == "finished":
            node.set_exit(0, None)
        return node

    # Quick steps like the one the new workflow runs finished before; no run of it did.
    for _ in range(3):
        process(CalcJobNode, "core.shell", "finished", key="echo-like")
    workflow = process(WorkflowNode, "demo.new", "waiting")
    shown = ok(run_cli("process", "show", str(workflow.pk))).stdout
    assert re.search(r"time left\s+no estimate yet \(nothing similar has finished\)", shown)

    step = process(CalcJobNode, "core.shell", "waiting", key="echo-like")
    step.add_incoming(workflow, "call", "CALL_CALC")
    # The step has run longer than the quick ones: that says nothing of the time left.
    shown = ok(run_cli("process", "show", str(workflow.pk))).stdout
    assert "overdue" not in shown
    assert re.search(
        rf"no estimate yet \(process {step.pk} has run longer than similar finished steps\)",
        shown,
    )

    # With finished runs of its own, running longer than they took is overdue.
    process(WorkflowNode, "demo.new", "finished")
    shown = ok(run_cli("process", "show", str(workflow.pk))).stdout
    assert re.search(r"estimated time left\s+overdue \(1 similar finished runs\)", shown)


def test_a_long_table_looks_as_a_short_one(monkeypatch):
    """Past PLAIN_ROWS rows (every table without a title, now) veglia lays the table out
    itself, for speed: the same text rich prints, wide characters and empty cells included;
    piped, a table wider than the console is not folded either way (tests/test_cli_width.py
    has the terminal's)."""
    import io

    from rich.console import Console

    from veglia.cli import output

    headers = ["PK", "Label", "State", "Status", "Exit"]
    rows = [
        (pk, f"job-{pk}" if pk % 3 else "", "✔ Finished [0]" if pk % 2 else "⏸ Paused", None, 1)
        for pk in range(output.PLAIN_ROWS + 50)
    ]

    def printed(plain_rows: int, width: int = 240) -> str:
        monkeypatch.setattr(output, "PLAIN_ROWS", plain_rows)
        monkeypatch.setattr(output, "console", Console(file=io.StringIO(), width=width))
        output.print_table(headers, rows)
        return output.console.file.getvalue()

    by_rich = printed(len(rows) + 1)
    assert printed(10) == by_rich
    assert by_rich.splitlines()[1].startswith("0    ")  # the check has teeth: a table it is
    assert printed(10, width=30) == printed(len(rows) + 1, width=30) == by_rich  # not folded
