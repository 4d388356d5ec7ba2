"""core.slurm: parsers on output recorded on the test machine, then real jobs on its SLURM.

The recorded files under tests/data/schedulers/slurm/ come from SLURM 22.05 here (memory is
enforced by JobAcctGatherParams=OverMemoryKill, so a memory kill ends as FAILED and only
slurmstepd's message in the job's stderr says why). Lines marked "not recorded here" are
messages of real clusters that this single-node one cannot produce (accounting, cgroups).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from veglia.plugins.schedulers.directives import parse_duration
from veglia.plugins.schedulers.slurm import SlurmScheduler, SlurmSubmitError
from veglia.plugins.schedulers.slurm_records import parse_scontrol_record, parse_slurm_time_input
from veglia.schedulers import JobFailure, JobResources, JobState, JobTemplate, SchedulerError

DATA = Path(__file__).parent / "data" / "schedulers" / "slurm"
COMMANDS = {c["command"]: c for c in json.loads((DATA / "commands.json").read_text())["commands"]}


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _parse(stdout: str, retval: int = 0, stderr: str = "") -> dict:
    return {i.job_id: i for i in SlurmScheduler().parse_joblist_output(retval, stdout, stderr)}


# -- script -------------------------------------------------------------------------------
def test_script_header_maps_every_request():
    template = JobTemplate(
        commands=["srun ./pw.x"],
        job_name="relax Si: 8 atoms/cell",
        resources=JobResources(num_machines=2, num_mpiprocs_per_machine=4, num_cores_per_mpiproc=2),
        max_memory_kb=51201,
        max_wallclock_seconds=90061,
        queue_name="long",
        account="proj-7",
        qos="high",
    )
    assert SlurmScheduler().script_header(template) == [
        "#SBATCH --job-name=relax_Si__8_atoms_cell",
        "#SBATCH --output=_scheduler-stdout.txt",
        "#SBATCH --error=_scheduler-stderr.txt",
        "#SBATCH --no-requeue",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --time=1-01:01:01",
        "#SBATCH --mem=51",
        "#SBATCH --partition=long",
        "#SBATCH --account=proj-7",
        "#SBATCH --qos=high",
    ]


def test_optional_requests_are_left_out_and_the_script_is_complete():
    script = SlurmScheduler().get_submit_script(
        JobTemplate(commands=["echo hi"], max_wallclock_seconds=59, environment={"A": "x y"})
    )
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name=veglia\n")
    assert "#SBATCH --time=00:00:59\n" in script
    assert "--mem" not in script and "--partition" not in script and "--account" not in script
    assert script.endswith("\nexport A='x y'\necho hi\n")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("queue_name", "long queue", "queue_name 'long queue' must be one word"),
        ("stdout_name", "out file.txt", "stdout_name"),
        ("max_memory_kb", -1, "max_memory_kb must be a whole number >= 1"),
        ("max_wallclock_seconds", -5, "max_wallclock_seconds must be a whole number"),
    ],
)
def test_bad_requests_are_refused_with_the_field_named(field, value, message):
    with pytest.raises(SchedulerError, match=message):
        SlurmScheduler().script_header(JobTemplate(commands=["true"], **{field: value}))


# -- submit ---------------------------------------------------------------------------------
def _recorded(command: str) -> tuple[int, str, str]:
    case = COMMANDS[command]
    return case["retval"], case["stdout"], case["stderr"]


def test_submit_output_gives_the_job_id():
    scheduler = SlurmScheduler()
    assert scheduler.submit_command("job.sh") == "sbatch --parsable job.sh"
    assert scheduler.parse_submit_output(*_recorded("sbatch --parsable ok.sh")) == "27"
    assert scheduler.parse_submit_output(0, "4242;cluster2\n", "") == "4242"  # federation


@pytest.mark.parametrize(
    "command",
    [
        "sbatch --parsable -p short --time=5 ok.sh",
        "sbatch --parsable -p nosuch ok.sh",
        "sbatch --parsable --mem=999999999 ok.sh",
        "sbatch --parsable missing.sh",
        "sbatch --parsable --nodes=3 ok.sh",
    ],
)
def test_recorded_refusals_are_permanent_and_carry_sbatchs_message(command):
    retval, stdout, stderr = _recorded(command)
    with pytest.raises(SlurmSubmitError) as caught:
        SlurmScheduler().parse_submit_output(retval, stdout, stderr)
    assert caught.value.permanent is True
    assert caught.value.retval == 1
    assert caught.value.sbatch_message == stderr.strip()
    assert stderr.strip() in str(caught.value) and "fail the same way" in str(caught.value)


@pytest.mark.parametrize(
    ("stderr", "permanent"),
    [  # not recorded here: messages of clusters with accounting, or a busy controller
        ("sbatch: error: Batch job submission failed: Invalid account or account/partition "
         "combination specified", True),
        ("sbatch: error: Batch job submission failed: Invalid qos specification", True),
        ("sbatch: error: Batch job submission failed: Socket timed out on send/recv "
         "operation", False),
        ("sbatch: error: Batch job submission failed: Unable to contact slurm controller "
         "(connect failure)", False),
        ("sbatch: error: Batch job submission failed: Something new", False),
    ],
)  # fmt: skip
def test_refusals_are_classified(stderr, permanent):
    with pytest.raises(SlurmSubmitError) as caught:
        SlurmScheduler().parse_submit_output(1, "", stderr + "\n")
    assert caught.value.permanent is permanent
    assert ("try again later" in str(caught.value)) is not permanent
    assert caught.value.resource_request is False  # no other queue fixes these


def test_sinfo_lines_of_one_partition_are_merged():
    output = "big*|infinite|64000+|3|up\nbig*|infinite|128000|2|up\ndebug|30:00|4000|1|down\n"
    queues = {q.name: q for q in SlurmScheduler().parse_queues_output(0, output, "")}
    assert queues["big"].max_wallclock_seconds is None and queues["big"].default
    assert queues["big"].max_memory_kb == 128000 * 1024 and queues["big"].max_nodes == 5
    assert queues["debug"].max_wallclock_seconds == 1800 and not queues["debug"].available


def test_mem_0_asks_for_all_of_each_nodes_memory():
    header = SlurmScheduler().script_header(JobTemplate(commands=["true"], max_memory_kb=0))
    assert "#SBATCH --mem=0" in header


def test_times_written_for_slurm_follow_sbatchs_rules():
    cases = {"30": 1800, "30:15": 1815, "1:02:03": 3723, "2-3": 2 * 86400 + 3 * 3600}
    cases |= {"2-3:04": 2 * 86400 + 3 * 3600 + 240, "2-03:04:05": 2 * 86400 + 11045}
    assert {text: parse_slurm_time_input(text) for text in cases} == cases
    assert parse_slurm_time_input("soon") is None
    assert parse_duration("30") == 30  # as printed (squeue's MM:SS has a colon)


def test_configuring_is_queued_not_running():
    line = "77|N/A|77|N/A|CONFIGURING|None|short|0:00|10:00|1|boot"
    infos = _parse(f"#veglia squeue rc=0\n{line}\n")
    assert infos["77"].state == JobState.QUEUED and infos["77"].raw_state == "CONFIGURING"


def test_a_listing_line_that_is_not_squeues_is_an_error():
    with pytest.raises(SchedulerError, match="does not understand"):
        _parse("#veglia squeue rc=0\n<html>proxy error</html>\n")


def test_pending_reasons_that_can_never_clear_are_known():
    scheduler = SlurmScheduler()
    assert scheduler.unsatisfiable_reason("DependencyNeverSatisfied")
    assert scheduler.unsatisfiable_reason("PartitionTimeLimit")
    assert scheduler.unsatisfiable_reason("(PartitionDown)")
    assert not scheduler.unsatisfiable_reason("Priority")
    assert not scheduler.unsatisfiable_reason("Resources")


def test_choose_queue_moves_no_further_than_it_must():
    from veglia.engine.calcjob.queues import choose_queue
    from veglia.schedulers import QueueInfo

    queues = [
        QueueInfo("short", 3600, 8 * 1024**2, default=True),
        QueueInfo("long", 7 * 86400, 8 * 1024**2),
        QueueInfo("week", 30 * 86400, 64 * 1024**2),
        QueueInfo("down", 30 * 86400, 256 * 1024**2, available=False),
    ]
    pick = lambda **wanted: getattr(choose_queue(queues, "short", **wanted), "name", None)  # noqa: E731
    assert pick(wallclock_seconds=600, memory_kb=None) == "short"
    assert pick(wallclock_seconds=7200, memory_kb=None) == "long"
    assert pick(wallclock_seconds=600, memory_kb=16 * 1024**2) == "week"
    assert pick(wallclock_seconds=600, memory_kb=128 * 1024**2) is None  # only a down queue


def test_exit_0_without_a_job_id_warns_that_the_job_may_exist():
    with pytest.raises(SchedulerError, match="may have been submitted") as caught:
        SlurmScheduler().parse_submit_output(0, "", "sbatch: warning: odd\n")
    assert not isinstance(caught.value, SlurmSubmitError)


# -- list -----------------------------------------------------------------------------------
def test_recorded_mixed_list_maps_states_exit_codes_and_failures():
    jobs = _parse(_read("joblist_mixed.txt"))
    expected = {  # id: (state, failure, exit_code, reason)
        "21": (JobState.RUNNING, None, None, ""),
        "22": (JobState.QUEUED_HELD, None, None, "JobHeldUser"),
        "24": (JobState.QUEUED, None, None, "Dependency"),
        "23_1": (JobState.RUNNING, None, None, ""),
        "23_2": (JobState.QUEUED, None, None, "Resources"),
        "9": (JobState.DONE, None, 0, ""),
        "10": (JobState.DONE, JobFailure.FAILED, 3, "NonZeroExitCode"),
        "11": (JobState.DONE, JobFailure.FAILED, 137, "JobLaunchFailure"),  # memory kill
        "12": (JobState.DONE, JobFailure.OUT_OF_WALLTIME, 143, "TimeLimit"),
        "13": (JobState.DONE, JobFailure.CANCELLED, 0, "JobHeldUser"),
        "23": (JobState.RUNNING, None, None, ""),  # the array, as sbatch named it
    }
    for job_id, (state, failure, exit_code, reason) in expected.items():
        info = jobs[job_id]
        assert (info.state, info.failure, info.exit_code, info.reason) == (
            state, failure, exit_code, reason,
        ), job_id  # fmt: skip
    assert "999" not in jobs
    assert set(jobs) == set(expected) | {"23_3", "23_4"}
    assert jobs["21"].title == "run ning" and jobs["21"].queue == "long"
    assert jobs["21"].wallclock_seconds == 20 and jobs["12"].wallclock_seconds == 79
    assert jobs["10"].title == "fail three"
    assert jobs["10"].details["UserId"] == "vegliatest(1001)"
    assert jobs["11"].details["TRES"] == "cpu=1,mem=50M,node=1,billing=1"
    assert jobs["11"].details["Mem"] == "50"  # from the -d per-node line
    assert jobs["23"].details["ArrayTasks"] == ["23_2", "23_3", "23_4", "23_1"]


def test_unknown_ids_alone_give_an_empty_list():
    assert _parse(_read("joblist_unknown_only.txt")) == {}


def test_multi_line_scontrol_records_are_parsed():
    text = "#veglia scontrol 12 rc=0\n" + _read("scontrol_multiline_timeout.txt")
    info = _parse(text)["12"]
    assert (info.state, info.failure, info.exit_code) == (
        JobState.DONE, JobFailure.OUT_OF_WALLTIME, 143,
    )  # fmt: skip
    assert info.details["Nodes"] == "vm" and info.details["Power"] == ""
    tasks = _parse("#veglia scontrol 23 rc=0\n" + _read("scontrol_multiline_array_cancelled.txt"))
    assert sorted(tasks) == ["23", "23_1", "23_2", "23_3", "23_4"]
    assert tasks["23"].state is JobState.DONE and tasks["23"].failure is JobFailure.CANCELLED


def test_cgroup_out_of_memory_state():
    # Not recorded here (no cgroup enforcement): the recorded job 11 as a cgroup kill ends.
    line = _read("joblist_mixed.txt").split("JobId=11 ")[1].split("\n")[0]
    line = line.replace("JobState=FAILED Reason=JobLaunchFailure", "JobState=OUT_OF_MEMORY")
    line = line.replace("ExitCode=0:9", "ExitCode=0:125 Reason=OutOfMemory")
    info = _parse(f"#veglia scontrol 11 rc=0\nJobId=11 {line}\n")["11"]
    assert (info.state, info.failure, info.exit_code) == (
        JobState.DONE, JobFailure.OUT_OF_MEMORY, 253,
    )  # fmt: skip


def test_scontrol_values_with_spaces_and_equals_signs():
    record = parse_scontrol_record(
        "JobId=5 JobName=a b=c  UserId=u(1) Dependency=afterok:21(failed) Comment=x y TRES=a=1"
    )
    assert record["JobName"] == "a b=c" and record["UserId"] == "u(1)"
    assert record["Dependency"] == "afterok:21(failed)" and record["Comment"] == "x y"
    assert record["TRES"] == "a=1"


# -- sacct (recorded with slurmdbd on MariaDB: jobs 202-208 of vegliatest) ------------------
# 202 held 60 MiB for 3 s; 203 exited 3; 204 was killed for memory (--mem=50M, OverMemoryKill);
# 205 ran past --time=1; 206 was cancelled while running; 207 is an array of 2; 208 held 1 GiB.
SACCT_EXPECTED = {  # id: (state, failure, exit code, peak memory kB, seconds)
    "202": (JobState.DONE, None, 0, 72488, 3),
    "203": (JobState.DONE, JobFailure.FAILED, 3, None, 0),  # too short to be sampled
    "204": (JobState.DONE, JobFailure.FAILED, 137, 318380, 1),
    "205": (JobState.DONE, JobFailure.OUT_OF_WALLTIME, 143, 4872, 70),
    "206": (JobState.DONE, JobFailure.CANCELLED, 143, 4824, 11),
    "207_1": (JobState.DONE, None, 0, 31516, 2),
    "207_2": (JobState.DONE, None, 0, 31564, 2),
    "208": (JobState.DONE, None, 0, 1059728, 4),
}


def _usage_of(info) -> tuple:
    usage = info.details.get("usage") or {}
    return usage.get("peak_memory_kb"), usage.get("runtime_seconds")


def test_recorded_jobs_slurm_forgot_come_from_sacct_with_their_usage():
    jobs = _parse(_read("joblist_sacct_forgotten.txt"))
    assert set(jobs) == set(SACCT_EXPECTED) | {"207"}
    for job_id, (state, failure, exit_code, peak, seconds) in SACCT_EXPECTED.items():
        info = jobs[job_id]
        assert (info.state, info.failure, info.exit_code) == (state, failure, exit_code), job_id
        assert _usage_of(info) == ((peak, seconds) if peak else (None, None)), job_id
    assert (jobs["204"].raw_state, jobs["206"].raw_state) == ("FAILED", "CANCELLED")
    assert jobs["202"].title == "rec-completed" and jobs["206"].queue == "long"
    assert jobs["205"].wallclock_seconds == 70
    assert jobs["202"].details["usage"] == {
        "peak_memory_kb": 72488,
        "runtime_seconds": 3,
        "cpu_percent": 1.5,  # TotalCPU 00:00.044 over 3 s
        "source": "sacct",
    }
    # The array, as sbatch named it, is done once its tasks are.
    assert (jobs["207"].state, jobs["207"].details["ArrayTasks"]) == (
        JobState.DONE, ["207_1", "207_2"],
    )  # fmt: skip
    # The memory kill (FAILED, signal 9) is out of memory once its stderr is read.
    scheduler = SlurmScheduler()
    assert scheduler.classify_failure(jobs["204"], _read("stderr_memory_kill.txt")) is (
        JobFailure.OUT_OF_MEMORY
    )


def test_recorded_finished_jobs_keep_scontrol_s_word_and_get_sacct_s_usage():
    jobs = _parse(_read("joblist_sacct_finished.txt"))
    assert set(jobs) == set(SACCT_EXPECTED) | {"207"}
    for job_id, (state, failure, exit_code, peak, seconds) in SACCT_EXPECTED.items():
        info = jobs[job_id]
        assert (info.state, info.failure, info.exit_code) == (state, failure, exit_code), job_id
        assert _usage_of(info) == ((peak, seconds) if peak else (None, None)), job_id
    assert jobs["204"].reason == "JobLaunchFailure"  # scontrol's, which sacct does not have
    assert jobs["202"].details["UserId"] == "vegliatest(1001)"


@pytest.mark.parametrize("name", ["joblist_no_accounting.txt", "joblist_sacct_dbd_down.txt"])
def test_without_accounting_forgotten_jobs_are_gone_as_before(name, caplog):
    # No accounting storage; slurmdbd stopped: sacct fails, which is not a failed poll.
    assert _parse(_read(name)) == {}
    if name == "joblist_sacct_dbd_down.txt":
        assert "Problem talking to the database" in caplog.text
    missing = "#veglia squeue rc=0\n\n#veglia scontrol 5 rc=1\nslurm_load_jobs error: Invalid job "
    missing += "id specified\n#veglia sacct rc=127\nbash: line 1: sacct: command not found\n"
    assert _parse(missing) == {}


def test_garbage_from_sacct_is_an_error_not_a_finished_job():
    forgotten = _read("joblist_sacct_forgotten.txt")
    for garbage in ("<html>maintenance</html>", "202|COMPLETED|0:0", "abc|COMPLETED|0:0|3|x||a|b"):
        with pytest.raises(SchedulerError, match="sacct printed a line"):
            _parse(forgotten.replace("202|COMPLETED|0:0|3|00:00.044||short|rec-completed", garbage))


def test_a_forgotten_job_sacct_calls_running_is_not_running():
    # Not recorded here: a record left open when slurmctld lost its state ("runaway").
    text = (
        "#veglia squeue rc=0\n\n#veglia scontrol 77 rc=1\nslurm_load_jobs error: Invalid job "
        "id specified\n#veglia sacct rc=0\n77|RUNNING|0:0|4000|00:00:00||short|x\n"
        "77.batch|RUNNING|0:0|4000|00:00:00|||batch\n"
    )
    assert _parse(text) == {}  # gone, as without accounting: the engine reads its files


def test_an_srun_step_killed_for_memory_makes_the_job_out_of_memory():
    # Not recorded here (no cgroups): a job whose srun step the kernel killed for memory, its
    # script going on to exit 1; the recorded job 203's lines, with such a step added.
    text = _read("joblist_sacct_forgotten.txt").replace(
        "203.batch|FAILED|3:0|0|00:00.002|||batch\n",
        "203.batch|FAILED|1:0|9|00:00.002|5012K||batch\n"
        "203.0|OUT_OF_MEMORY|0:125|8|00:07.100|2097152K||python3\n",
    )
    info = _parse(text)["203"]
    assert (info.failure, info.exit_code) == (JobFailure.OUT_OF_MEMORY, 1)
    assert info.details["usage"]["peak_memory_kb"] == 2097152  # the largest step's


def test_sacct_memory_units_are_read_as_printed():
    from veglia.plugins.schedulers.slurm_accounting import parse_sacct_memory_kb

    megabytes = COMMANDS[next(c for c in COMMANDS if "--units=M" in c)]["stdout"]
    gigabytes = COMMANDS[next(c for c in COMMANDS if "--units=G" in c)]["stdout"]
    rss = {line.split("|")[0]: line.split("|")[5] for line in megabytes.splitlines()}
    assert (rss["202.batch"], rss["208.batch"]) == ("70.79M", "1034.89M")
    assert parse_sacct_memory_kb(rss["202.batch"]) == 72489  # 72488K, rounded by sacct
    assert parse_sacct_memory_kb(rss["208.batch"]) == 1059727
    assert parse_sacct_memory_kb(gigabytes.splitlines()[1].split("|")[1]) == 1059062  # 1.01G
    # The same usage from a sacct whose output is in M (its own --units or a site's default).
    forgotten = _read("joblist_sacct_forgotten.txt").replace("|72488K|", "|70.79M|")
    assert _parse(forgotten)["202"].details["usage"]["peak_memory_kb"] == 72489


def test_a_failing_controller_is_an_error_not_an_empty_list():
    # Not recorded here: what squeue prints when slurmctld is down.
    down = "#veglia squeue rc=1\nslurm_load_jobs error: Unable to contact slurm controller\n"
    with pytest.raises(SchedulerError, match="Unable to contact slurm controller"):
        _parse(down)
    with pytest.raises(SchedulerError, match="on the PATH"):
        _parse("", retval=127, stderr="bash: line 1: squeue: command not found")


def _run_joblist_with_fake_slurm(tmp_path, job_ids, squeue_lines, scontrol=None):
    """The real bash line, with squeue printing ``squeue_lines``, scontrol echoing a
    finished job (or running ``scontrol``, a bash body) and sacct echoing its --jobs."""
    (tmp_path / "squeue").write_text("#!/bin/bash\ncat <<'EOF'\n" + squeue_lines + "EOF\n")
    (tmp_path / "scontrol").write_text(
        "#!/bin/bash\n"
        + (scontrol or 'echo "JobId=${@: -1} JobName=x UserId=u JobState=COMPLETED ExitCode=0:0"\n')
    )
    (tmp_path / "sacct").write_text('#!/bin/bash\necho "asked ${@: -1}"\n')
    for name in ("squeue", "scontrol", "sacct"):
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    scheduler = SlurmScheduler()
    command = scheduler.joblist_command(job_ids)
    stdin = (scheduler.joblist_input(job_ids) or b"").decode()
    result = subprocess.run(
        ["bash", "-c", command], input=stdin, capture_output=True, text=True, env=env
    )
    assert "Argument list too long" not in result.stderr, len(command)
    return result.stdout


def test_scontrol_runs_only_for_ids_squeue_did_not_list(tmp_path):
    squeue_lines = (
        "23_1|23|25|1|RUNNING|None|short|0:20|1:00|1|arr\n"
        "7|7|7|N/A|PENDING|None|short|0:00|1:00|1|x\n"
    )
    stdout = _run_joblist_with_fake_slurm(tmp_path, ["23", "7", "2", "23_2", "25"], squeue_lines)
    called = [line.split()[2] for line in stdout.splitlines() if "scontrol" in line]
    assert called == ["2", "23_2", "25"]  # 23 (array of 23_1) and 7 were listed by squeue


def test_sacct_runs_once_and_only_for_ids_that_finished_or_were_forgotten(tmp_path):
    scontrol = (
        "case ${@: -1} in\n"
        '  3) echo "JobId=3 JobName=x UserId=u JobState=RUNNING Reason=None ExitCode=0:0";;\n'
        '  4) echo "JobId=4 JobName=x UserId=u JobState=CANCELLED Reason=None ExitCode=0:0";;\n'
        '  5) echo "JobId=5 JobName=x UserId=u JobState=COMPLETING Reason=None";;\n'
        '  *) echo "slurm_load_jobs error: Invalid job id specified"; exit 1;;\n'
        "esac\n"
    )
    squeue_lines = "7|7|7|N/A|RUNNING|None|short|0:20|1:00|1|x\n"
    stdout = _run_joblist_with_fake_slurm(
        tmp_path, ["3", "4", "5", "6", "7"], squeue_lines, scontrol
    )
    assert [line for line in stdout.splitlines() if "sacct" in line or "asked" in line] == [
        "#veglia sacct rc=0",
        "asked --jobs=4,6",  # CANCELLED, and the one scontrol forgot; not 3, 5 or 7
    ]
    stdout = _run_joblist_with_fake_slurm(tmp_path, ["3", "5", "7"], squeue_lines, scontrol)
    assert "sacct" not in stdout  # all active: no sacct at all


def test_twenty_thousand_ids_are_listed_in_one_command_and_sacct_takes_1000_a_call(tmp_path):
    """All on one line, 20,000 ids pass the 128 kB one argument may hold: they go on
    standard input and squeue lists the user's jobs; sacct is asked 1,000 at a time."""
    job_ids = [str(100000 + i) for i in range(20000)]
    ended = job_ids[:1005]  # squeue no longer lists them
    squeue_lines = "".join(
        f"{i}|{i}|{i}|N/A|RUNNING|None|short|0:20|1:00|1|x\n" for i in job_ids[1005:]
    )
    stdout = _run_joblist_with_fake_slurm(tmp_path, job_ids, squeue_lines)
    lines = stdout.splitlines()
    assert [line.split()[2] for line in lines if "scontrol" in line] == ended
    asked = [line.removeprefix("asked --jobs=").split(",") for line in lines if "asked" in line]
    assert [len(ids) for ids in asked] == [1000, 5]
    assert [i for ids in asked for i in ids] == ended
    assert len(SlurmScheduler().joblist_command(job_ids)) < 2000


