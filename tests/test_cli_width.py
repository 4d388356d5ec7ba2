"""The tables of the CLI read well in an 80-column terminal and in a wide one: no line
longer than the terminal, no state, label or path broken across lines (a path is whole, or
shortened in its middle with "…"), nothing shortened that fits; piped, values are whole.

The commands run in a pseudo-terminal of the given width, as a user's shell runs them."""

from __future__ import annotations

import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from fcntl import ioctl

import pytest

from veglia_fixtures.profiles import VEGLIA

WORK_DIR = "/scratch/project-hydrogen-storage/shared/{username}/veglia-calculations/workdirs"
JOB_DIR = (
    "/scratch/project-hydrogen-storage/shared/alice/veglia-calculations/workdirs/3f/9a/"
    "7c41e2d8-bb04-4a6e-9f1c-2d7e0c5a91ab"
)
LABEL = "relax-silicon-supercell-4x4x4-pbe-high-cutoff-kpoints-8x8x8"
PROCESS_TYPE = "veglia_quantumespresso.calculations.pw_relax_with_hubbard_corrections"
ENTRY_POINT = "quantumespresso.pw.relax_with_hubbard_corrections_and_spin_orbit"
OBJECT = "veglia_quantumespresso.calculations.pw_relax:PwRelaxHubbardSpinOrbitCalculation"
#: The fixture's long values as the commands show them (the workflow's type aside).
LONG_VALUES = (JOB_DIR, WORK_DIR, PROCESS_TYPE, OBJECT, ENTRY_POINT)
STATE_WORDS = ("Waiting", "Finished")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_terminal(args: list[str], columns: int, env: dict[str, str]) -> str:
    """What `veglia ARGS` prints in a terminal ``columns`` wide (colours taken out)."""
    leader, follower = pty.openpty()
    ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full_env = {**os.environ, **env, "COLUMNS": str(columns), "TERM": "xterm"}
    process = subprocess.Popen(
        [VEGLIA, *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        env=full_env,
    )
    os.close(follower)
    chunks = []
    while True:
        if not select.select([leader], [], [], 120)[0]:
            process.kill()
            raise AssertionError(f"veglia {' '.join(args)} printed nothing for 120 s")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the command has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    return ANSI.sub("", text)


@pytest.fixture
def long_values(profile, veglia_home, tmp_path):
    """A profile whose computer, jobs, options and plugins have realistic long values;
    the environment a command needs to see them."""
    from veglia import orm
    from veglia.config import Config
    from veglia.orm.attributes import REMOTE_WORKDIR, SCHEDULER_STATE
    from veglia.orm.computers import Computer

    computer = Computer(
        label="hydrogen-cluster",
        hostname="login01.hydrogen-storage.example.org",
        transport_type="core.local",
        scheduler_type="core.direct",
        description="The project's cluster; jobs run in the shared scratch folder of the project.",
        properties={"workdir": WORK_DIR},
    ).store()
    workflow = orm.WorkflowNode(process_type=PROCESS_TYPE.replace("calculations", "workflows"))
    workflow.label = LABEL
    workflow.process_state = "waiting"
    workflow.store()
    jobs = []
    for state, scheduler_state in (("waiting", "RUNNING"), ("finished", None)):
        job = orm.CalcJobNode(process_type=PROCESS_TYPE)
        job.label = f"{LABEL}-{state}"
        job.process_state = state
        job.computer_pk = computer.pk
        job.store([(workflow, "call", "CALL_CALC")])
        job.set_attributes(
            {
                REMOTE_WORKDIR: JOB_DIR,
                **({SCHEDULER_STATE: scheduler_state} if scheduler_state else {}),
            }
        )
        if state == "finished":
            job.set_exit(0, None)
        job.add_log("REPORT", f"submitted to hydrogen-cluster, in {JOB_DIR}, as job 81234567")
        jobs.append(job)
    Config().set_option(
        "test",
        "notify.email",
        "alice@hydrogen-storage.example.org,bob@hydrogen-storage.example.org,carol@hydrogen-storage.example.org",
    )

    folder = tmp_path / "plugins"
    info = folder / "veglia_qe-4.11.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: veglia-qe\nVersion: 4.11.0\n")
    (info / "entry_points.txt").write_text(f"[veglia.calculations]\n{ENTRY_POINT} = {OBJECT}\n")
    path = os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {"VEGLIA_HOME": str(veglia_home), "VEGLIA_PROFILE": "test", "PYTHONPATH": path}
    return {"computer": computer, "workflow": workflow, "jobs": jobs, "env": env}


def commands(values) -> dict[str, list[str]]:
    job = values["jobs"][0]
    return {
        "process list": ["process", "list", "-a"],
        "process show": ["process", "show", str(job.pk)],
        "process show (workflow)": ["process", "show", str(values["workflow"].pk)],
        "config list": ["config", "list"],
        "config show": ["config", "show"],
        "computer show": ["computer", "show", "hydrogen-cluster"],
        "plugin list": ["plugin", "list"],
    }


