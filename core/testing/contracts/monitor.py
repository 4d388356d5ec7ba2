"""The monitor contract: the call the engine makes, and a docstring to show."""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from veglia import MonitorFactory
from veglia.engine.calcjob.monitors import MonitorResult, MonitorSpec, check_arguments
from veglia.exceptions import TransportError
from veglia.testing.contracts._select import select
from veglia.testing.node import FakeNode
from veglia.testing.transport import FakeTransport

#: Example values of required keywords, by annotation.
EXAMPLE_VALUES: dict[Any, Any] = {str: "out.log", int: 1, float: 1.0, bool: True}


def _keywords(function: Any) -> list[inspect.Parameter]:
    """The parameters after node and transport that a caller names."""
    parameters = list(inspect.signature(function).parameters.values())[2:]
    return [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


class _AwaitedTransport:
    """The transport as an ``async def`` monitor gets it: every method is awaited."""

    def __init__(self, transport: FakeTransport) -> None:
        self._transport = transport

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._transport, name)
        if not callable(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            return attribute(*args, **kwargs)

        return call


class MonitorContract:
    """What the engine relies on from a ``veglia.monitors`` entry point.

    The engine calls ``monitor(node, transport, **kwargs)`` (awaited for an ``async
    def``), adding ``state=`` when the function declares it, and expects None, a message
    or a ``MonitorResult``. ``veglia monitor show`` prints a monitor's docstring and
    ``builder.monitors`` is checked against its signature before a job runs, so each named
    monitor must load, be documented, take the node and the transport first, annotate
    every keyword and give it a default or document it as required (``:param name:``),
    and answer on a trivial work dir with :class:`~veglia.testing.FakeNode` and
    :class:`~veglia.testing.FakeTransport` (where a missing file may raise a
    ``TransportError``, which the engine logs as the computer's fault). Subclass it in a
    test module::

        class TestMyMonitors(MonitorContract):
            entry_points = "mylab.*"
            examples = {"mylab.grep": {"pattern": "NaN"}}  # required keywords, if needed
    """

    #: A name or fnmatch pattern of the ``veglia.monitors`` entry points to check, or a
    #: tuple of them.
    entry_points: ClassVar[str | Sequence[str]] = ()
    #: Values of required keywords by monitor name, where their annotation is not one of
    #: ``str``, ``int``, ``float`` or ``bool`` (which get an example of their own).
    examples: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "monitor" not in metafunc.fixturenames:
            return
        owner = type(self).__name__
        found = select("veglia.monitors", self.entry_points, owner)
        if not found:
            pytest.fail(f"{owner}: set entry_points to the monitors to check", pytrace=False)
        metafunc.parametrize("monitor", found, ids=[ep.name for ep in found], indirect=True)

    @pytest.fixture
    def monitor(self, request: pytest.FixtureRequest) -> tuple[str, Any]:
        """The monitor's entry point name and its function."""
        return request.param.name, request.param.load()

    def test_a_monitor_loads_as_a_documented_function(self, monitor: tuple[str, Any]) -> None:
        name, function = monitor
        assert callable(function), f"{name} is no function"
        assert MonitorFactory(name) is function
        assert inspect.getdoc(function), f"{name}: `veglia monitor show` prints the docstring"

    def test_a_monitor_takes_the_node_and_the_transport_first(
        self, monitor: tuple[str, Any]
    ) -> None:
        name, function = monitor
        parameters = list(inspect.signature(function).parameters.values())
        assert len(parameters) >= 2, f"{name} must take (node, transport, **kwargs)"
        for parameter in parameters[:2]:
            assert parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        for parameter in parameters[2:]:
            assert parameter.kind is not parameter.POSITIONAL_ONLY, (
                f"{name}: {parameter.name} is positional-only; the engine passes keywords"
            )
            assert parameter.kind is not parameter.VAR_POSITIONAL, (
                f"{name}: *{parameter.name} is never given; the engine passes keywords"
            )

    def test_every_keyword_is_annotated_with_a_default_or_documented(
        self, monitor: tuple[str, Any]
    ) -> None:
        name, function = monitor
        doc = inspect.getdoc(function) or ""
        for parameter in _keywords(function):
            assert parameter.annotation is not parameter.empty, (
                f"{name}: annotate {parameter.name} (`veglia monitor list` shows its type)"
            )
            if parameter.default is parameter.empty and parameter.name != "state":
                assert f":param {parameter.name}:" in doc, (
                    f"{name}: {parameter.name} has no default; document it as required with "
                    f"`:param {parameter.name}:` in the docstring"
                )

    def _example_kwargs(self, name: str, function: Any) -> dict[str, Any]:
        try:
            hints = typing.get_type_hints(function)
        except Exception:  # a name only its module's TYPE_CHECKING block knows
            hints = {}
        kwargs = dict(self.examples.get(name, {}))
        for parameter in _keywords(function):
            if parameter.name == "state" or parameter.name in kwargs:
                continue
            if parameter.default is not parameter.empty:
                continue
            hint = hints.get(parameter.name)
            if hint not in EXAMPLE_VALUES:
                pytest.skip(
                    f"{name}: no example value for the required {parameter.name} ({hint}); "
                    f"add one to examples in {type(self).__name__}"
                )
            kwargs[parameter.name] = EXAMPLE_VALUES[hint]
        return kwargs

    @pytest.mark.parametrize("files", [["out.log"], []], ids=["empty-out.log", "empty-dir"])
    def test_a_monitor_answers_on_a_trivial_work_dir(
        self, monitor: tuple[str, Any], files: list[str], tmp_path: Path
    ) -> None:
        """A work dir holding an empty ``out.log`` (the example path), then nothing at all:
        a monitor answers; on the empty one it may also raise a TransportError (a missing
        file), which the engine logs as the computer's fault, but nothing else."""
        name, function = monitor
        kwargs = self._example_kwargs(name, function)
        check_arguments(MonitorSpec(name="contract", entry_point=name, kwargs=kwargs), function)
        if "state" in inspect.signature(function).parameters:
            kwargs["state"] = {}  # kept between calls, as the engine does
        with FakeTransport(root=str(tmp_path / "computer")) as transport:
            workdir = transport.root / "home" / "veglia-work" / "job"
            workdir.mkdir(parents=True)
            for file in files:
                (workdir / file).touch()
            transport.cwd = str(workdir)  # as the engine sets it
            node = FakeNode(
                {"last_job_info": {"state": "running", "wallclock_seconds": 1}, "computer": "fake"},
                options={"max_wallclock_seconds": 3600},
                remote_workdir=str(workdir),
                job_id="1001",
            )
            for _ in range(2):  # a second call sees the state the first one left
                try:
                    if inspect.iscoroutinefunction(function):
                        result = asyncio.run(function(node, _AwaitedTransport(transport), **kwargs))
                    else:
                        result = function(node, transport, **kwargs)
                except TransportError:
                    if files:
                        raise
                    continue
                assert result is None or isinstance(result, str | MonitorResult), (
                    f"{name} returned {type(result).__name__}: the engine takes None, a "
                    "message or a MonitorResult"
                )
