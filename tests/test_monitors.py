"""Monitors watching running jobs: on localhost, on real SLURM, faulty ones, and restarts."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time

import pytest

from veglia import engine, orm
from veglia.engine import InputValidationError
from veglia.engine.process import load_process
from veglia.engine.runner import Runner, set_runner
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import pid_alive
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")
DIVERGE = "for i in 1 2 3; do echo step $i >> out.log; sleep 0.3; done; echo DIVERGED >> out.log; "


@pytest.fixture
def import_paths(monitor_import_paths):
    """Monitors by import path allowed, with tests/monitor_helpers importable."""


def test_file_pattern_kills_the_job_and_its_process(profile):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(DIVERGE + "sleep 600")
    builder.monitors = {
        "diverged": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.log", "pattern": "DIVERGED"},
        }
    }
    start = time.monotonic()
    _, node = engine.run_get_node(builder)
    assert time.monotonic() - start < 20
    assert node.exit_status == 150
    assert node.exit_message == (
        "Monitor diverged stopped the job: out.log matched 'DIVERGED': DIVERGED"
    )
    stop = node.get_attribute("stopped_by_monitor")
    assert stop["name"] == "diverged" and stop["time"] > 0
    assert not pid_alive(node.job_id)
    files = node.get_attribute("monitor_state")["diverged"]["files"]
    assert [offset for offset, _ in files.values()] == [len("step 1\nstep 2\nstep 3\nDIVERGED\n")]


def test_monitors_are_validated_before_anything_runs(profile):
    builder = ShellJob.get_builder()
    cases = [
        ({"m": {"entry_point": "core.nope"}}, "Installed: core.always_kill"),
        (
            {
                "m": {
                    "entry_point": "core.file_pattern",
                    "kwargs": {"path": "x", "pattern": "y", "colour": 1},
                }
            },
            "'m' (core.file_pattern) does not accept colour",
        ),
        (
            {"m": {"entry_point": "core.file_pattern", "kwargs": {"path": "x"}}},
            "'m' (core.file_pattern) needs pattern",
        ),
        (
            {"m": {"entry_point": "core.always_kill", "minimum_poll_interval": 0}},
            "'m': minimum_poll_interval must be a number of seconds > 0",
        ),
        ({"m": {"entry_point": "core.always_kill", "when": "now"}}, "unknown field"),
        ({"m": {"entry_point": "pkg.mod:check"}}, "allow those with"),
        (
            {"m": {"entry_point": "core.always_kill", "disable_on_start": "yes"}},
            "Monitor 'm': disable_on_start must be True or False, not 'yes'.",
        ),
        (
            {"m": {"entry_point": "core.always_kill", "guard": "no"}},
            "Monitor 'm': guard must be True or False, not 'no'.",
        ),
        (
            {"": {"entry_point": "core.always_kill"}},
            "Monitor '': a monitor's name must be non-empty, without spaces",
        ),
        (
            {"a b": {"entry_point": "core.always_kill"}},
            "Monitor 'a b': a monitor's name must be non-empty, without spaces",
        ),
        (
            [1],
            "Input 'monitors' must be dict (Monitors called at each scheduler poll: a dict of "
            'name -> {"entry_point": ..., "kwargs": {...}}), not list: [1].',
        ),
    ]
    for monitors, message in cases:
        with pytest.raises(InputValidationError, match=re.escape(message)) as caught:
            builder.monitors = monitors
        assert "\n" not in str(caught.value)
    from veglia.manage import get_storage
    from veglia.storage.models import Node

    with pytest.raises(ValueError, match="does not accept colour"):
        engine.submit(ShellJob, command=orm.Str("true"), monitors=cases[1][0])
    with get_storage().session() as session:
        assert session.query(Node).filter(Node.node_type == "process.calcjob").count() == 0


def test_a_regex_kwarg_that_does_not_compile_is_refused_when_the_builder_is_filled(
    import_paths,
):
    builder = ShellJob.get_builder()
    entry_point = "monitor_helpers:regex_pattern"
    for kwargs, name, why in (
        ({"pattern": "("}, "pattern", "missing ), unterminated subpattern at position 0"),
        ({"pattern": "x", "label": "[a"}, "label", "unterminated character set at position 0"),
    ):
        with pytest.raises(InputValidationError) as caught:
            builder.monitors = {"m": {"entry_point": entry_point, "kwargs": kwargs}}
        shown = str(caught.value)
        assert (
            f"Monitor 'm' ({entry_point}): kwarg {name!r} ({kwargs[name]!r}) is not a "
            f"regular expression: {why}." in shown
        ), shown
        assert "\n" not in shown.strip()
    builder.monitors = {"m": {"entry_point": entry_point, "kwargs": {"pattern": r"E = (\S+)"}}}
    with pytest.raises(
        InputValidationError, match=r"kwarg 'pattern' must be str \(regular expression\), not int"
    ):
        builder.monitors = {"m": {"entry_point": entry_point, "kwargs": {"pattern": 3}}}


def test_files_is_no_keyword_a_user_gives_even_without_watch_files(import_paths):
    builder = ShellJob.get_builder()
    entry_point = "monitor_helpers:declares_files"
    with pytest.raises(InputValidationError) as caught:
        builder.monitors = {"m": {"entry_point": entry_point, "kwargs": {"files": {"a": 1}}}}
    shown = str(caught.value)
    assert f"Monitor 'm' ({entry_point}) does not accept files; it takes: path." in shown
    builder.monitors = {"m": {"entry_point": entry_point}}


def test_the_built_in_monitors_refuse_a_pattern_that_does_not_compile(profile):
    builder = ShellJob.get_builder()
    for entry_point, guard in (("core.file_pattern", False), ("core.convergence", True)):
        kwargs = {"path": "out.log", "pattern": "("}
        with pytest.raises(InputValidationError) as caught:
            builder.monitors = {"m": {"entry_point": entry_point, "kwargs": kwargs, "guard": guard}}
        assert (
            f"Monitor 'm' ({entry_point}): kwarg 'pattern' ('(') is not a regular expression: "
            "missing ), unterminated subpattern at position 0." in str(caught.value)
        ), caught.value


def test_faulty_monitors_do_not_fail_the_job(import_paths, monkeypatch):
    from veglia.engine.calcjob import monitor_runner

    monkeypatch.setattr(monitor_runner, "FAULT_WINDOW", 0.5)  # the faults span half a second
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 2; echo fine")
    builder.monitors = {
        "raises": {"entry_point": "monitor_helpers:raising", "max_failures": 2},
        "hangs": {"entry_point": "monitor_helpers:hanging", "timeout": 0.3, "max_failures": 2},
        "wrong": {"entry_point": "monitor_helpers:wrong_type", "max_failures": 2},
    }
    outputs, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    assert outputs["stdout"].get_content() == b"fine\n"
    logs = "\n".join(log.message for log in node.logs)
    assert (
        "monitor raises raised RuntimeError: monitor bug (1 fault in a row over 0 s; disabled "
        "after 2 in a row over 0.5 s)" in logs
    )
    assert "monitor hangs timed out after 0.3 s" in logs
    assert "monitor wrong returned int, not a message, a MonitorResult or None" in logs
    state = node.get_attribute("monitor_state")
    for name in ("raises", "hangs", "wrong"):
        assert state[name]["disabled"], name
        assert re.match(r"\d+ failures in a row over \d+ s", state[name]["disabled_reason"])
        assert state[name]["failures"] >= 2
    provenance = node.get_attribute("monitor_provenance")["raises"]
    assert len(provenance["source_sha256"]) == 64


def test_a_monitor_raising_at_every_poll_writes_few_log_rows(import_paths, run_cli):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 3; echo fine")
    builder.monitors = {"raises": {"entry_point": "monitor_helpers:raising"}}
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    faults = node.get_attribute("monitor_state")["raises"]["failures"]
    rows = [log.message for log in node.logs if log.message.startswith("monitor raises")]
    assert faults >= 5, faults  # polled often: one row per fault would be dozens
    assert rows == [
        "monitor raises raised RuntimeError: monitor bug (1 fault in a row over 0 s; disabled "
        "after 3 in a row over 60 s); the job goes on"
    ]
    # The first fault's traceback names the line of the monitor that raised, and only the
    # monitor's own frames.
    report = run_cli("-p", "test", "process", "report", str(node.pk)).stdout
    assert re.search(
        r"Traceback \(most recent call last\):\n\s+File \".*monitor_helpers\.py\", line \d+, "
        r"in raising\n\s+raise RuntimeError\(\"monitor bug\"\)\n\s+RuntimeError: monitor bug\n",
        report,
    ), report
    assert "concurrent" not in report and "monitor_runner" not in report


def test_a_transport_failure_at_every_poll_is_logged_as_sparsely_as_a_fault(import_paths):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 3; echo fine")
    builder.monitors = {"missing": {"entry_point": "monitor_helpers:reads_missing"}}
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    assert node.get_attribute("monitor_state")["missing"]["failures"] == 0  # not its fault
    rows = [log.message for log in node.logs if log.message.startswith("monitor missing")]
    assert len(rows) == 1, rows  # polled often: one row per poll would be dozens
    assert rows[0].startswith("monitor missing transport failed: ")
    assert rows[0].endswith("(not counted as its fault); the job goes on")


def test_later_faults_are_counted_in_one_row_per_interval(import_paths, monkeypatch):
    from veglia.engine.calcjob import monitor_runner

    monkeypatch.setattr(monitor_runner, "FAULT_LOG_INTERVAL", 1.5)
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 4; echo fine")
    builder.monitors = {"raises": {"entry_point": "monitor_helpers:raising"}}
    _, node = engine.run_get_node(builder)
    faults = node.get_attribute("monitor_state")["raises"]["failures"]
    rows = [log.message for log in node.logs if log.message.startswith("monitor raises")]
    assert rows[0].startswith("monitor raises raised RuntimeError: monitor bug (1 fault in a row")
    assert 2 <= len(rows) <= 4, rows
    again = [
        re.match(
            r"monitor raises faulted again (\d+) times in the last \d+ s, last: raised "
            r"RuntimeError: monitor bug \((\d+) faults in a row over \d+ s; disabled after 3 ",
            row,
        )
        for row in rows[1:]
    ]
    assert all(again), rows
    assert int(again[-1].group(2)) <= faults  # the row names the fault count it was written at
    assert sum(int(m.group(1)) for m in again) + 1 <= faults
    assert int(again[0].group(1)) > 1


def test_async_monitor_and_priority_order(import_paths):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(DIVERGE + "sleep 600")
    builder.monitors = {
        "a_low": {
            "entry_point": "core.file_pattern",
            "priority": 1,
            "kwargs": {"path": "out.log", "pattern": "DIVERGED"},
        },
        "z_high": {
            "entry_point": "monitor_helpers:async_pattern",
            "priority": 10,
            "kwargs": {"path": "out.log", "word": "DIVERGED"},
        },
    }
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 150
    assert node.get_attribute("stopped_by_monitor")["name"] == "z_high"


def test_disable_self_outputs_and_keeping_the_parser_exit_code(import_paths):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 1; exit 3")
    builder.monitors = {"once": {"entry_point": "monitor_helpers:disable_me"}}
    outputs, node = engine.run_get_node(builder)
    assert node.exit_status == 400  # the job's own failure; the monitor only looked once
    assert node.get_attribute("monitor_state")["once"]["data"]["calls"] == 1
    assert outputs["monitor_outputs"]["once_note"].value == "seen once"

    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo out; sleep 30")
    builder.monitors = {"keep": {"entry_point": "monitor_helpers:stop_and_keep"}}
    outputs, node = engine.run_get_node(builder)
    assert node.get_attribute("stopped_by_monitor")["name"] == "keep"
    assert node.exit_status == 0  # parsed, and the parser found nothing wrong
    assert outputs["stdout"].get_content() == b"out\n"


def test_monitor_state_survives_a_restart(import_paths):
    runner = Runner()
    set_runner(runner)
    inputs = {
        "command": orm.Str("sleep 4"),
        "monitors": {
            "slow": {"entry_point": "monitor_helpers:counting", "minimum_poll_interval": 3600},
            "off": {"entry_point": "monitor_helpers:counting", "disable_on_start": True},
        },
    }
    process = runner.instantiate(ShellJob, inputs)

    async def until_first_call() -> None:
        task = asyncio.ensure_future(process.step_until_terminated())
        while not (process.node.refresh().get_attribute("monitor_state") or {}).get("slow"):
            await asyncio.sleep(0.05)
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for item in pending:
            item.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        assert task.done()

    runner.loop.run_until_complete(until_first_call())
    node = process.node.refresh()
    before = node.get_attribute("monitor_state")
    assert before["slow"]["data"]["calls"] == 1 and before["off"]["disabled"]

    fresh = Runner()
    set_runner(fresh)
    fresh.run_until_terminated(load_process(node, loop=fresh.loop))
    after = node.refresh().get_attribute("monitor_state")
    assert node.is_finished_ok
    assert after["slow"]["data"]["calls"] == 1  # its interval was not reset by the restart
    assert after["slow"]["last_call"] == before["slow"]["last_call"]
    assert after["off"]["disabled"] and after["off"]["data"] == {}


def test_monitor_list_and_show(run_cli):
    listing = run_cli("monitor", "list", "--raw").stdout.splitlines()
    names = [line.split("\t")[0] for line in listing]
    assert {
        "core.always_kill",
        "core.file_pattern",
        "core.stalled_output",
        "core.walltime_guard",
        "core.convergence",
    } <= set(names)
    rows = dict(line.split("\t", 1) for line in listing)
    # Only what a user gives: not the state, trace and files the engine fills in.
    assert rows["core.file_pattern"].startswith(
        "path (required), pattern (required, regular expression), retrieve=True\t"
    )
    assert rows["core.memory_ceiling"].startswith("fraction=0.95\t")
    assert rows["core.convergence"].startswith(
        "path (required), pattern (required, regular expression), window=5, rtol=0.001\t"
    )
    for name, row in rows.items():
        kwargs, doc = row.split("\t")
        assert not {"state", "trace", "files"} & {
            k.split("=")[0].split(" ")[0] for k in kwargs.split(", ")
        }, name
        assert "``" not in doc and ":param" not in doc, name
    assert "matches the regex pattern. Only" in rows["core.file_pattern"]
    shown = run_cli("monitor", "show", "core.convergence").stdout
    assert (
        "kwargs: path (required), pattern (required, regular expression), window=5, rtol=0.001\n"
        in shown
    )
    assert "stops improving" in shown
    assert "\nrtol: the relative improvement that counts as progress.\n" in shown
    assert "pattern: regex with one group capturing the value, e.g. 'energy = (\\S+)'." in shown
    assert ":param" not in shown and "``" not in shown


RICH_DOC_MONITOR = '''
def rich(node, transport, *, path: str = "out.log", limit: int = 1) -> None:
    """Stop the job when *PATH* holds **too many** NaN values, as ``grep -c NaN``.

    Reads through the :class:`~veglia.plugin_api.Transport`; see
    `the NaN guide <https://example.org/nan>`_ and :func:`veglia.load_profile`.

    .. note:: Only new bytes are read,
       so a rotated log starts again.

    .. deprecated:: 2.0 Use ``core.file_pattern`` instead.

    .. versionadded:: 1.3

    Attach it with::

        builder.monitors = {"nan": {"entry_point": "doc.rich"}}
        if True:
            pass

    .. code-block:: python

        print("hi")

    - the first item, with ``code``
      and a second line
    - the second item

    :param path: file to read, relative to
        the work directory.
    :param limit: how many NaN values are tolerated.
    """
'''

RICH_DOC_SHOWN = """\
Stop the job when PATH holds too many NaN values, as grep -c NaN.

