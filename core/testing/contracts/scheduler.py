"""The scheduler contract, checked without a batch system."""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import EntryPoint
from typing import Any, ClassVar

import pytest

from veglia.schedulers import JobResources, JobTemplate, Scheduler, SchedulerError
from veglia.testing.contracts._select import select


def _template(**changes: Any) -> JobTemplate:
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


def _maker(entry_point: EntryPoint) -> Callable[[], Scheduler]:
    """A scheduler of the entry point's class, made when the test asks for it."""
    return lambda: entry_point.load()()


class SchedulerContract:
    """What the engine relies on from a ``veglia.schedulers`` entry point.

    In the spirit of aiida-core's ``tests/schedulers/test_all.py``, each named scheduler is
    made with no arguments and checked without a batch system: a complete, documented
    :class:`~veglia.schedulers.Scheduler` subclass whose script carries every template
    field (or names what it refuses), quotes the environment, and whose listing parser
    reads its own empty listing as no job. A job missing from a listing counts as
    finished, so garbage or a failed listing must raise ``SchedulerError``, never give an
    empty list. Subclass it in a test module::

        class TestMyScheduler(SchedulerContract):
            entry_points = "mylab.*"
    """

    #: A name or fnmatch pattern of the ``veglia.schedulers`` entry points to check, or a
    #: tuple of them.
    entry_points: ClassVar[str | Sequence[str]] = ()
    #: Schedulers that are no entry point: a name for the test ids, and how to make one.
    others: ClassVar[Mapping[str, Callable[[], Scheduler]]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "scheduler" not in metafunc.fixturenames:
            return
        owner = type(self).__name__
        found: dict[str, Callable[[], Scheduler]] = {
            ep.name: _maker(ep) for ep in select("veglia.schedulers", self.entry_points, owner)
        }
        found.update(self.others)
        if not found:
            pytest.fail(f"{owner}: set entry_points to the schedulers to check", pytrace=False)
        metafunc.parametrize("scheduler", list(found.values()), ids=list(found), indirect=True)

    @pytest.fixture
    def scheduler(self, request: pytest.FixtureRequest) -> Scheduler:
        made: Scheduler = request.param()
        return made

    def test_a_scheduler_is_a_complete_scheduler_subclass(self, scheduler: Scheduler) -> None:
        cls = type(scheduler)
        assert issubclass(cls, Scheduler), f"{cls!r} is no veglia.schedulers.Scheduler"
        assert not inspect.isabstract(cls), f"unimplemented: {sorted(cls.__abstractmethods__)}"
        assert inspect.getdoc(cls) != inspect.getdoc(Scheduler), "document the scheduler class"

    def test_a_script_carries_every_template_field_or_names_what_it_refuses(
        self, scheduler: Scheduler
    ) -> None:
        try:
            script = scheduler.get_submit_script(_template())
        except SchedulerError as exc:  # a request this batch system does not have
            assert any(name in str(exc).lower() for name in ("qos", "queue", "account")), exc
            script = scheduler.get_submit_script(_template(queue_name=None, account=None, qos=None))
        lines = script.splitlines()
        assert lines[0] == "#!/bin/bash"
        for text in ("./run.x < in.txt", "echo done", "module load x", "echo after"):
            assert text in lines, f"the script lacks the line {text!r}"
        assert "# custom directive" in lines
        assert lines.index("module load x") < lines.index("./run.x < in.txt")
        assert lines.index("echo done") < lines.index("echo after")
        assert f"export TRICKY={shlex.quote('a b' + chr(39) + 'c;$(id)')}" in lines, (
            "quote environment values with shlex.quote"
        )
        assert "export PLAIN=v" in lines

    def test_an_environment_name_that_is_no_name_is_refused(self, scheduler: Scheduler) -> None:
        with pytest.raises(SchedulerError, match="not an environment variable name"):
            scheduler.get_submit_script(
                _template(queue_name=None, account=None, qos=None, environment={"A=1; id": "x"})
            )

    def test_a_kill_command_names_the_job(self, scheduler: Scheduler) -> None:
        assert "4242" in scheduler.kill_command("4242")

    def test_an_empty_listing_is_no_job(self, scheduler: Scheduler) -> None:
        listing = type(scheduler).example_empty_listing
        if listing is None:
            pytest.fail(
                f"{type(scheduler).__name__} declares no example_empty_listing: say what its "
                "list command prints when it lists no job, so this contract can check it"
            )
        assert scheduler.parse_joblist_output(*listing) == []

    @pytest.mark.parametrize(
        "listing",
        [
            (0, "aaa", ""),
            (0, "aaa\nbbb ccc\n", ""),
            (0, "<html><body>502 Bad Gateway</body></html>", ""),
            (1, "", "error: Unable to contact the controller\n"),
        ],
        ids=["garbage", "garbage-lines", "html", "failed"],
    )
    def test_a_garbage_or_failed_listing_is_an_error_not_an_empty_list(
        self, scheduler: Scheduler, listing: tuple[int, str, str]
    ) -> None:
        try:
            jobs = scheduler.parse_joblist_output(*listing)
        except SchedulerError:
            return
        pytest.fail(
            f"{type(scheduler).__name__}.parse_joblist_output{listing!r} returned {jobs!r}: "
            "a job missing from a listing counts as finished, so raise SchedulerError on "
            "output it cannot read or a failed command"
        )
