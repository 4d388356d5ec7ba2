"""A process whose class the daemon cannot import (one defined in the user's script, or in a
module only the script's folder holds): a warning at submission; the daemon ends it
Excepted once, without handing it round; it can be killed and deleted without its class.
And a checkpoint, which anyone who can write the database can change, only ever loads a
process class."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import plumpy
import pytest

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia.exceptions import ProcessClassError
from veglia.orm.loading import load_node
from veglia_fixtures.profiles import wait_for

#: A job defined in the script that submits it (its class lives in ``__main__``).
JOB_CLASS = """
from veglia.engine import CalcInfo, CalcJob, CodeInfo


class MyJob(CalcJob):
    def prepare_for_submission(self, folder):
        return CalcInfo([CodeInfo(executable="true")])
"""

SUBMIT = """
import veglia
from veglia import engine

veglia.load_profile("test")
for _ in range({count}):
    print(engine.submit(MyJob, metadata={{"computer": "localhost"}}).pk)
"""

UNIMPORTABLE = "cannot be imported by a daemon worker"


def _submit_from_script(
    folder: Path, count: int = 1, in_module: bool = False
) -> tuple[list[int], str]:
    """Run a script in ``folder`` that submits ``count`` jobs of its own class; return their
    pks and what it printed on stderr. ``in_module``: the class is in ``myjob.py`` beside it."""
    if in_module:
        (folder / "myjob.py").write_text(JOB_CLASS)
        script = "from myjob import MyJob\n" + SUBMIT.format(count=count)
    else:
        script = JOB_CLASS + SUBMIT.format(count=count)
    (folder / "run.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "run.py"], cwd=folder, capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return [int(line) for line in result.stdout.split()], result.stderr


@pytest.mark.parametrize("in_module", [False, True], ids=["in-the-script", "beside-the-script"])
def test_submitting_a_class_the_daemon_cannot_import_warns_once(profile, tmp_path, in_module):
    pks, stderr = _submit_from_script(tmp_path, count=3, in_module=in_module)
    assert len(pks) == 3
    assert stderr.count(UNIMPORTABLE) == 1, stderr  # once per class, not per submission
    name = "myjob:MyJob" if in_module else "__main__:MyJob"
    assert f"Process class {name} {UNIMPORTABLE}" in stderr
    assert "Excepted" in stderr and "installed package" in stderr and "entry point" in stderr


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_the_daemon_ends_a_process_it_cannot_load_excepted_once(
    request, tmp_path, daemon, with_broker
):
    profile = request.getfixturevalue("broker_profile" if with_broker else "profile")
    daemon(1)
    [pk], _ = _submit_from_script(tmp_path)
    node = load_node(pk)
    wait_for([node], lambda n: n.is_terminated, timeout=30)
    assert node.is_excepted
    assert "ProcessClassError" in node.exit_message and "__main__:MyJob" in node.exit_message
    reports = [log.message for log in node.logs if "excepted" in log.message]
    assert len(reports) == 1 and "cannot be imported" in reports[0], reports
    # The daemon's repair queues a process that no worker holds every few seconds: a
    # process still going round would be loaded (and logged) again by then.
    time.sleep(12)
    log = DaemonFiles(profile).log.read_text()
    assert log.count(f"Process {pk} cannot be loaded") == 1, log
    assert "Traceback" not in log, log
    assert load_node(pk).is_excepted


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_a_process_whose_class_cannot_be_loaded_is_killed_then_deleted(
    request, tmp_path, run_cli, with_broker
):
    request.getfixturevalue("broker_profile" if with_broker else "profile")
    [pk], _ = _submit_from_script(tmp_path)  # no daemon: it stays Created
    assert load_node(pk).process_state == "created"

    started = time.monotonic()
    result = run_cli("-p", "test", "process", "kill", str(pk))
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 20  # at once, not after a timeout
    node = load_node(pk)
    assert node.is_killed, (node.process_state, result.output)
    assert any(log.message.startswith("Killed") for log in node.logs)

    result = run_cli("-p", "test", "node", "delete", str(pk), "--force")
    assert result.exit_code == 0, result.output
    assert run_cli("-p", "test", "node", "show", str(pk)).exit_code != 0


class Tripwire(plumpy.persistence.Savable):
    """A class plumpy could recreate from saved data, but no process class."""

    made = False

    @classmethod
    def recreate_from(cls, saved_state, load_context=None):
        cls.made = True
        return super().recreate_from(saved_state, load_context)


@pytest.mark.parametrize(
    "forged",
    [f"{__name__}:Tripwire", "os:getcwd", "no_such_module_anywhere:Job"],
    ids=["savable-class", "function", "missing-module"],
)
def test_a_checkpoint_loads_only_a_process_class(profile, forged, caplog):
    """Whoever can write the database can change the class a checkpoint names: what it
    names is checked to be a process class before anything of it is called."""
    from veglia.engine.process import load_process

    node = engine.submit(CalculationFactory("core.shell"), command=orm.Str("true"))
    assert UNIMPORTABLE not in caplog.text  # an installed class: no warning
    data = json.loads(node.get_checkpoint())
    data["bundle"][plumpy.persistence.META][plumpy.persistence.META__CLASS_NAME] = forged
    node.set_checkpoint(json.dumps(data))
    with pytest.raises(ProcessClassError, match=f"Process {node.pk} cannot be loaded"):
        load_process(node)
    assert not Tripwire.made


def test_a_kill_without_the_class_leaves_the_scheduler_job_s_cancel_owed(profile, run_cli):
    """A job that reached its scheduler before its class went away (a package uninstalled):
    the kill ends it from its record, and the node says its job's cancel is still owed."""
    from veglia.orm.attributes import CANCEL_PENDING, JOB_ID

    node = engine.submit(CalculationFactory("core.shell"), command=orm.Str("true"))
    data = json.loads(node.get_checkpoint())
    data["bundle"][plumpy.persistence.META][plumpy.persistence.META__CLASS_NAME] = (
        "uninstalled_package:Job"
    )
    node.set_checkpoint(json.dumps(data))
    node.set_attribute(JOB_ID, "4242")

    result = run_cli("-p", "test", "process", "kill", str(node.pk))
    assert result.exit_code == 0, result.output
    node = load_node(node.pk)
    assert node.is_killed
    mark = node.get_attribute(CANCEL_PENDING)
    assert mark["job_id"] == "4242" and mark["computer"] == "localhost", mark
    assert "scheduler job 4242 on localhost is cancelled by" in result.output