def test_sacct_helpers_read_sacct_s_units():
    from veglia.plugins.schedulers.slurm_accounting import (
        parse_sacct_memory_kb,
        parse_sacct_seconds,
    )

    assert [parse_sacct_memory_kb(t) for t in ("61442K", "60M", "1.50G", "0", "", "12X")] == [
        61442, 61440, 1572864, 0, None, None,
    ]  # fmt: skip
    assert [parse_sacct_seconds(t) for t in ("00:01.250", "01:02:03", "1-00:00:01", "x")] == [
        1.25, 3723.0, 86401.0, None,
    ]  # fmt: skip


def test_bad_job_ids_never_reach_a_command_line():
    scheduler = SlurmScheduler()
    for bad in ("1; rm -rf ~", "12.3", "", "$(id)", "12_"):
        with pytest.raises(SchedulerError, match="not a SLURM job id"):
            scheduler.joblist_command(["1", bad])
        with pytest.raises(SchedulerError, match="not a SLURM job id"):
            scheduler.kill_command(bad)
    assert scheduler.kill_command("14_2") == "scancel 14_2"
    assert "--user=alice" in scheduler.joblist_command(user="alice")


# -- kill and failure classification -----------------------------------------------------------
def test_kill_output():
    scheduler = SlurmScheduler()
    assert scheduler.parse_kill_output(*_recorded("scancel 22"))
    assert scheduler.parse_kill_output(*_recorded("scancel 999"))  # 22.05: rc 0 for unknown ids
    # Not recorded here: older releases' messages for jobs that are gone, and a refusal.
    gone = "scancel: error: Kill job error on job id 9: Job/step already completing or completed"
    assert scheduler.parse_kill_output(1, "", gone)
    assert scheduler.parse_kill_output(
        1, "", "scancel: error: Kill job error on job id 999: Invalid job id specified"
    )
    denied = "scancel: error: Kill job error on job id 7: Access/permission denied"
    assert not scheduler.parse_kill_output(1, "", denied)