Reads through the Transport; see
the NaN guide (https://example.org/nan) and veglia.load_profile.

Note: Only new bytes are read,
so a rotated log starts again.

Deprecated since version 2.0: Use core.file_pattern instead.

Added in version 1.3.

Attach it with:

    builder.monitors = {"nan": {"entry_point": "doc.rich"}}
    if True:
        pass

    print("hi")

- the first item, with code
  and a second line
- the second item

path: file to read, relative to
    the work directory.
limit: how many NaN values are tolerated.
"""


def test_monitor_and_plugin_show_render_a_rest_docstring(run_cli, tmp_path):
    """Every reST construct a docstring commonly holds reads as plain text: ``veglia monitor
    show``, ``monitor list`` (the first paragraph) and ``plugin show monitors``."""
    folder = tmp_path / "plugins"
    info = folder / "doc_rich-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: doc-rich\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[veglia.monitors]\ndoc.rich = doc_rich:rich\n")
    (folder / "doc_rich.py").write_text(RICH_DOC_MONITOR)
    env = {"PYTHONPATH": str(folder)}

    shown = run_cli("monitor", "show", "doc.rich", env=env)
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.split("\n\n", 1)[1] == RICH_DOC_SHOWN
    plugin = run_cli("plugin", "show", "monitors", "doc.rich", env=env)
    assert plugin.exit_code == 0, plugin.stderr
    assert plugin.stdout.endswith("\n\n" + RICH_DOC_SHOWN)
    listing = run_cli("monitor", "list", "--raw", env=env).stdout.splitlines()
    row = next(line for line in listing if line.startswith("doc.rich\t"))
    assert row == (
        "doc.rich\tpath='out.log', limit=1\t"
        "Stop the job when PATH holds too many NaN values, as grep -c NaN."
    )


def test_process_show_and_report_name_the_monitor(profile, run_cli):
    _, node = engine.run_get_node(
        ShellJob,
        command=orm.Str("sleep 30"),
        monitors={"always": {"entry_point": "core.always_kill", "kwargs": {"message": "bye"}}},
    )
    assert node.exit_status == 150
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    assert "stopped by monitor" in shown and "always at" in shown and "bye" in shown
    report = run_cli("-p", "test", "process", "report", str(node.pk)).stdout
    assert "monitor always stops the job: bye" in report


# -- real SLURM --------------------------------------------------------------------------
def test_file_pattern_stops_a_slurm_job_within_two_polls(
    broker_profile, services_env, ssh_params, slurm
):
    ssh_computer("slurm", services_env, ssh_params, "core.slurm", minimum_poll_interval=2.0)
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 3; echo DIVERGED >> out.log; sleep 600")
    builder.metadata.computer = "slurm"
    builder.metadata.options.queue_name = "long"
    builder.metadata.options.max_wallclock_seconds = 700
    builder.monitors = {
        "diverged": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.log", "pattern": "DIVERGED"},
        }
    }
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 150, node.exit_message
    # From the poll that saw it running (not from submission: the queue wait on a shared
    # node is SLURM's): the write after 3 s, then at most two polls (with slack for a busy
    # machine) until the monitor stops it.
    stopped = node.stopped_by_monitor["time"] - node.started_at
    assert stopped < 3 + 2 * 2.0 + 8, stopped
    squeue = subprocess.run(["squeue", "-h", "-j", node.job_id], capture_output=True, text=True)
    assert node.job_id not in squeue.stdout
    shown = subprocess.run(
        ["scontrol", "show", "job", node.job_id], capture_output=True, text=True
    ).stdout
    assert "JobState=CANCELLED" in shown
    assert "DIVERGED" in node.exit_message


def test_daemon_restart_keeps_disabled_monitors_and_intervals(broker_profile, daemon, run_cli):
    daemon(1)
    node = engine.submit(
        ShellJob,
        command=orm.Str("sleep 8; echo done"),
        monitors={
            "off": {"entry_point": "core.always_kill", "disable_on_start": True},
            "rare": {
                "entry_point": "core.stalled_output",
                "minimum_poll_interval": 3600,
                "kwargs": {"path": "never.txt", "seconds": 1},
            },
        },
    )
    deadline = time.monotonic() + 60
    while "rare" not in (node.refresh().get_attribute("monitor_state") or {}):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    before = node.get_attribute("monitor_state")
    assert run_cli("-p", "test", "daemon", "restart").exit_code == 0
    deadline = time.monotonic() + 90
    while not node.refresh().is_terminated:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    after = node.get_attribute("monitor_state")
    assert node.is_finished_ok, node.exit_message  # neither monitor acted
    assert after["off"]["disabled"] and after["off"]["last_call"] is None
    assert after["rare"]["last_call"] == before["rare"]["last_call"]
