"""The contract every registered scheduler keeps, built-in or from another package.

In the spirit of aiida-core's ``tests/schedulers/test_all.py``: each entry point of
``veglia.schedulers`` is loaded and checked without a batch system. A job missing from a
listing counts as finished, so garbage or a failed listing must be an error, never an
empty list. veglia's test double, ``veglia.testing.FakeScheduler``, keeps the contract too.
"""

from __future__ import annotations

import inspect
import shlex
from importlib.metadata import entry_points

import pytest

from veglia.schedulers import JobResources, JobTemplate, Scheduler, SchedulerError
from veglia.testing import FakeCluster, FakeScheduler

SCHEDULERS = sorted(entry_points(group="veglia.schedulers"), key=lambda ep: ep.name)
#: Schedulers that are no entry point of veglia's, by a name for the test ids.
OTHERS = {"veglia.testing.FakeScheduler": lambda: FakeScheduler(FakeCluster())}


@pytest.fixture(params=[*SCHEDULERS, *OTHERS], ids=[*(ep.name for ep in SCHEDULERS), *OTHERS])
def scheduler(request):
    if isinstance(request.param, str):
        return OTHERS[request.param]()
    return request.param.load()()


def test_a_scheduler_is_a_complete_scheduler_subclass(scheduler):
    cls = type(scheduler)
    assert issubclass(cls, Scheduler)
    assert not inspect.isabstract(cls), f"unimplemented: {sorted(cls.__abstractmethods__)}"
    assert inspect.getdoc(cls) != inspect.getdoc(Scheduler), "document the scheduler class"


def _template(**changes):
    fields = {
        "commands": ["./run.x < in.txt", "echo done"],
        "job_name": "veglia job: 1/2",
        "stdout_name": "_scheduler-stdout.txt",
        "stderr_name": "_scheduler-stderr.txt",
        "resources": JobResources(
            num_machines=2, num_mpiprocs_per_machine=2, num_cores_per_mpiproc=2
        ),
        "max_memory_kb": 3 * 1024 * 1024,
        "max_wallclock_seconds": 3725,
        "queue_name": "short",
        "account": "proj1",
        "qos": "normal",
        "custom_scheduler_commands": "# custom directive",
        "prepend_text": "module load x",
        "append_text": "echo after",
        "environment": {"PLAIN": "v", "TRICKY": "a b'c;$(id)"},
    }
    return JobTemplate(**{**fields, **changes})


def test_a_script_carries_every_template_field_or_names_what_it_refuses(scheduler):
    try:
        script = scheduler.get_submit_script(_template())
    except SchedulerError as exc:  # a request this batch system does not have
        assert any(name in str(exc).lower() for name in ("qos", "queue", "account")), exc
        script = scheduler.get_submit_script(_template(queue_name=None, account=None, qos=None))
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for text in ("./run.x < in.txt", "echo done", "module load x", "echo after"):
        assert text in lines
    assert "# custom directive" in lines
    assert lines.index("module load x") < lines.index("./run.x < in.txt")
    assert lines.index("echo done") < lines.index("echo after")
    assert f"export TRICKY={shlex.quote('a b' + chr(39) + 'c;$(id)')}" in lines
    assert "export PLAIN=v" in lines


def test_an_environment_name_that_is_no_name_is_refused(scheduler):
    with pytest.raises(SchedulerError, match="not an environment variable name"):
        scheduler.get_submit_script(
            _template(queue_name=None, account=None, qos=None, environment={"A=1; id": "x"})
        )


def test_a_kill_command_names_the_job(scheduler):
    assert "4242" in scheduler.kill_command("4242")


def test_an_empty_listing_is_no_job(scheduler):
    listing = type(scheduler).example_empty_listing
    if listing is None:
        pytest.fail(
            f"{type(scheduler).__name__} declares no example_empty_listing: say what its list "
            "command prints when it lists no job, so this contract can check it"
        )
    assert scheduler.parse_joblist_output(*listing) == []


@pytest.mark.parametrize(
    "garbage", ["aaa", "aaa\nbbb ccc\n", "<html><body>502 Bad Gateway</body></html>"]
)
def test_a_garbage_listing_is_an_error_not_an_empty_list(scheduler, garbage):
    with pytest.raises(SchedulerError):
        scheduler.parse_joblist_output(0, garbage, "")


def test_a_failed_listing_is_an_error(scheduler):
    with pytest.raises(SchedulerError):
        scheduler.parse_joblist_output(1, "", "error: Unable to contact the controller\n")
