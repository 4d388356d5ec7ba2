"""core.lsf: script header and parsers, on outputs under tests/data/schedulers/lsf/.

There is no LSF here: those files are written from IBM Spectrum LSF 10.1 documentation
(tests/data/schedulers/README.md names the page each follows). Lines marked "not in IBM's
examples" are plausible variants the parser must also take.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from veglia import SchedulerFactory
from veglia.plugins.schedulers.lsf import LsfScheduler, LsfSubmitError
from veglia.schedulers import (
    JobFailure,
    JobResources,
    JobState,
    JobTemplate,
    SchedulerError,
    SchedulerSubmitError,
)
from veglia.testing import FakeTransport as SandboxTransport  # runs commands with bash
from veglia_fixtures.fake_batch import fake_batch_command

DATA = Path(__file__).parent / "data" / "schedulers" / "lsf"
COMMANDS = {c["command"]: c for c in json.loads((DATA / "commands.json").read_text())["commands"]}
TEMPLATE = {
    "commands": ["mpirun ./pw.x"],
    "job_name": "relax Si@8",
    "working_directory": "/scratch/alice/run",
    "stdout_name": "out.txt",
    "stderr_name": "err.txt",
    "resources": JobResources(num_machines=2, num_mpiprocs_per_machine=4, num_cores_per_mpiproc=2),
    "max_memory_kb": 4 * 1024 * 1024 + 1,  # a kilobyte over 4 GB: rounds up to 4097 MB
    "max_wallclock_seconds": 90061,  # 25 h 1 min 1 s: rounds up to 1502 minutes
    "queue_name": "normal",
    "account": "proj7",
}


def _recorded(command: str) -> tuple[int, str, str]:
    case = COMMANDS[command]
    return case["retval"], case["stdout"], case["stderr"]


def _jobs(retval: int, stdout: str, stderr: str = "") -> dict:
    return {i.job_id: i for i in LsfScheduler().parse_joblist_output(retval, stdout, stderr)}


# -- script -------------------------------------------------------------------------------
def test_script_header_maps_every_request():
    assert LsfScheduler().script_header(JobTemplate(**TEMPLATE)) == [
        "#BSUB -J relax_Si_8",
        "#BSUB -o out.txt",
        "#BSUB -e err.txt",
        "#BSUB -cwd /scratch/alice/run",
        "#BSUB -rn",
        "#BSUB -n 16",  # 2 machines x 4 processes x 2 cores
        '#BSUB -R "span[ptile=8] rusage[mem=4097MB]"',
        "#BSUB -M 4097MB",
        "#BSUB -hl",
        "#BSUB -W 1502",
        "#BSUB -q normal",
        "#BSUB -P proj7",
    ]


def test_defaults_ask_for_one_core_in_the_submission_directory_and_nothing_optional():
    header = LsfScheduler().script_header(JobTemplate(commands=["true"]))
    assert header == [
        "#BSUB -J veglia",
        "#BSUB -o _scheduler-stdout.txt",
        "#BSUB -e _scheduler-stderr.txt",
        "#BSUB -cwd .",
        "#BSUB -rn",
        "#BSUB -n 1",
        '#BSUB -R "span[ptile=1]"',
    ]
    one_second = JobTemplate(commands=["true"], max_wallclock_seconds=1)
    assert LsfScheduler().script_header(one_second)[-1] == "#BSUB -W 1"  # never 0: no limit


def test_script_exports_the_environment_quoted():
    scheduler = LsfScheduler()
    script = scheduler.get_submit_script(
        JobTemplate(
            commands=["mpirun ./pw.x"],
            resources=JobResources(num_cores_per_mpiproc=4),
            custom_scheduler_commands="#BSUB -B\n#BSUB -u alice@example.org\n",
            environment={"NAME": "it's a test", "N": 3},
        )
    )
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert lines.index("#BSUB -u alice@example.org") == lines.index('#BSUB -R "span[ptile=4]"') + 2
    assert lines[-3:] == [
        "export NAME='it'\"'\"'s a test'",
        "export N=3",
        "mpirun ./pw.x",
    ]


def test_qos_is_refused():
    with pytest.raises(SchedulerError, match="LSF has no QOS"):
        LsfScheduler().script_header(JobTemplate(commands=["true"], qos="high"))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("queue_name", "long queue", "queue_name 'long queue' must be one word"),
        ("account", 'p"7', "account"),
        ("working_directory", "/my dir", "working_directory"),
        ("stdout_name", "out\nfile", "stdout_name"),
        ("max_memory_kb", 0, "leave it unset"),
        ("max_wallclock_seconds", -5, "max_wallclock_seconds must be a whole number"),
    ],
)
def test_values_that_would_break_a_directive_are_refused(field, value, message):
    with pytest.raises(SchedulerError, match=message):
        LsfScheduler().script_header(JobTemplate(commands=["true"], **{field: value}))


# -- submit ---------------------------------------------------------------------------------
def test_submit_output_gives_the_job_id():
    scheduler = LsfScheduler()
    assert scheduler.submit_command("job 1.sh") == "bsub < 'job 1.sh'"
    assert scheduler.parse_submit_output(*_recorded("bsub < job.sh")) == "4110"
    assert scheduler.parse_submit_output(*_recorded("bsub -q short < job.sh")) == "4111"
    # An esub may talk first; a job LSF took must not be submitted again, whatever the exit.
    noisy = "Warning: project not set, using default\nJob <7> is submitted to queue <x>.\n"
    assert scheduler.parse_submit_output(0, noisy, "") == "7"
    assert scheduler.parse_submit_output(255, noisy, "") == "7"


@pytest.mark.parametrize(
    ("command", "permanent", "resource_request"),
    [
        ("bsub -q nosuch < job.sh", True, False),
        ("bsub -q short -W 600 < job.sh", True, True),
        ("bsub -n 4096 < job.sh", True, True),
        ("bsub -R 'rusage[mem=a]' < job.sh", True, False),
        ("bsub < missing.sh", True, False),
        ("bsub < job.sh (LIM down)", False, False),
    ],
)
def test_refusals_are_classified(command, permanent, resource_request):
    retval, stdout, stderr = _recorded(command)
    with pytest.raises(LsfSubmitError) as caught:
        LsfScheduler().parse_submit_output(retval, stdout, stderr)
    assert isinstance(caught.value, SchedulerSubmitError)
    assert (caught.value.permanent, caught.value.resource_request) == (permanent, resource_request)
    assert caught.value.bsub_message == stderr.strip() and caught.value.retval == retval
    assert stderr.strip() in str(caught.value)
    assert ("try again later" in str(caught.value)) is not permanent


@pytest.mark.parametrize(
    ("stderr", "permanent", "resource_request"),
    [  # not in IBM's examples: wordings of site esubs and other releases
        ("Memory limit 64000 MB exceeds the queue's limit. Job not submitted.", True, True),
        ("Project <nosuch> is not a valid project name. Job not submitted.", True, False),
        ("batch system daemon not responding ... still trying", False, False),
        ("Something new. Job not submitted.", False, False),
    ],
)
def test_other_refusals_are_classified(stderr, permanent, resource_request):
    with pytest.raises(LsfSubmitError) as caught:
        LsfScheduler().parse_submit_output(255, "", stderr + "\n")
    assert (caught.value.permanent, caught.value.resource_request) == (permanent, resource_request)


def test_exit_0_without_a_job_id_warns_that_the_job_may_exist():
    with pytest.raises(SchedulerError, match="may have been submitted") as caught:
        LsfScheduler().parse_submit_output(0, "Job <x> is submitted\n", "")
    assert not isinstance(caught.value, LsfSubmitError)


# -- list -----------------------------------------------------------------------------------
def test_job_list_maps_every_state_exit_code_and_failure():
    stdout = (DATA / "bjobs_mixed.txt").read_text()
    stderr = (DATA / "bjobs_mixed.stderr").read_text()
    jobs = _jobs(255, stdout, stderr)  # 255: LSB_BJOBS_CONSISTENT_EXIT_CODE=Y, one id unknown
    expected = {  # id: (state, failure, exit_code)
        "4101": (JobState.RUNNING, None, None),
        "4102": (JobState.QUEUED, None, None),
        "4103": (JobState.QUEUED_HELD, None, None),
        "4104": (JobState.SUSPENDED, None, None),
        "4105": (JobState.SUSPENDED, None, None),
        "4106": (JobState.UNDETERMINED, None, None),
        "4107": (JobState.QUEUED, None, None),
        "4108": (JobState.RUNNING, None, None),
        "4090": (JobState.DONE, None, 0),
        "4091": (JobState.DONE, JobFailure.FAILED, 3),
        "4092": (JobState.DONE, JobFailure.OUT_OF_WALLTIME, 140),
        "4093": (JobState.DONE, JobFailure.OUT_OF_MEMORY, 130),
        "4094": (JobState.DONE, JobFailure.CANCELLED, 130),  # bkill'd while running
        "4095": (JobState.DONE, JobFailure.CANCELLED, None),  # bkill'd while pending
        "4096": (JobState.DONE, JobFailure.NODE_FAILURE, 143),  # preempted: not its fault
    }
    assert {k: (i.state, i.failure, i.exit_code) for k, i in jobs.items()} == expected
    assert "3999" not in jobs
    running, pending = jobs["4101"], jobs["4102"]
    assert (running.queue, running.title) == ("normal", "relax_Si_8")
    assert running.wallclock_seconds == 1234
    assert running.raw_state == "RUN" and running.details["max_mem"] == "812 Mbytes"
    assert pending.reason.startswith("Job's requirements for resource reservation not satisfied")
    assert pending.wallclock_seconds == 0 and pending.details["start_time"] == ""
    assert jobs["4093"].reason.startswith("TERM_MEMLIMIT")
    assert jobs["4108"].title == "scan|a=1"  # the name is last: it may hold the delimiter


def test_exit_reason_given_as_its_keyword_or_its_description_alone_is_understood():
    # Not in IBM's examples: an exit reason without its description, or without the keyword.
    base = "9|EXIT|130|{}|normal|-|-|10 second(s)|-|-|x"
    assert _jobs(0, base.format("TERM_MEMLIMIT"))["9"].failure is JobFailure.OUT_OF_MEMORY
    assert _jobs(0, base.format("TERM_RUNLIMIT"))["9"].failure is JobFailure.OUT_OF_WALLTIME
    memory = base.format("job killed after reaching LSF memory usage limit")
    runtime = base.format("Job killed after reaching LSF run time limit")
    assert _jobs(0, memory)["9"].failure is JobFailure.OUT_OF_MEMORY
    assert _jobs(0, runtime)["9"].failure is JobFailure.OUT_OF_WALLTIME
    assert _jobs(0, base.format("TERM_PROCESSLIMIT: job killed"))["9"].failure is JobFailure.FAILED
    assert _jobs(0, "9|EXIT|2|-|q|-|-|00:01:10|-|-|x")["9"].wallclock_seconds == 70  # bjobs -hms


@pytest.mark.parametrize("retval", [0, 255])  # per LSB_BJOBS_CONSISTENT_EXIT_CODE
def test_forgotten_ids_are_absent_not_errors(retval):
    _, _, stderr = _recorded("bjobs 3998 3999")
    assert _jobs(retval, "", stderr) == {}
    assert _jobs(retval, "", "No job found\n") == {}  # a user without jobs


@pytest.mark.parametrize(
    ("retval", "stdout", "stderr", "message"),
    [
        (255, "", "Failed in an LSF library call: LIM is down; try later\n", "LIM is down"),
        (127, "", "bash: line 1: bjobs: command not found\n", "command not found"),
        (255, "", "", r"exit 255\): \(no output\)"),
        (0, "JOBID|STAT|EXIT_CODE\n", "", "JOBID"),  # a header despite -noheader
        (0, "4101|RUN|-|-|normal\n", "", "4101"),  # a record with fields missing
        (0, "4101 RUN normal\n", "", "4101 RUN"),  # not in the format asked for
        (0, "<html>Service unavailable</html>\n", "", "Service unavailable"),
        (0, "", "Job <3999> is not found\nbjobs: segmentation fault\n", "segmentation"),
    ],
)
def test_a_listing_that_is_not_understood_is_an_error_not_an_empty_list(
    retval, stdout, stderr, message
):
    with pytest.raises(SchedulerError, match=message):
        LsfScheduler().parse_joblist_output(retval, stdout, stderr)


class FakeTransport:
    def __init__(self, retval: int, stdout: str, stderr: str = "") -> None:
        self.answer = (retval, stdout, stderr)
        self.commands: list[str] = []

    def exec_command(self, command, **kwargs):
        self.commands.append(command)
        return self.answer


def test_get_jobs_needs_bjobs_to_account_for_every_id():
    listing = "4101|RUN|-|-|normal|-|-|5 second(s)|-|-|a\n"
    transport = FakeTransport(0, listing, "Job <3999> is not found\n")
    jobs = LsfScheduler().get_jobs(transport, ["4101", "3999"])
    assert list(jobs) == ["4101"]  # 3999 has left LSF: the engine sees it as finished
    assert transport.commands == [
        'bjobs -a -noheader -o "jobid stat exit_code exit_reason queue submit_time start_time '
        "run_time max_mem pend_reason job_name delimiter='|'\" 4101 3999"
    ]
    # Silence about a job is not its end.
    with pytest.raises(SchedulerError, match="said nothing about job"):
        LsfScheduler().get_jobs(FakeTransport(0, listing), ["4101", "4102"])
    with pytest.raises(SchedulerError, match="said nothing about job"):
        LsfScheduler().get_jobs(FakeTransport(0, ""), ["4101"])
    assert LsfScheduler().get_jobs(FakeTransport(0, "garbage"), []) == {}


def test_the_list_command_runs_in_a_shell_as_one_format_argument(tmp_path):
    fake = tmp_path / "bjobs"
    fake.write_text('#!/bin/bash\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    command = LsfScheduler().joblist_command(["4101", "4102"])
    args = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env)
    assert args.stdout.splitlines() == [
        "-a",
        "-noheader",
        "-o",
        "jobid stat exit_code exit_reason queue submit_time start_time run_time max_mem "
        "pend_reason job_name delimiter='|'",
        "4101",
        "4102",
    ]


def test_past_the_ids_a_line_holds_they_go_on_stdin():
    scheduler = LsfScheduler()
    job_ids = [str(200000 + i) for i in range(20000)]
    command = scheduler.joblist_command(job_ids)
    assert command.startswith("ids=$(cat); ") and len(command) < 1000
    assert "200000" not in command  # no id on the line
    assert scheduler.joblist_input(job_ids) == "".join(f"{i}\n" for i in job_ids).encode()
    assert scheduler.joblist_input(job_ids[:1000]) is None  # up to 1,000: on the line
    assert scheduler.joblist_command(job_ids[:1000]).endswith(" 200998 200999")
    with pytest.raises(SchedulerError, match="not an LSF job id"):
        scheduler.joblist_input([*job_ids, "1;id"])


def _fake_bjobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``bjobs -a -noheader -o FORMAT [ID...]``: without ids the lines of ``listing.txt``
    (the caller's jobs; "No job found", exit 255, when there are none), with ids each one's
    line of ``known.json`` or, as LSF 10.1 does, "Job <N> is not found" on stderr and exit
    255 (LSB_BJOBS_CONSISTENT_EXIT_CODE=Y); with a file ``down``, LSF's "LIM is down".
    Each call's id count goes to ``calls.log``."""
    return fake_batch_command(
        tmp_path,
        monkeypatch,
        "bjobs",
        ["-a", "-noheader", "-o", None],
        "if (here / 'down').exists():\n"
        "    sys.exit('Failed in an LSF library call: LIM is down; try later')\n"
        "if not ids:\n"
        "    listing = (here / 'listing.txt').read_text()\n"
        "    sys.stdout.write(listing)\n"
        "    sys.exit(0 if listing else 'No job found')\n"
        "known = json.loads((here / 'known.json').read_text())\n"
        "for i in ids:\n"
        "    if i in known:\n"
        "        print(known[i])\n"
        "    else:\n"
        "        print(f'Job <{i}> is not found', file=sys.stderr)\n"
        "sys.exit(255 if set(ids) - set(known) else 0)\n",
    )