def test_a_module_in_the_folder_the_daemon_starts_from_is_not_imported(
    profile, tmp_path, daemon, monkeypatch
):
    # ``python -m`` puts the working folder first on the import path: whoever can write the
    # folder a user starts the daemon from could plant a module the daemon runs.
    [pk], _ = _submit_from_script(tmp_path, in_module=True)
    (tmp_path / "myjob.py").write_text(
        JOB_CLASS + f"\nopen({str(tmp_path / 'planted-ran')!r}, 'w').close()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    daemon(1)
    node = load_node(pk)
    wait_for([node], lambda n: n.is_terminated, timeout=30)
    assert node.is_excepted and "myjob:MyJob" in node.exit_message
    assert not (tmp_path / "planted-ran").exists()


SLEEPING_JOB = """
from veglia.engine import CalcInfo, CalcJob, CodeInfo


class SleepingJob(CalcJob):
    def prepare_for_submission(self, folder):
        return CalcInfo([CodeInfo(executable="sleep", cmdline_params=["600"])])
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_running_job_whose_class_went_away_is_cancelled_when_the_daemon_ends_it(
    profile, tmp_path, daemon, run_cli, monkeypatch
):
    # The class was importable when the job was submitted and started; it is gone (its
    # package uninstalled) when a daemon next loads the process: ended Excepted, its
    # scheduler job must not run on unseen.
    (tmp_path / "sleepingjob.py").write_text(SLEEPING_JOB)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    from sleepingjob import SleepingJob

    node = engine.submit(SleepingJob, metadata={"computer": "localhost"})
    daemon(1)
    wait_for([node], lambda n: bool(n.job_id), timeout=60)
    pid = int(node.job_id)
    assert _alive(pid)
    assert run_cli("-p", "test", "daemon", "stop").exit_code == 0

    (tmp_path / "sleepingjob.py").unlink()
    monkeypatch.delenv("PYTHONPATH")
    daemon(1)
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_excepted and "sleepingjob:SleepingJob" in node.exit_message
    wait_for([node], lambda n: n.get_attribute("cancel_pending") is None, timeout=60)
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid)
    assert sum(log.message == f"cancelled job {pid}" for log in load_node(node.pk).logs) == 1