def paths_in(text: str) -> list[str]:
    """The paths and dotted names of the fixture that ``text`` shows, whole or shortened."""
    found = re.findall(r"(?:/scratch|veglia_quantumespresso|quantumespresso\.)[^\s),]*", text)
    return [
        path for path in found if not path.endswith("workflows.pw_relax_with_hubbard_corrections")
    ]


def assert_whole_or_elided_in_the_middle(shown: str, full: str) -> None:
    if shown == full:
        return
    head, sep, tail = shown.partition("…")
    assert sep and head and tail, f"{shown!r} is neither {full!r} nor shortened in its middle"
    assert full.startswith(head) and full.endswith(tail), f"{shown!r} is not {full!r} shortened"


@pytest.mark.parametrize("columns", [80, 200])
def test_every_table_fits_the_terminal_without_breaking_a_word(long_values, columns):
    shown = {
        name: in_terminal(args, columns, long_values["env"])
        for name, args in commands(long_values).items()
    }
    for name, text in shown.items():
        too_long = [line for line in text.splitlines() if len(line.rstrip()) > columns]
        assert not too_long, f"{name} at {columns} columns:\n{text}"
        if name.startswith("process"):
            # Every state whole: a word of its own on one line, not cut or folded.
            words = set(text.split())
            assert set(STATE_WORDS) & words, f"{name}:\n{text}"
            pieces = [
                word
                for word in words
                if len(word) >= 3
                and any(word.lower() in s and word.lower() != s for s in ("waiting", "finished"))
            ]
            assert not pieces, f"{name} breaks a state ({pieces}):\n{text}"
        for path in paths_in(text):
            full = next((full for full in LONG_VALUES if full.endswith(path[-4:])), None)
            assert full is not None, f"{name}: {path!r} is a part of a path:\n{text}"
            assert_whole_or_elided_in_the_middle(path, full)
    if columns == 80:
        # A value too long for the room beside its key goes under it, indented.
        lines = shown["process show"].splitlines()
        key = next(i for i, line in enumerate(lines) if line.startswith("work dir"))
        assert lines[key].strip() == "work dir"
        assert lines[key + 1].startswith("    /scratch/")
    else:
        # Nothing is shortened that fits.
        assert JOB_DIR in shown["process show"]
        assert LABEL in shown["process list"] and PROCESS_TYPE in shown["process list"]
        assert WORK_DIR in shown["computer show"]
        assert ENTRY_POINT in shown["plugin list"] and OBJECT in shown["plugin list"]
        for name, text in shown.items():
            assert "…" not in text, f"{name}:\n{text}"


def test_piped_output_keeps_whole_values_one_row_a_line(long_values, run_cli):
    """What grep wants: each row on one line with its values whole, however wide."""
    env = long_values["env"]
    listed = run_cli("process", "list", "-a", env=env).stdout.splitlines()
    job = long_values["jobs"][1]
    line = next(line for line in listed if line.lstrip().startswith(str(job.pk)))
    assert f"{LABEL}-finished" in line and PROCESS_TYPE in line and "Finished" in line
    plugins = run_cli("plugin", "list", env=env).stdout
    assert any(ENTRY_POINT in line and OBJECT in line for line in plugins.splitlines())
    assert "…" not in run_cli("computer", "show", "hydrogen-cluster", env=env).stdout
    # An option's line holds its whole description, 300 characters wide or not.
    options = run_cli("config", "list", env=env).stdout.splitlines()
    root = next(line for line in options if line.startswith("workdir.root "))
    assert root.rstrip().endswith(
        "It must belong to you and be writable by nobody else (veglia checks)."
    )


def test_a_path_loses_whole_folders_from_its_middle():
    from veglia.cli.fit import elide_middle

    assert elide_middle("/scratch/project/alice/run/job/ab12", 19) == "/scratch/…/job/ab12"
    assert elide_middle("/scratch/project/alice/run/job/ab12", 40) == (
        "/scratch/project/alice/run/job/ab12"
    )
    assert elide_middle("relax-silicon-supercell-4x4x4", 16) == "relax…cell-4x4x4"


def column_lines(text: str, header: str, after: str, first: str) -> list[str]:
    """The lines of the ``header`` column (up to the ``after`` column) of the row whose
    first line starts with ``first``, and of the lines under it up to the next row."""
    lines = text.splitlines()
    top = next(line for line in lines if f" {header} " in line and f" {after}" in line)
    start, end = top.index(f" {header} ") + 1, top.index(f" {after}")
    row = next(i for i, line in enumerate(lines) if line.startswith(first))
    below = [row]
    for i in range(row + 1, len(lines)):
        if not lines[i].strip() or not lines[i][0].isspace():
            break
        below.append(i)
    return [lines[i][start:end].strip() for i in below]


