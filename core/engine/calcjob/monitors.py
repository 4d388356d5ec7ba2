"""Monitors: functions that look at a running job at each scheduler poll and may stop it.

A monitor is ``monitor(node, transport, /, *args, **kwargs) -> str | MonitorResult | None``
(or an ``async def``), registered under the ``veglia.monitors`` entry points and attached in the
builder::

    builder.monitors = {"diverged": {"entry_point": "core.file_pattern",
                                     "kwargs": {"path": "out.log", "pattern": "DIVERGED"}}}

A monitor that declares a ``state`` parameter gets a dict that is kept with the job between
calls (and across daemon restarts), e.g. how far into a file it has read.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Protocol, TypeAlias

from veglia.engine.calcjob.annotations import describe, fits, parameter_annotations, problem_of
from veglia.engine.calcjob.file_watch import requests_for, watches_of
from veglia.engine.calcjob.guards import guard_arguments, guard_of
from veglia.entry_points import MonitorFactory, get_entry_points, loaded_version
from veglia.exceptions import MonitorError, VegliaError
from veglia.manage import get_profile

__all__ = [
    "MONITOR_ACTIONS",
    "Monitor",
    "MonitorError",
    "MonitorOutcome",
    "MonitorResult",
    "MonitorSpec",
    "Regex",
    "RegexCheck",
    "engine_given",
    "load_monitor",
    "parse_monitors",
]

MONITOR_ACTIONS = ("kill", "disable-self", "disable-all")


@dataclass
class MonitorResult:
    """What a monitor asks for. A plain string returned by a monitor means kill with it."""

    message: str = ""
    action: str = "kill"
    #: Retrieve the job's files before it ends (then parse them when ``parse``).
    retrieve: bool = False
    parse: bool = False
    #: End with STOPPED_BY_MONITOR (True) or keep the exit code the parser gives (False).
    override_exit_code: bool = True
    #: Data attached to the running job as outputs ``monitor_outputs.<monitor>_<key>``.
    outputs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.action not in MONITOR_ACTIONS:
            raise MonitorError(
                f"MonitorResult action {self.action!r} is not one of {', '.join(MONITOR_ACTIONS)}."
            )


#: What a monitor returns: a message (kill the job with it), a MonitorResult, or None (let
#: it run).
MonitorOutcome: TypeAlias = str | MonitorResult | None


class Monitor(Protocol):
    """The signature of a monitor function, for type checkers.

    ``monitor(node, transport, /, *args, **kwargs) -> str | MonitorResult | None``: the
    engine passes the job's node and a transport bound to the job (a blocking one to a
    ``def``, an awaitable one to an ``async def``) positionally, then the spec's kwargs and
    what the monitor declares (``state``, ``files``, ``trace``: :func:`engine_given`) by
    name. Each type it is given is described in docs/monitors.md ("What a monitor is
    given"). Any parameters after the two match (``*args, **kwargs`` typed ``Any`` stand for
    "whatever the monitor declares"), so ``def my_monitor(node, transport, *, limit: int = 3)
    -> str | None`` is a ``Monitor``; the engine checks the kwargs against the signature
    itself (:func:`check_arguments`).
    """

    def __call__(
        self, node: Any, transport: Any, /, *args: Any, **kwargs: Any
    ) -> MonitorOutcome | Awaitable[MonitorOutcome]: ...


class RegexCheck:
    """The mark that makes :data:`Regex` of a ``str``: a value :func:`re.compile` refuses is
    refused when the builder is filled (:func:`check_arguments`), not at every poll."""

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return None  # the type's own check names it
        try:
            re.compile(value)
        except re.error as exc:
            return f"is not a regular expression: {exc}"
        return None

    #: How ``veglia plugin show`` and ``veglia monitor list`` name it: ``str (regular
    #: expression)``.
    description = "regular expression"

    def __repr__(self) -> str:
        return "RegexCheck()"


Regex: TypeAlias = Annotated[str, RegexCheck()]
# The alias is this RegexCheck's own (typing caches by the marks, and the mark is unique),
# so ``veglia plugin_api``'s docs and ``help(Regex)`` say what it is, not what Annotated is.
Regex.__doc__ = """A monitor keyword argument that is a regular expression: ``def m(node,
transport, *, pattern: Regex)``. A ``str`` to type checkers and to the monitor; a pattern
that does not compile (``"("``) is refused when ``builder.monitors`` is set, with re's
message."""


@dataclass
class MonitorSpec:
    """One monitor attached to a job, as given in ``builder.monitors[name]``."""

    name: str
    entry_point: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    minimum_poll_interval: float | None = None
    disable_on_start: bool = False
    timeout: float = 60.0
    max_failures: int = 3
    #: Run the monitor's guard (its shell twin, see ``guards``) beside the job, if it has one.
    guard: bool = True

    def __post_init__(self) -> None:
        where = f"Monitor {self.name!r}"
        if not isinstance(self.entry_point, str) or not self.entry_point:
            raise MonitorError(f"{where} needs an entry_point (a veglia.monitors name).")
        if not isinstance(self.kwargs, dict):
            raise MonitorError(f"{where}: kwargs must be a dict, not {self.kwargs!r}.")
        if not isinstance(self.priority, int):
            raise MonitorError(f"{where}: priority must be a whole number.")
        for name in ("minimum_poll_interval", "timeout"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                raise MonitorError(
                    f"{where}: {name} must be a number of seconds > 0, not {value!r}."
                )
        if not isinstance(self.max_failures, int) or self.max_failures < 1:
            raise MonitorError(f"{where}: max_failures must be a whole number >= 1.")
        if not isinstance(self.guard, bool):
            raise MonitorError(f"{where}: guard must be True or False, not {self.guard!r}.")

    @classmethod
    def from_input(cls, name: str, value: Any) -> MonitorSpec:
        if hasattr(value, "get_dict"):
            value = value.get_dict()
        if not isinstance(value, dict):
            raise MonitorError(
                f"Monitor {name!r} must be a dict with an entry_point, not {value!r}."
            )
        allowed = {f for f in cls.__dataclass_fields__ if f != "name"}
        unknown = set(value) - allowed
        if unknown:
            raise MonitorError(
                f"Monitor {name!r}: unknown field(s) {', '.join(sorted(unknown))}; the fields "
                f"are {', '.join(sorted(allowed))}."
            )
        # Checked here, not in __post_init__: a job submitted before keeps loading its specs.
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise MonitorError(
                f"Monitor {name!r}: a monitor's name must be non-empty, without spaces (it "
                "names the monitor in logs and its outputs)."
            )
        if not isinstance(value.get("disable_on_start", False), bool):
            raise MonitorError(
                f"Monitor {name!r}: disable_on_start must be True or False, not "
                f"{value['disable_on_start']!r}."
            )
        return cls(name=name, **value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _allow_import_path() -> bool:

    return bool(get_profile().get_option("monitors.allow_import_path"))


def load_monitor(entry_point: str) -> Monitor:
    """The monitor function for an entry point name, or ``module:function`` when allowed."""

    names = {ep.name for ep in get_entry_points("monitors")}
    if entry_point in names or ":" not in entry_point:
        monitor: Monitor = MonitorFactory(entry_point)  # checked callable when loaded
        return monitor
    if not _allow_import_path():
        raise MonitorError(
            f"Monitor {entry_point!r} is an import path; allow those with `veglia config set "
            "monitors.allow_import_path yes`, or register it under veglia.monitors."
        )
    module_name, _, attribute = entry_point.partition(":")
    try:
        function: Monitor = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise MonitorError(f"Cannot import monitor {entry_point!r}: {exc}.") from None
    if not callable(function):
        raise MonitorError(f"{entry_point!r} is not a function.")
    return function


def provenance_of(entry_point: str, function: Callable[..., Any]) -> dict[str, Any]:
    """Where a monitor came from: its package version, and its source hash for import paths."""
    from importlib.metadata import PackageNotFoundError, version

    module = inspect.getmodule(function)
    package = (module.__name__ if module else "").split(".")[0]
    record: dict[str, Any] = {"entry_point": entry_point, "module": getattr(module, "__name__", "")}
    # The version of the code this process loaded (a plugin upgraded under a running daemon
    # is not what its workers run), else what is installed.
    record["version"] = loaded_version("monitors", entry_point)
    if record["version"] is None:
        try:
            record["version"] = version(package)
        except (PackageNotFoundError, ValueError):
            record["version"] = None
    if ":" in entry_point:
        try:
            source = inspect.getsource(module) if module else ""
            record["source_sha256"] = hashlib.sha256(source.encode()).hexdigest()
        except (OSError, TypeError):
            record["source_sha256"] = None
    return record


def engine_given(function: Callable[..., Any]) -> set[str]:
    """The parameters the engine fills by name, never the spec's kwargs: ``state``,
    ``trace`` (:mod:`~veglia.engine.calcjob.live_trace`) and ``files``
    (:mod:`~veglia.engine.calcjob.file_watch`; given to a ``watch_files`` monitor, and
    taken from a user by no monitor)."""
    return {"state", "trace", "files"}


def check_arguments(spec: MonitorSpec, function: Callable[..., Any]) -> None:
    """Refuse kwargs the function does not take, missing required ones, and those whose
    value is not of the parameter's annotated type."""
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())[2:]  # after node, transport
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    named -= engine_given(function)
    unknown = set(spec.kwargs) - named
    if unknown and not accepts_any:
        raise MonitorError(
            f"Monitor {spec.name!r} ({spec.entry_point}) does not accept "
            f"{', '.join(sorted(unknown))}; it takes: {', '.join(sorted(named)) or 'nothing'}."
        )
    missing = [
        p.name
        for p in parameters
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in spec.kwargs
        and p.name not in ("state", "files", "trace")
    ]
    if missing:
        raise MonitorError(
            f"Monitor {spec.name!r} ({spec.entry_point}) needs {', '.join(missing)} in kwargs."
        )
    if watches_of(function) is not None:
        try:  # the FileWatch paths name keywords the monitor has
            requests_for(function, spec.kwargs, "/", {})
        except MonitorError as exc:
            raise MonitorError(f"Monitor {spec.name!r} ({spec.entry_point}): {exc}") from None
    annotations = parameter_annotations(function)
    for name, value in spec.kwargs.items():
        if name in annotations and name in named and not fits(value, annotations[name]):
            raise MonitorError(
                f"Monitor {spec.name!r} ({spec.entry_point}): kwarg {name!r} must be "
                f"{describe(annotations[name])}, not {type(value).__name__} ({value!r})."
            )
        problem = problem_of(value, annotations[name]) if name in annotations else None
        if problem and name in named:
            raise MonitorError(
                f"Monitor {spec.name!r} ({spec.entry_point}): kwarg {name!r} ({value!r}) {problem}."
            )


def parse_monitors(value: Any, node: Any = None) -> list[MonitorSpec]:
    """Validate ``builder.monitors``: specs in call order (priority high first, then name).
    An enabled guard's ``arguments`` is called too (with ``node`` when there is one yet), so
    kwargs the guard cannot honour are refused here, like the monitor's own."""
    specs = [MonitorSpec.from_input(name, item) for name, item in dict(value or {}).items()]
    for spec in specs:
        function = load_monitor(spec.entry_point)
        check_arguments(spec, function)
        guard = guard_of(function)
        if spec.guard and guard is not None:
            guard_arguments(spec.name, spec.entry_point, guard, spec.kwargs, node)
    return sorted(specs, key=lambda s: (-s.priority, s.name))


def validate_monitors_port(value: Any, _: Any = None) -> str | None:
    """plumpy port validator: the error message, or None."""
    try:
        parse_monitors(value)
    except VegliaError as exc:
        return str(exc)
    return None


def now() -> float:
    return time.time()