def test_a_poll_of_20000_ids_reads_as_on_the_line(tmp_path, monkeypatch):
    """20,000 ids on stdin: bjobs lists the caller's jobs once, then is asked by id, 1,000
    a call, about the ids it did not list; each id ends as when the ids are on the line:
    listed with its state, or absent where bjobs says it is not found."""
    recorded = (DATA / "bjobs_mixed.txt").read_text().splitlines()
    job_ids = [str(200000 + i) for i in range(20000)]
    forgotten = set(job_ids[7::10])  # past CLEAN_PERIOD: not found
    left_out = set(job_ids[3::100])  # known by id, not in the listing
    model = {i: recorded[n % len(recorded)].partition("|") for n, i in enumerate(job_ids)}
    known = {i: f"{i}|{model[i][2]}" for i in job_ids if i not in forgotten}
    others = {str(300000 + n): f"{300000 + n}|{recorded[0].partition('|')[2]}" for n in range(5)}
    listing = [line for i, line in (known | others).items() if i not in left_out]
    (tmp_path / "listing.txt").write_text("".join(f"{line}\n" for line in listing))
    (tmp_path / "known.json").write_text(json.dumps(known | others))
    calls = _fake_bjobs(tmp_path, monkeypatch)
    scheduler = LsfScheduler()
    with SandboxTransport(root=str(tmp_path / "computer")) as transport:
        jobs = scheduler.get_jobs(transport, job_ids)
        asked = [int(n) for n in calls.read_text().split()]
        calls.unlink()
        on_the_line = scheduler.get_jobs(transport, job_ids[:1000])
    assert asked == [0] + [1000] * 2 + [len(forgotten | left_out) - 2000]
    assert set(jobs) == set(known) | set(others)  # the forgotten ids are absent
    assert {i: jobs[i] for i in on_the_line} == on_the_line
    recorded_jobs = _jobs(0, "\n".join(recorded))
    expected = {i: recorded_jobs[model[i][0]] for i in known}
    assert {i: (j.state, j.failure, j.exit_code, j.title) for i, j in expected.items()} == {
        i: (jobs[i].state, jobs[i].failure, jobs[i].exit_code, jobs[i].title) for i in known
    }


