"""core.pbspro and core.sge: script headers and parsers, on outputs under
tests/data/schedulers/{pbspro,sge}/. There is no PBS or Grid Engine here: those files are
written from the real formats (qstat -f wraps long values at 78 columns onto tab-led lines;
qstat -xml lists running jobs under queue_info and pending ones under job_info), with
their edge cases: held, error-state and array jobs, and jobs killed for wall time and memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veglia.plugins.schedulers.pbspro import PbsProScheduler, TorqueScheduler, parse_qstat_full
from veglia.plugins.schedulers.sge import SgeScheduler
from veglia.schedulers import JobFailure, JobResources, JobState, JobTemplate, SchedulerError
from veglia.testing import FakeTransport
from veglia_fixtures.fake_batch import fake_batch_command

DATA = Path(__file__).parent / "data" / "schedulers"


def _commands(system: str) -> dict[str, tuple[int, str, str]]:
    cases = json.loads((DATA / system / "commands.json").read_text())["commands"]
    return {c["command"]: (c["retval"], c["stdout"], c["stderr"]) for c in cases}


PBS = _commands("pbspro")
SGE = _commands("sge")
TEMPLATE = {
    "commands": ["mpirun ./pw.x"],
    "job_name": "relax Si@8",
    "resources": JobResources(num_machines=2, num_mpiprocs_per_machine=4, num_cores_per_mpiproc=2),
    "max_memory_kb": 4 * 1024 * 1024,
    "max_wallclock_seconds": 90061,
    "queue_name": "workq",
    "account": "proj7",
}


# -- PBS Pro --------------------------------------------------------------------------------
def test_pbs_script_header():
    assert PbsProScheduler().script_header(JobTemplate(**TEMPLATE)) == [
        "#PBS -N relax_Si_8",
        "#PBS -o _scheduler-stdout.txt",
        "#PBS -e _scheduler-stderr.txt",
        "#PBS -r n",
        "#PBS -l select=2:ncpus=8:mpiprocs=4:ompthreads=2:mem=4096mb",
        "#PBS -l walltime=25:01:01",
        "#PBS -q workq",
        "#PBS -A proj7",
    ]


def test_pbs_script_changes_to_the_submit_dir_after_every_directive():
    script = PbsProScheduler().get_submit_script(
        JobTemplate(
            commands=["./run"],
            job_name="7up",
            custom_scheduler_commands="#PBS -m abe\n\n#PBS -M a@b.org",
            environment={"X": "1"},
        )
    )
    lines = script.splitlines()
    assert lines[1] == "#PBS -N j7up"
    assert lines.index('cd "$PBS_O_WORKDIR" || exit 1') == lines.index("#PBS -M a@b.org") + 2
    assert lines[-2:] == ["export X=1", "./run"]
    with pytest.raises(SchedulerError, match="no QOS"):
        PbsProScheduler().script_header(JobTemplate(commands=["true"], qos="high"))


def test_pbs_qstat_full_unwraps_long_values():
    records = parse_qstat_full((DATA / "pbspro" / "qstat_f_x.txt").read_text())
    assert len(records) == 12
    first = records[0]
    assert first["Error_Path"].endswith("/3f/2a/_scheduler-stderr.txt")
    assert "PBS_O_WORKDIR=/scratch/alice/veglia/3f/2a," in first["Variable_List"]
    assert first["comment"].endswith("(node012:ncpus=4:mem=2097152kb)")


def test_pbs_job_list_states_exit_codes_and_failures():
    stdout = (DATA / "pbspro" / "qstat_f_x.txt").read_text()
    stderr = (DATA / "pbspro" / "qstat_f_x.stderr").read_text()  # an expired id
    jobs = {i.job_id: i for i in PbsProScheduler().parse_joblist_output(153, stdout, stderr)}
    expected = {  # id: (state, failure, exit_code)
        "4097.pbs01": (JobState.RUNNING, None, None),
        "4098.pbs01": (JobState.QUEUED, None, None),
        "4099.pbs01": (JobState.QUEUED_HELD, None, None),
        "4100[].pbs01": (JobState.RUNNING, None, None),
        "4100[3].pbs01": (JobState.DONE, None, 0),
        "4090.pbs01": (JobState.DONE, None, 0),
        "4091.pbs01": (JobState.DONE, JobFailure.FAILED, 3),
        "4092.pbs01": (JobState.DONE, JobFailure.OUT_OF_WALLTIME, -29),
        "4093.pbs01": (JobState.DONE, JobFailure.OUT_OF_MEMORY, -27),
        "4094.pbs01": (JobState.DONE, JobFailure.OUT_OF_WALLTIME, 143),  # SIGTERM past limit
        "4095.pbs01": (JobState.DONE, JobFailure.CANCELLED, 143),  # qdel'd while running
        "4096.pbs01": (JobState.DONE, JobFailure.CANCELLED, None),  # deleted while queued
    }
    assert {k: (i.state, i.failure, i.exit_code) for k, i in jobs.items()} == expected
    queued = jobs["4098.pbs01"]
    assert queued.reason.startswith("Not Running: Insufficient amount of resource: ncpus")
    assert (queued.queue, queued.title) == ("large", "scf-big")
    assert jobs["4097.pbs01"].wallclock_seconds == 42 * 60 + 10
    assert jobs["4100[].pbs01"].details["array_state_count"].startswith("Queued:5 Running:2")


def test_pbs_errors_that_are_not_unknown_ids_fail_the_query():
    with pytest.raises(SchedulerError, match="cannot connect to server pbs01"):
        PbsProScheduler().parse_joblist_output(*PBS["qstat -f -x 4097.pbs01"])


def test_pbs_commands_quote_array_ids_and_refuse_bad_ones():
    scheduler = PbsProScheduler()
    assert scheduler.joblist_command(["4097.pbs01", "4100[].pbs01"]) == (
        "qstat -f -x 4097.pbs01 '4100[].pbs01'"
    )
    assert "qselect -x -u alice" in scheduler.joblist_command(user="alice")
    assert scheduler.kill_command("4100[3].pbs01") == "qdel '4100[3].pbs01'"
    for bad in ("4097;reboot", "abc", "4097.pbs01 4098"):
        with pytest.raises(SchedulerError, match="not a PBS job id"):
            scheduler.kill_command(bad)


def test_pbs_past_the_ids_a_line_holds_they_go_on_stdin():
    scheduler = PbsProScheduler()
    job_ids = [f"{100000 + i}.pbs01" for i in range(20000)] + ["4100[].pbs01"]
    command = scheduler.joblist_command(job_ids)
    assert command == "xargs -n 1000 qstat -f -x"  # no id on the line
    assert scheduler.joblist_input(job_ids) == "".join(f"{i}\n" for i in job_ids).encode()
    assert scheduler.joblist_input(job_ids[:1000]) is None  # up to 1,000: on the line
    assert scheduler.joblist_command(job_ids[:1000]).startswith("qstat -f -x 100000.pbs01 ")
    with pytest.raises(SchedulerError, match="not a PBS job id"):
        scheduler.joblist_input([*job_ids, "1;reboot"])


def _fake_qstat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, known: dict[str, str]) -> Path:
    """A ``qstat -f -x ID...`` printing the recorded record of its kind for each id it knows
    (``known``: id -> a recorded job's id) and, as PBS Pro does, "Unknown Job Id" on stderr
    and exit 153 for the others; each call's id count goes to ``calls.log``."""
    recorded = (DATA / "pbspro" / "qstat_f_x.txt").read_text().strip().split("\n\n")
    blocks = {block.splitlines()[0].removeprefix("Job Id: "): block for block in recorded}
    (tmp_path / "known.json").write_text(json.dumps(known))
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    return fake_batch_command(
        tmp_path,
        monkeypatch,
        "qstat",
        ["-f", "-x"],
        "known = json.loads((here / 'known.json').read_text())\n"
        "blocks = json.loads((here / 'blocks.json').read_text())\n"
        "for i in ids:\n"
        "    if i in known:\n"
        "        kind = known[i]\n"
        "        print(blocks[kind].replace(f'Job Id: {kind}', f'Job Id: {i}', 1) + '\\n')\n"
        "    else:\n"
        "        print(f'qstat: Unknown Job Id {i}', file=sys.stderr)\n"
        "sys.exit(153 if set(ids) - set(known) else 0)\n",
    )


def test_pbs_a_poll_of_20000_ids_reads_as_on_the_line(tmp_path, monkeypatch):
    """20,000 ids on stdin, qstat 1,000 a call: each id's record parsed as when the ids
    are on the line, and the ids qstat does not know (expired history) absent as then."""
    kinds = ["4097.pbs01", "4098.pbs01", "4090.pbs01", "4093.pbs01", "4095.pbs01"]
    job_ids = [f"{100000 + i}.pbs01" for i in range(20000)]
    unknown = set(job_ids[7::10])
    known = {i: kinds[n % len(kinds)] for n, i in enumerate(job_ids) if i not in unknown}
    calls = _fake_qstat(tmp_path, monkeypatch, known)
    scheduler = PbsProScheduler()
    with FakeTransport(root=str(tmp_path / "computer")) as transport:
        jobs = scheduler.get_jobs(transport, job_ids)
        assert len(transport.commands) == 1 and len(transport.commands[0]) < 100
        assert [int(n) for n in calls.read_text().split()] == [1000] * 20
        calls.unlink()
        on_the_line = scheduler.get_jobs(transport, job_ids[:1000])
    assert [int(n) for n in calls.read_text().split()] == [1000]
    assert set(jobs) == set(known)  # the unknown ids are absent, as on the line
    assert {i: jobs[i] for i in on_the_line} == on_the_line
    recorded = {
        i.job_id: i
        for i in scheduler.parse_joblist_output(
            0, (DATA / "pbspro" / "qstat_f_x.txt").read_text(), ""
        )
    }
    expected = {i: recorded[kind] for i, kind in known.items()}
    assert {i: (j.state, j.failure, j.exit_code, j.title) for i, j in expected.items()} == {
        i: (jobs[i].state, jobs[i].failure, jobs[i].exit_code, jobs[i].title) for i in known
    }
    assert (jobs["100093.pbs01"].state, jobs["100093.pbs01"].failure) == (
        JobState.DONE,
        JobFailure.OUT_OF_MEMORY,
    )
    # Through xargs, a qstat that fails is still a failed poll, never a short list.
    (tmp_path / "qstat").write_text(
        "#!/bin/bash\necho 'qstat: cannot connect to server pbs01 (errno=111)' >&2; exit 255\n"
    )
    transport = FakeTransport(root=str(tmp_path / "computer"))
    with transport, pytest.raises(SchedulerError, match="cannot connect to server pbs01"):
        scheduler.get_jobs(transport, job_ids)


def test_pbs_submit_and_kill_outputs():
    scheduler = PbsProScheduler()
    assert scheduler.submit_command("job.sh") == "qsub job.sh"
    assert scheduler.parse_submit_output(*PBS["qsub job.sh"]) == "4101.pbs01"
    for refused in ("qsub -q nosuch job.sh", "qsub -l walltime=999:00:00 job.sh"):
        with pytest.raises(SchedulerError, match=PBS[refused][2].strip()):
            scheduler.parse_submit_output(*PBS[refused])
    assert scheduler.parse_kill_output(*PBS["qdel 4097.pbs01"])
    assert scheduler.parse_kill_output(*PBS["qdel 3999.pbs01"])  # gone
    assert scheduler.parse_kill_output(*PBS["qdel 4090.pbs01"])  # finished
    assert not scheduler.parse_kill_output(*PBS["qdel 4001.pbs01"])


def test_pbs_classify_failure_reads_the_kill_line():
    scheduler = PbsProScheduler()
    walltime = (DATA / "pbspro" / "stderr_walltime_kill.txt").read_text()
    memory = (DATA / "pbspro" / "stderr_memory_kill.txt").read_text()
    assert scheduler.classify_failure(None, walltime) is JobFailure.OUT_OF_WALLTIME
    assert scheduler.classify_failure(None, memory) is JobFailure.OUT_OF_MEMORY
    assert scheduler.classify_failure(None, "") is None


# -- Grid Engine ----------------------------------------------------------------------------
def test_sge_script_header():
    assert SgeScheduler(parallel_environment="mpi").script_header(JobTemplate(**TEMPLATE)) == [
        "#$ -N relax_Si_8",
        "#$ -o _scheduler-stdout.txt",
        "#$ -e _scheduler-stderr.txt",
        "#$ -cwd",
        "#$ -S /bin/bash",
        "#$ -r n",
        "#$ -pe mpi 16",
        "#$ -l h_rt=25:01:01",
        "#$ -l h_vmem=512M",  # 4 GB per machine over its 8 slots
        "#$ -q workq",
        "#$ -P proj7",
    ]


def test_sge_serial_job_asks_for_no_parallel_environment():
    header = SgeScheduler().script_header(
        JobTemplate(commands=["true"], job_name="", shebang="#!/usr/bin/env bash")
    )
    assert header[0] == "#$ -N veglia"
    assert "#$ -S /bin/bash" in header
    assert not [line for line in header if "-pe" in line or "-l" in line]
    assert SgeScheduler.parallel_environment == "smp"
    two_cores = JobTemplate(commands=["true"], resources=JobResources(num_cores_per_mpiproc=2))
    assert "#$ -pe smp 2" in SgeScheduler().script_header(two_cores)
    with pytest.raises(SchedulerError, match="parallel_environment"):
        SgeScheduler(parallel_environment="my pe")


def test_sge_job_list_states_and_arrays():
    stdout = (DATA / "sge" / "qstat_xml_mixed.xml").read_text()
    jobs = {i.job_id: i for i in SgeScheduler().parse_joblist_output(0, stdout, "")}
    expected = {
        "5001": JobState.RUNNING,
        "5005": JobState.SUSPENDED,
        "5006": JobState.RUNNING,  # being deleted
        "5007.1": JobState.RUNNING,
        "5007.2": JobState.RUNNING,
        "5002": JobState.QUEUED,
        "5003": JobState.QUEUED_HELD,
        "5004": JobState.QUEUED_HELD,  # error state: waits for qmod -cj
        "5007.3-10:1": JobState.QUEUED,
        "5008": JobState.QUEUED,  # rescheduled
        "5007": JobState.RUNNING,  # the array as qsub named it
    }
    assert {k: i.state for k, i in jobs.items()} == expected
    assert (jobs["5001"].queue, jobs["5001"].title) == ("all.q", "veglia-3f2a9c01")
    assert jobs["5002"].queue is None
    assert "qmod -cj 5004" in jobs["5004"].reason
    assert jobs["5001"].details["slots"] == "4"
    assert jobs["5007"].details["ArrayTasks"] == ["5007.1", "5007.2", "5007.3-10:1"]
    empty = (DATA / "sge" / "qstat_xml_empty.xml").read_text()
    assert SgeScheduler().parse_joblist_output(0, empty, "") == []


def test_sge_query_errors():
    scheduler = SgeScheduler()
    with pytest.raises(SchedulerError, match="unable to send message to qmaster"):
        scheduler.parse_joblist_output(*SGE["qstat -xml -u alice"])
    with pytest.raises(SchedulerError, match="not XML"):
        scheduler.parse_joblist_output(0, "<job_info><queue_info>", "")
    assert scheduler.joblist_command(["5001"]) == 'qstat -xml -u "$(whoami)"'
    assert scheduler.joblist_command(user="bob") == "qstat -xml -u bob"
    with pytest.raises(SchedulerError, match="not a Grid Engine job id"):
        scheduler.joblist_command(["5001", "5001; id"])


def test_sge_submit_kill_and_failures():
    scheduler = SgeScheduler()
    assert scheduler.submit_command("job.sh") == "qsub -terse job.sh"
    assert scheduler.parse_submit_output(*SGE["qsub -terse job.sh"]) == "5010"
    assert scheduler.parse_submit_output(*SGE["qsub -terse -t 1-10 job.sh"]) == "5011"
    with pytest.raises(SchedulerError, match='unknown queue "nosuch"'):
        scheduler.parse_submit_output(*SGE["qsub -terse -q nosuch job.sh"])
    assert scheduler.kill_command("5001") == "qdel 5001"
    assert scheduler.parse_kill_output(*SGE["qdel 5001"])
    assert scheduler.parse_kill_output(*SGE["qdel 4999"])  # gone
    assert not scheduler.parse_kill_output(*SGE["qdel 4001"])
    assert scheduler.classify_failure(None, "std::bad_alloc\n") is JobFailure.OUT_OF_MEMORY
    assert scheduler.classify_failure(None, "MemoryError\n") is JobFailure.OUT_OF_MEMORY
    assert scheduler.classify_failure(None, "all fine\n") is None


# -- continuation lines, Torque, malformed output --------------------------------------------
def test_qstat_continuation_lines_indented_with_spaces_or_not_at_all_are_kept():
    text = (
        "Job Id: 12.server\n"
        "    job_state = Q\n"
        "    Variable_List = PBS_O_HOME=/home/u,PBS_O_LANG=C,\n"
        "        PBS_O_LOGNAME=u,PBS_O_PATH=/usr/bin\n"
        "    comment = first line\n"
        "second line of the comment\n"
        "    queue = workq\n"
    )
    (record,) = parse_qstat_full(text)
    assert record["Variable_List"].endswith("PBS_O_LANG=C,PBS_O_LOGNAME=u,PBS_O_PATH=/usr/bin")
    assert record["comment"] == "first line\nsecond line of the comment"
    assert record["queue"] == "workq"


def test_torques_completed_jobs_keep_their_exit_code():
    text = (
        "Job Id: 40.torque.example.org\n"
        "    Job_Name = relax\n"
        "    job_state = C\n"
        "    queue = batch\n"
        "    exit_status = 3\n"
        "\n"
        "Job Id: 41.torque.example.org\n"
        "    job_state = C\n"
        "    exit_status = 0\n"
    )
    infos = {i.job_id: i for i in TorqueScheduler().parse_joblist_output(0, text, "")}
    assert infos["40.torque.example.org"].state == JobState.DONE
    assert infos["40.torque.example.org"].exit_code == 3
    assert infos["40.torque.example.org"].failure == JobFailure.FAILED
    assert infos["41.torque.example.org"].exit_code == 0
    assert infos["41.torque.example.org"].failure is None


def test_torque_asks_for_nodes_and_ppn_and_the_whole_jobs_memory():
    header = TorqueScheduler().script_header(JobTemplate(**TEMPLATE))
    assert "#PBS -l nodes=2:ppn=8" in header
    assert "#PBS -l mem=8192mb" in header  # 4 GB per machine, two machines
    assert "#PBS -l walltime=25:01:01" in header


def test_sge_xml_without_queue_info_is_an_error():
    with pytest.raises(SchedulerError, match="queue_info"):
        SgeScheduler().parse_joblist_output(0, "<job_info><job_info/></job_info>", "")


@pytest.mark.parametrize("scheduler", [PbsProScheduler(), SgeScheduler()])
def test_mem_0_is_refused_where_there_is_no_such_request(scheduler):
    with pytest.raises(SchedulerError, match="leave it unset"):
        scheduler.script_header(JobTemplate(commands=["true"], max_memory_kb=0))