def test_a_status_wraps_in_the_room_a_label_gives_at_80_columns(long_values):
    """Prose (a status) keeps a readable width, wrapping between words; a label or a type
    (one long word) is shortened in its middle first."""
    from veglia import orm
    from veglia.orm.attributes import BACKOFF

    job = orm.CalcJobNode(process_type=PROCESS_TYPE)
    job.label = f"{LABEL}-retrying"
    job.process_state = "waiting"
    job.store()
    backoff = {"step": "upload", "attempt": 1, "attempts": 5, "next_try": time.time() + 10.5}
    job.set_attributes({BACKOFF: backoff})
    text = in_terminal(["process", "list", "-a"], 80, long_values["env"])
    status = column_lines(text, "Status", "Exit", f"{job.pk} ")
    header = next(line for line in text.splitlines() if " Status " in line)
    assert header.index(" Exit") - header.index(" Status ") - 1 >= 16, text
    assert re.fullmatch(r"upload attempt 1/5 failed; next in \d+ s", " ".join(status)), text
    assert len(status) <= 3, text
    assert any(re.search(r"next in \d+ s$|^in \d+ s$|^\d+ s$", line) for line in status), text
    running = long_values["jobs"][0]
    assert column_lines(text, "Status", "Exit", f"{running.pk} ") == ["scheduler: RUNNING"], text


def test_names_a_user_types_stay_whole_at_80_columns(long_values):
    """An option's name (for `config set`) and a plugin's entry point name stay whole; the
    description or the object gives way."""
    from veglia.config.options import get_options

    options = in_terminal(["config", "list"], 80, long_values["env"]).splitlines()
    for name in get_options():
        assert any(line.startswith(f"{name} ") for line in options), (name, options)
    plugins = in_terminal(["plugin", "list"], 80, long_values["env"])
    for name in ("core.pending_too_long", "core.arithmetic.add", "core.memory_ceiling"):
        assert re.search(rf" {re.escape(name)} ", plugins), f"{name}:\n{plugins}"


HOST = "localhost-with-a-very-long-name-for-tests"
HOST_WORKDIR = (
    f"/tmp/pytest-of-alice/pytest-12/test_process_show0/{HOST}/workdirs/79/01/"
    "7c41e2d8-bb04-4a6e-9f1c-2d7e0c5a91ab"
)
#: A workdir whose first folder is too long for it to be shortened by whole folders alone.
LONG_FIRST = (
    "/hydrogen-storage-project-shared-scratch-filesystem-of-the-whole-group-2026/alice/"
    "veglia-calculations/workdirs/{username}"
)


def assert_elided_between_folders(shown: str, full: str) -> None:
    """``shown`` is ``full``, or its start and whole folders of its end with "…" between."""
    if shown == full:
        return
    head, sep, tail = shown.partition("…")
    assert sep and head and tail.startswith("/"), f"{shown!r} is not {full!r} elided"
    assert full.startswith(head) and full.endswith(tail), f"{shown!r} is not {full!r} elided"


def test_a_path_keeps_whole_folders_of_its_end_at_80_columns(long_values):
    """A path in a log line, after the computer's long label, and a work dir whose first
    folder is long, lose their middle and keep the job's folders whole."""
    from veglia import orm
    from veglia.orm.computers import Computer

    job = orm.CalcJobNode(process_type=PROCESS_TYPE)
    job.label = "uploaded"
    job.process_state = "waiting"
    job.store()
    job.add_log("REPORT", f"uploaded to {HOST}:{HOST_WORKDIR}")
    Computer(
        label="group-scratch",
        hostname="login02.hydrogen-storage.example.org",
        transport_type="core.local",
        scheduler_type="core.direct",
        properties={"workdir": LONG_FIRST},
    ).store()
    shown = in_terminal(["process", "show", str(job.pk)], 80, long_values["env"])
    word = re.search(rf"{HOST[:8]}\S*", shown)
    assert word, shown
    assert_elided_between_folders(word.group(), f"{HOST}:{HOST_WORKDIR}")
    shown = in_terminal(["computer", "show", "group-scratch"], 80, long_values["env"])
    word = re.search(r"/hydrogen\S*", shown)
    assert word, shown
    assert_elided_between_folders(word.group(), LONG_FIRST)
    assert max(map(len, shown.splitlines())) <= 80, shown


def test_a_path_among_words_loses_whole_folders():
    from veglia.cli.fit import elide_middle, elide_words

    assert elide_middle("(/scratch/project/alice/run/job/ab12)", 20) == "(/scratch/…/ab12)"
    assert elide_words("in host:/scratch/project/alice/job/ab12, as job 7", 18) == (
        "in host:/…/job/ab12, as job 7"
    )
    path = "host-with-a-long-name:/scratch/project/alice/79/01/ab12"
    assert elide_middle(path, 30) == "host-with-a-long-name:/…/ab12"
    # Its first part too long for that: its start, and whole folders of its end.
    assert elide_middle(path, 24) == "host-with-a-…/79/01/ab12"