def test_classify_failure_reads_slurms_messages():
    scheduler = SlurmScheduler()
    jobs = _parse(_read("joblist_mixed.txt"))
    memory, timeout = _read("stderr_memory_kill.txt"), _read("stderr_timeout.txt")
    assert scheduler.classify_failure(jobs["11"], memory) is JobFailure.OUT_OF_MEMORY
    assert scheduler.classify_failure(None, memory) is JobFailure.OUT_OF_MEMORY
    assert scheduler.classify_failure(jobs["12"], timeout) is JobFailure.OUT_OF_WALLTIME
    assert scheduler.classify_failure(None, timeout) is JobFailure.OUT_OF_WALLTIME
    assert scheduler.classify_failure(jobs["10"], "Traceback...\n") is JobFailure.FAILED
    assert scheduler.classify_failure(jobs["9"], "") is None
    assert scheduler.classify_failure(None, "") is None
    cgroup = (  # not recorded here: the cgroup OOM handler's message
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=88.batch. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler."
    )
    assert scheduler.classify_failure(jobs["9"], cgroup) is JobFailure.OUT_OF_MEMORY


# -- the real SLURM ---------------------------------------------------------------------------
class CountingTransport:
    """A transport that counts the commands it runs (one SSH round trip each)."""

    def __init__(self, transport):
        self.transport = transport
        self.commands: list[str] = []

    def exec_command(self, command, **kwargs):
        self.commands.append(command)
        return self.transport.exec_command(command, **kwargs)