def test_past_the_ids_a_line_holds_a_failed_listing_fails_the_poll(tmp_path, monkeypatch):
    job_ids = [str(200000 + i) for i in range(1500)]
    (tmp_path / "known.json").write_text("{}")
    (tmp_path / "listing.txt").write_text("")
    calls = _fake_bjobs(tmp_path, monkeypatch)
    scheduler = LsfScheduler()
    with SandboxTransport(root=str(tmp_path / "computer")) as transport:
        # "No job found" (exit 255) is an answer: every id is then asked for by id.
        assert scheduler.get_jobs(transport, job_ids) == {}
        assert [int(n) for n in calls.read_text().split()] == [0, 1000, 500]
        calls.unlink()
        (tmp_path / "down").touch()
        with pytest.raises(SchedulerError, match="LIM is down"):
            scheduler.get_jobs(transport, job_ids)
    assert calls.read_text() == "0\n"  # mbatchd down: not asked 1,500 more times


def test_bad_job_ids_never_reach_a_command_line():
    scheduler = LsfScheduler()
    for bad in ("1; rm -rf ~", "12.3", "", "$(id)", "12[1]"):
        with pytest.raises(SchedulerError, match="not an LSF job id"):
            scheduler.joblist_command(["1", bad])
        with pytest.raises(SchedulerError, match="not an LSF job id"):
            scheduler.kill_command(bad)
    assert scheduler.joblist_command(user="al ice").endswith(" -u 'al ice'")
    assert " -u " not in scheduler.joblist_command()  # bjobs lists the caller's own jobs


