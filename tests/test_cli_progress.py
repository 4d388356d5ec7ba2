"""While a command waits, a terminal shows it: a live status line for a job run in the
foreground (``veglia shell``, ``engine.run`` in a ``veglia run`` script), progress bars for
long commands (verify, archive, storage maintain). A pipe never gets them: a script reads
the result alone.

Each command runs in a new interpreter, once with stderr on a pseudo-terminal (``pty``) and
once on a pipe, through the ``veglia`` entry point a user types.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest

from veglia import orm

CLI = [sys.executable, "-c", "from veglia.cli.main import main; main()"]
#: A terminal rich draws live displays on (a test runner may have TERM unset or dumb).
TERMINAL_ENV = {"TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}


def _on_a_terminal(*args: str, timeout: float = 120) -> tuple[int, str]:
    """``veglia ARGS`` with stdout and stderr on a pseudo-terminal: its exit code and all
    it wrote there, control sequences included."""
    main, other = pty.openpty()
    env = {**os.environ, **TERMINAL_ENV}
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(name, None)
    process = subprocess.Popen(
        [*CLI, *args], stdin=subprocess.DEVNULL, stdout=other, stderr=other, env=env
    )
    os.close(other)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: every end of the terminal is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    return process.wait(timeout=timeout), b"".join(chunks).decode(errors="replace")


def _on_a_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **TERMINAL_ENV}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_foreground_shell_job_shows_a_live_status_line_on_a_terminal_only(profile):
    code, shown = _on_a_terminal("-p", "test", "shell", "sleep 2; echo hello")
    assert code == 0, shown
    assert "hello" in shown
    # Its state, what it does (the scheduler's state) and the time so far, as it waits.
    assert re.search(r"process \d+ ⏵ Waiting · scheduler: running · \ds", shown), shown

    piped = _on_a_pipe("-p", "test", "shell", "sleep 1; echo hello")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("hello\n")
    assert "scheduler:" not in piped.stdout + piped.stderr
    assert "\x1b[" not in piped.stdout + piped.stderr


def test_engine_run_in_a_veglia_run_script_shows_the_status_line_while_it_waits(profile, tmp_path):
    script = tmp_path / "two_jobs.py"
    script.write_text(
        "ShellJob = CalculationFactory('core.shell')\n"
        "for word in ('one', 'two'):\n"
        "    builder = ShellJob.get_builder()\n"
        "    builder.command = orm.Str(f'sleep 1; echo {word}')\n"
        "    results, node = run_get_node(builder)\n"
        "    print('printed', results['stdout'].get_content().decode().strip(), node.pk)\n"
    )
    code, shown = _on_a_terminal("-p", "test", "run", str(script))
    assert code == 0, shown
    # A line for each run, gone before the script prints on.
    assert len(re.findall(r"process \d+ ⏵ Waiting · scheduler: running", shown)) >= 2, shown
    assert "printed one" in shown and "printed two" in shown

    piped = _on_a_pipe("-p", "test", "run", str(script))
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("printed one ")
    assert "scheduler:" not in piped.stdout + piped.stderr


@pytest.fixture
def stored_files(profile, tmp_path):
    nodes = []
    for i in range(3):
        path = tmp_path / f"f{i}.txt"
        path.write_text(f"content {i}\n")
        nodes.append(orm.SinglefileData(file=path).store())
    return nodes


@pytest.mark.parametrize(
    ("args", "bar"),
    [
        (("verify",), "checking files"),
        (("archive", "create", "{tmp}/out.zip", "1", "2", "3"), "writing files"),
        (("storage", "maintain", "--grace-period", "1s"), "reading blobs"),
    ],
)
def test_long_commands_draw_progress_bars_on_a_terminal_only(stored_files, tmp_path, args, bar):
    args = tuple(a.replace("{tmp}", str(tmp_path)) for a in args)
    code, shown = _on_a_terminal("-p", "test", *args)
    assert code == 0, shown
    assert bar in shown, shown
    assert "━" in shown  # the bar itself

    if "archive" in args:
        (tmp_path / "out.zip").unlink()
    piped = _on_a_pipe("-p", "test", *args)
    assert piped.returncode == 0, piped.stderr
    assert bar not in piped.stdout + piped.stderr
    assert "━" not in piped.stdout + piped.stderr
    assert "✔" in piped.stdout  # the summary, as before


def test_archive_import_draws_its_progress_on_a_terminal(stored_files, tmp_path, veglia_home):
    archive = tmp_path / "out.zip"
    created = _on_a_pipe("-p", "test", "archive", "create", str(archive), "1", "2", "3")
    assert created.returncode == 0, created.stderr
    piped = _on_a_pipe("-p", "other", "archive", "import", str(archive))
    assert piped.returncode != 0  # no such profile: made below
    from veglia_fixtures.profiles import make_profile

    make_profile("other")
    code, shown = _on_a_terminal("-p", "other", "archive", "import", str(archive))
    assert code == 0, shown
    assert "copying files" in shown and "writing nodes" in shown, shown
    assert "Imported" in shown