@pytest.fixture
def cluster(slurm, services_env, ssh_transport):
    """(scheduler, transport, submit): submit(name, commands, **template) -> job id, in a
    fresh work dir under the test user's home. Every job is cancelled and the dir removed
    afterwards."""
    scheduler = SlurmScheduler()
    root = f"{services_env['SSH_USER_HOME']}/veglia-test-{uuid.uuid4().hex[:10]}"
    submitted: list[str] = []

    def submit(name, commands, **options):
        workdir = f"{root}/{name}"
        ssh_transport.makedirs(workdir)
        script = scheduler.get_submit_script(JobTemplate(commands=commands, **options))
        ssh_transport.write_bytes(f"{workdir}/job.sh", script.encode())
        command = scheduler.submit_command("job.sh")
        retval, stdout, stderr = ssh_transport.exec_command(command, workdir=workdir, timeout=120)
        job_id = scheduler.parse_submit_output(retval, stdout, stderr)
        submitted.append(job_id)
        return job_id

    submit.root = root
    yield scheduler, ssh_transport, submit
    if submitted:
        ssh_transport.exec_command(f"scancel {' '.join(submitted)}", timeout=60)
    ssh_transport.rmtree(root)


def _wait_done(scheduler, transport, job_ids, seconds):
    """The DONE infos of ``job_ids``, polling every 0.5 s for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        jobs = scheduler.get_jobs(transport, job_ids)
        if all(jobs.get(i) and jobs[i].state is JobState.DONE for i in job_ids):
            return jobs
        assert time.monotonic() < deadline, f"not done after {seconds} s: {jobs}"
        time.sleep(0.5)


def _wait_state(scheduler, transport, job_id, states, seconds):
    deadline = time.monotonic() + seconds
    while (info := scheduler.get_jobs(transport, [job_id]).get(job_id)) is None or (
        info.state not in states
    ):
        assert time.monotonic() < deadline, f"job {job_id} not in {states}: {info}"
        time.sleep(0.5)
    return info


@pytest.mark.services
def test_jobs_that_succeed_and_fail_report_their_exit_codes(cluster):
    scheduler, transport, submit = cluster
    ok = submit("ok", ["echo hello"], job_name="ok job")
    bad = submit("bad", ["echo bye >&2; exit 3"])
    jobs = _wait_done(scheduler, transport, [ok, bad], 60)
    assert (jobs[ok].exit_code, jobs[ok].failure, jobs[ok].title) == (0, None, "ok_job")
    assert (jobs[bad].exit_code, jobs[bad].failure) == (3, JobFailure.FAILED)
    assert transport.read_bytes(f"{submit.root}/ok/_scheduler-stdout.txt") == b"hello\n"
    assert transport.read_bytes(f"{submit.root}/bad/_scheduler-stderr.txt") == b"bye\n"


@pytest.mark.services
def test_a_job_over_its_memory_is_classified_out_of_memory(cluster):
    scheduler, transport, submit = cluster
    job_id = submit(
        "mem",
        ['python3 -c "import time; b = bytearray(300 * 1024 * 1024); time.sleep(30)"'],
        max_memory_kb=50 * 1024,
    )
    info = _wait_done(scheduler, transport, [job_id], 60)[job_id]
    stderr = transport.read_bytes(f"{submit.root}/mem/_scheduler-stderr.txt").decode()
    # jobacct's OverMemoryKill, or the kernel's OOM killer in the job's memory cgroup.
    assert "exceeded memory limit" in stderr or "oom-kill event" in stderr
    assert info.failure in (JobFailure.FAILED, JobFailure.OUT_OF_MEMORY)
    assert scheduler.classify_failure(info, stderr) is JobFailure.OUT_OF_MEMORY


@pytest.mark.services
def test_a_job_over_its_wall_time_is_out_of_walltime(cluster):
    scheduler, transport, submit = cluster
    job_id = submit("slow", ["sleep 300"], max_wallclock_seconds=60)
    info = _wait_done(scheduler, transport, [job_id], 110)[job_id]  # killed 60-90 s in
    assert (info.raw_state, info.failure) == ("TIMEOUT", JobFailure.OUT_OF_WALLTIME)
    stderr = transport.read_bytes(f"{submit.root}/slow/_scheduler-stderr.txt").decode()
    assert scheduler.classify_failure(info, stderr) is JobFailure.OUT_OF_WALLTIME


@pytest.mark.services
def test_a_listed_job_is_killed_and_reported_cancelled(cluster):
    scheduler, transport, submit = cluster
    job_id = submit("kill", ["sleep 300"], queue_name="long", max_wallclock_seconds=300)
    info = _wait_state(scheduler, transport, job_id, {JobState.QUEUED, JobState.RUNNING}, 30)
    assert info.queue == "long"
    assert scheduler.kill(transport, job_id)
    info = _wait_done(scheduler, transport, [job_id], 30)[job_id]
    assert info.failure is JobFailure.CANCELLED
    assert scheduler.kill(transport, job_id)  # already gone: still True


@pytest.mark.services
def test_a_time_limit_over_the_partitions_is_refused_for_good(cluster):
    _, _, submit = cluster
    with pytest.raises(SlurmSubmitError) as caught:
        submit("refused", ["true"], queue_name="short", max_wallclock_seconds=300)
    assert caught.value.permanent is True
    assert "Requested time limit is invalid" in caught.value.sbatch_message
    assert caught.value.resource_request is True  # another partition may take it


@pytest.mark.services
def test_queues_and_their_limits_come_from_sinfo(cluster):
    scheduler, transport, _ = cluster
    queues = {q.name: q for q in scheduler.get_queues(transport)}
    assert {"short", "long", "offline"} <= set(queues)
    assert (queues["short"].max_wallclock_seconds, queues["short"].default) == (60, True)
    assert queues["long"].max_wallclock_seconds == 3600 and queues["long"].max_nodes == 1
    assert queues["long"].max_memory_kb and queues["long"].max_memory_kb > 1024 * 1024
    assert queues["offline"].available is False


@pytest.mark.services
def test_get_jobs_reports_running_and_finished_jobs_in_one_command(cluster):
    scheduler, transport, submit = cluster
    finished = submit("finished", ["true"])
    running = submit("running", ["sleep 120"], queue_name="long", max_wallclock_seconds=300)
    _wait_done(scheduler, transport, [finished], 60)
    _wait_state(scheduler, transport, running, {JobState.RUNNING}, 30)
    counting = CountingTransport(transport)
    jobs = scheduler.get_jobs(counting, [running, finished, "99999999"])
    assert len(counting.commands) == 1
    assert set(jobs) == {running, finished}
    assert jobs[running].state is JobState.RUNNING
    assert (jobs[finished].state, jobs[finished].exit_code) == (JobState.DONE, 0)


@pytest.mark.services
def test_past_the_ids_a_line_holds_the_ids_go_on_stdin_over_ssh(cluster):
    scheduler, transport, submit = cluster
    scheduler.IDS_ON_THE_LINE = 2  # as 15,000 would, without waiting for 15,000 jobs
    ok = submit("ok", ["echo hello"])
    bad = submit("bad", ["exit 3"])
    slow = submit("slow", ["sleep 120"], queue_name="long", max_wallclock_seconds=300)
    counting = CountingTransport(transport)
    _wait_done(scheduler, counting, [ok, bad], 60)
    jobs = scheduler.get_jobs(counting, [ok, bad, slow, "999999"])
    assert counting.commands[-1].startswith("ids=$(cat); ")  # none on the line
    assert (jobs[ok].state, jobs[ok].exit_code) == (JobState.DONE, 0)
    assert (jobs[bad].state, jobs[bad].exit_code) == (JobState.DONE, 3)
    assert jobs[slow].state in (JobState.QUEUED, JobState.RUNNING)
    assert "999999" not in jobs


@pytest.mark.services
def test_finished_jobs_carry_what_slurm_measured(cluster, slurm_accounting):
    scheduler, transport, submit = cluster
    holds_60_mb = "python3 -c 'import time; x = bytearray(60 * 1024**2); time.sleep(3)'"
    job_id = submit("usage", [holds_60_mb])
    running = submit("running", ["sleep 120"], queue_name="long", max_wallclock_seconds=300)
    info = _wait_done(scheduler, transport, [job_id], 60)[job_id]
    # slurmdbd records a job's steps after its end, seconds later on a busy machine: until
    # then sacct has no usage to give, and the job's poll says nothing of it.
    deadline = time.monotonic() + 60
    while "usage" not in info.details:
        assert time.monotonic() < deadline, f"no usage from sacct after 60 s: {info.details}"
        time.sleep(1)
        info = scheduler.get_jobs(transport, [job_id])[job_id]
    usage = info.details["usage"]
    assert usage["source"] == "sacct"
    assert 60 * 1024 <= usage["peak_memory_kb"] < 200 * 1024
    assert 3 <= usage["runtime_seconds"] < 30 and usage["cpu_percent"] >= 0
    info = _wait_state(scheduler, transport, running, {JobState.RUNNING}, 30)
    assert "usage" not in info.details  # measured once a job has finished