def test_pending_reasons_that_can_never_clear_are_known():
    scheduler = LsfScheduler()
    jobs = _jobs(0, (DATA / "bjobs_mixed.txt").read_text())
    assert scheduler.unsatisfiable_reason(jobs["4107"].reason)
    assert scheduler.unsatisfiable_reason("The queue is inactive")
    assert not scheduler.unsatisfiable_reason(jobs["4102"].reason)  # waits for resources
    assert not scheduler.unsatisfiable_reason("The queue is inactivated by its time windows;")
    assert not scheduler.unsatisfiable_reason("")
    assert scheduler.queues_command() is None


# -- kill and failure classification -----------------------------------------------------------
def test_kill_output():
    scheduler = LsfScheduler()
    assert scheduler.kill_command("4101") == "bkill 4101"
    assert scheduler.parse_kill_output(*_recorded("bkill 4101"))
    assert scheduler.parse_kill_output(*_recorded("bkill 4090"))  # already finished
    assert scheduler.parse_kill_output(*_recorded("bkill 3999"))  # forgotten
    assert not scheduler.parse_kill_output(*_recorded("bkill 4001"))  # not the owner


def test_classify_failure_reads_the_job_report():
    scheduler = LsfScheduler()
    jobs = _jobs(0, (DATA / "bjobs_mixed.txt").read_text())
    memory = (DATA / "stdout_memlimit.txt").read_text()
    runtime = (DATA / "stdout_runlimit.txt").read_text()
    done = (DATA / "stdout_done.txt").read_text()
    # LSF has forgotten the job: the report in its output file still says why it ended.
    assert scheduler.classify_failure(None, memory) is JobFailure.OUT_OF_MEMORY
    assert scheduler.classify_failure(None, runtime) is JobFailure.OUT_OF_WALLTIME
    assert scheduler.classify_failure(jobs["4091"], memory) is JobFailure.OUT_OF_MEMORY
    assert scheduler.classify_failure(jobs["4092"], "") is JobFailure.OUT_OF_WALLTIME
    assert scheduler.classify_failure(jobs["4091"], "Traceback...\n") is JobFailure.FAILED
    assert scheduler.classify_failure(jobs["4090"], done) is None
    assert scheduler.classify_failure(None, done) is None


# -- the plugin -------------------------------------------------------------------------------
def test_entry_point_is_registered_and_listed(run_cli):
    assert SchedulerFactory("core.lsf") is LsfScheduler
    result = run_cli("plugin", "list", "schedulers", "--raw")
    assert result.exit_code == 0, result.output
    names = [line.split("\t")[1] for line in result.stdout.splitlines()]
    assert "core.lsf" in names
