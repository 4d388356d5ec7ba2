"""The helpers the batch schedulers share (``veglia.plugins.schedulers.directives``), and the
rule that a scheduler imports them from there, never from another scheduler."""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest

from veglia.plugins.schedulers.directives import (
    BatchSubmitError,
    array_summaries,
    check_directive_value,
    check_job_id,
    classify_by_messages,
    cores_per_machine,
    format_hms,
    kill_accepted,
    memory_mb,
    no_qos_error,
    no_whole_node_memory_error,
    parse_duration,
    positive_int,
    safe_job_name,
)
from veglia.plugins.schedulers.lsf import LsfSubmitError
from veglia.plugins.schedulers.slurm import SlurmSubmitError
from veglia.schedulers import (
    JobFailure,
    JobInfo,
    JobResources,
    JobState,
    SchedulerError,
    SchedulerSubmitError,
)

SCHEDULERS = Path(__file__).resolve().parent.parent / "plugins" / "schedulers"


def test_no_scheduler_imports_another_scheduler():
    """Shared code lives in directives; a scheduler's modules (``slurm``, and
    ``slurm_accounting``... named after it) are its own."""
    modules = {path.stem for path in SCHEDULERS.glob("*.py")} - {"__init__"}
    crossings = []
    for path in sorted(SCHEDULERS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[:3] == ["veglia", "plugins", "schedulers"] and len(parts) > 3:
                    other = parts[3]
                    owner, own = other.partition("_")[0], path.stem.partition("_")[0]
                    if other in modules and other != "directives" and owner != own:
                        crossings.append(f"{path.name} imports {name}")
    assert not crossings, "\n".join(crossings)


def test_times():
    assert format_hms(0) == "00:00:00"
    assert format_hms(90000) == "25:00:00"
    assert [parse_duration(t) for t in ("0:00", "01:19", "00:01:19", "1-02:03:04", "N/A")] == [
        0, 79, 79, 93784, None,
    ]  # fmt: skip
    assert parse_duration("30") == 30


def test_memory_and_cores():
    assert [memory_mb(kb) for kb in (1, 1024, 1025, 51200)] == [1, 1, 2, 50]
    assert [memory_mb(kb, per=4) for kb in (1, 4096, 4097, 3 * 1024 * 1024)] == [1, 1, 2, 768]
    resources = JobResources(num_machines=3, num_mpiprocs_per_machine=2, num_cores_per_mpiproc=4)
    assert cores_per_machine(resources) == 8


def test_names_values_and_ids():
    assert safe_job_name("  ") == "veglia"
    assert safe_job_name("7 up", max_length=3, letter_first=True) == "j7_"
    assert safe_job_name("veglia job: 1/2") == "veglia_job__1_2"
    assert check_directive_value("queue_name", "short") == "short"
    with pytest.raises(SchedulerError, match="queue_name 'a b' must be one word"):
        check_directive_value("queue_name", "a b")
    assert positive_int("n", 3) == 3
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(SchedulerError, match="n must be a whole number >= 1"):
            positive_int("n", bad)
    assert check_job_id("12", re.compile(r"\d+"), "a job id (digits)") == "12"
    for bad in ("12; rm -rf ~", "", 12):
        with pytest.raises(SchedulerError, match="is not a job id \\(digits\\)\\."):
            check_job_id(bad, re.compile(r"\d+"), "a job id (digits)")


def test_requests_a_batch_system_lacks_are_refused_with_the_alternatives():
    assert str(no_qos_error("PBS Pro")) == (
        "PBS Pro has no QOS; remove qos, or use queue_name or custom_scheduler_commands for "
        "what it meant."
    )
    assert "use queue_name or an account for" in str(no_qos_error("X", "queue_name or an account"))
    assert "which SGE has no request for" in str(no_whole_node_memory_error("SGE"))


def test_a_kill_of_a_gone_job_is_accepted_and_a_refusal_is_logged(caplog):
    gone = re.compile("Unknown Job Id")
    logger = logging.getLogger("veglia.test.kill")
    assert kill_accepted("qdel", 0, "", "", gone=gone, logger=logger)
    assert kill_accepted("qdel", 35, "", "qdel: Unknown Job Id 7\n", gone=gone, logger=logger)
    with caplog.at_level(logging.WARNING, logger="veglia.test.kill"):
        assert not kill_accepted("qdel", 1, "", "Unauthorized\n", gone=gone, logger=logger)
    assert "qdel failed (exit 1): Unauthorized" in caplog.text


def test_kill_messages_in_the_jobs_output_win_over_the_listing():
    oom, timeout = re.compile("out of memory"), re.compile("time limit")
    info = JobInfo("1", JobState.DONE, failure=JobFailure.CANCELLED)
    assert classify_by_messages(info, "x out of memory", out_of_memory=oom) == (
        JobFailure.OUT_OF_MEMORY
    )
    assert classify_by_messages(info, "time limit", out_of_memory=oom, out_of_walltime=timeout) == (
        JobFailure.OUT_OF_WALLTIME
    )
    assert classify_by_messages(info, "time limit", out_of_memory=oom) is JobFailure.CANCELLED
    assert classify_by_messages(None, "", out_of_memory=oom) is None


def test_array_tasks_are_summarised_under_the_arrays_id():
    tasks = [
        JobInfo("5_1", JobState.DONE, exit_code=0, details={"ArrayJobId": "5"}),
        JobInfo("5_2", JobState.RUNNING, details={"ArrayJobId": "5"}),
    ]
    (summary,) = array_summaries(tasks)
    assert (summary.job_id, summary.state, summary.raw_state) == ("5", JobState.RUNNING, "ARRAY")
    tasks[1] = JobInfo(
        "5_2", JobState.DONE, exit_code=3, failure=JobFailure.FAILED, details={"ArrayJobId": "5"}
    )
    (summary,) = array_summaries(tasks)
    assert (summary.state, summary.exit_code, summary.failure) == (
        JobState.DONE,
        3,
        JobFailure.FAILED,
    )


class _ToySubmitError(BatchSubmitError):
    command = "toysub"
    permanent_messages = re.compile("no such queue|too many cores")
    transient_messages = re.compile("try again")
    resource_messages = re.compile("too many cores")
    fix_advice = "Fix it."
    retry_advice = "Wait."


@pytest.mark.parametrize(
    ("output", "permanent", "resource_request"),
    [
        ("no such queue", True, False),
        ("too many cores", True, True),
        ("too many cores; try again", False, False),  # a transient message wins
        ("something new", False, False),  # unknown: retrying is harmless
    ],
)
def test_submit_refusals_are_classified_by_the_commands_messages(
    output, permanent, resource_request
):
    error = _ToySubmitError.from_output(2, output)
    assert isinstance(error, _ToySubmitError) and isinstance(error, SchedulerSubmitError)
    assert (error.permanent, error.resource_request) == (permanent, resource_request)
    assert (error.output, error.retval) == (output, 2)
    advice = "Fix it." if permanent else "Wait."
    assert str(error) == f"toysub refused the job (exit 2): {output}\n{advice}"


def test_slurm_and_lsf_submit_errors_share_the_base():
    slurm = SlurmSubmitError.from_output(1, "sbatch: error: invalid partition specified: x")
    lsf = LsfSubmitError.from_output(255, "No such queue. Job not submitted.")
    for error, message in ((slurm, slurm.sbatch_message), (lsf, lsf.bsub_message)):
        assert isinstance(error, BatchSubmitError) and error.permanent
        assert message == error.output
    assert str(slurm).startswith("sbatch refused the job (exit 1): ")
    assert str(lsf).startswith("bsub refused the job (exit 255): ")
