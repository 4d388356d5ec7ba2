"""The check a pipeline setup passes before it is stored: everything that can be known
before its first element arrives.

- ``process`` is an installed calc job or workflow;
- the source is installed and takes its settings (the DataSource is built);
- the computers exist (``options.computer``, or the ``computer.default`` option, filled in);
- ``input_port`` is an input of the process that can take an element;
- the fixed inputs, the options and the monitors fit the process's ports: a builder is
  filled as a run's will be, with a stand-in for the element, and validated as a launch is.

Each problem is one :class:`PipelineSetupError` line naming the setup and what to change.

How an element reaches ``input_port``: a source that reads a computer gives files, each a
``SinglefileData``; a source that needs no computer (``core.group``) gives nodes by UUID,
each the node itself. A port that is a namespace (``core.shell``'s ``files``) takes every
one, under its file name (as ``veglia shell -f`` does) or the node's UUID; a single port
takes an element of exactly one. The options go to the namespace holding ``input_port``:
``metadata.options`` and ``metadata.computer`` of the top for a calc job (``files``), of
``job`` for ``core.restart`` (``job.files``); ``monitors`` beside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar, Protocol, TypeVar

from plumpy.ports import Port, PortNamespace

from veglia.datasources import DataSource
from veglia.engine.builder import ProcessBuilder, ProcessBuilderNamespace
from veglia.engine.process import Process, load_process_class
from veglia.entry_points import DataSourceFactory
from veglia.exceptions import PipelineSetupError, VegliaError
from veglia.manage import get_profile
from veglia.orm.computers import load_computer
from veglia.orm.data import SinglefileData, to_node
from veglia.orm.nodes import Node

__all__ = [
    "SetupToCheck",
    "checked_setup",
    "element_port",
    "place_element",
    "process_class_of",
    "run_builder",
    "source_of",
    "takes_nodes",
]


class SetupToCheck(Protocol):
    """What the checks read of a :class:`veglia.pipeline_setups.PipelineSetup`, which calls
    them as it is stored (so is named here by what it holds)."""

    #: A dataclass: :func:`checked_setup` returns a copy with its computers filled in.
    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def name(self) -> str: ...

    @property
    def process(self) -> str: ...

    @property
    def input_port(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def source_settings(self) -> dict[str, Any]: ...

    @property
    def source_computer(self) -> str | None: ...

    @property
    def inputs(self) -> dict[str, Any]: ...

    @property
    def options(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=SetupToCheck)

#: Inputs that are settings, not data: a setup's values for them are kept as they are.
PLAIN_INPUTS = frozenset({"metadata", "monitors"})
#: The stand-in for an element while checking: a run has a file here (or a node).
STAND_IN_NAME = "element"


def _fail(setup: SetupToCheck, message: str) -> PipelineSetupError:
    return PipelineSetupError(f"Pipeline setup {setup.name}: {message}")


def process_class_of(setup: SetupToCheck) -> type[Process]:
    """The setup's process class, or why it cannot be used."""
    try:
        process_class = load_process_class(setup.process)
    except VegliaError as exc:
        raise _fail(setup, f"process: {exc}") from None
    if not (isinstance(process_class, type) and issubclass(process_class, Process)):
        raise _fail(
            setup,
            f"process {setup.process!r} is {process_class!r}, not a calc job or workflow; "
            "see `veglia plugin list calculations` and `veglia plugin list workflows`.",
        )
    return process_class


def source_of(setup: SetupToCheck) -> DataSource:
    """The setup's data source, built from its settings (so they are checked)."""
    try:
        result: DataSource = DataSourceFactory(setup.source)(setup.source_settings)
        return result
    except VegliaError as exc:
        raise _fail(setup, str(exc)) from None


def _computer(setup: SetupToCheck, label: Any, key: str) -> str:
    if not isinstance(label, str) or not label:
        raise _fail(setup, f"{key} = {label!r} will not do; give a computer label.")
    try:
        return load_computer(label).label
    except VegliaError as exc:
        raise _fail(setup, f"{key}: {exc}") from None


def element_port(setup: SetupToCheck, process_class: type[Process]) -> tuple[Any, str]:
    """The port that takes each element (a PortNamespace, a Port, or None inside a dynamic
    namespace) and the dotted path of the namespace holding it."""
    parts = setup.input_port.split(".")
    if not all(part.isidentifier() for part in parts):
        raise _fail(
            setup,
            f"input_port {setup.input_port!r} is not an input name; give one such as 'files', "
            "dotted for a namespace's ('job.files').",
        )
    namespace: Any = process_class.spec().inputs
    for depth, part in enumerate(parts):
        port = namespace.get(part) if isinstance(namespace, PortNamespace) else None
        if port is None:
            last = depth == len(parts) - 1
            if last and isinstance(namespace, PortNamespace) and namespace.dynamic:
                return None, ".".join(parts[:-1])
            where = ".".join(parts[:depth]) or process_class.__name__
            names = ", ".join(sorted(namespace)) if isinstance(namespace, PortNamespace) else ""
            raise _fail(
                setup,
                f"input_port {setup.input_port!r}: {where} has no input {part!r} (its inputs: "
                f"{names or 'none'}); name the input that takes each element, e.g. 'files'.",
            )
        if depth < len(parts) - 1 and not isinstance(port, PortNamespace):
            raise _fail(
                setup,
                f"input_port {setup.input_port!r}: {part!r} is a single input, not a namespace; "
                "name an input of the process, e.g. 'files'.",
            )
        if part in PLAIN_INPUTS:
            raise _fail(
                setup,
                f"input_port {setup.input_port!r} is a setting, not data; name an input that "
                "takes files or nodes, e.g. 'files'.",
            )
        namespace = port
    return namespace, ".".join(parts[:-1])


def takes_nodes(port: Any) -> bool:
    """Whether a port's values are data nodes (else plain values: a label, an option)."""
    if not isinstance(port, Port) or port.valid_type is None:
        return True
    types = port.valid_type if isinstance(port.valid_type, tuple) else (port.valid_type,)
    return any(isinstance(t, type) and issubclass(t, Node) for t in types)


def _fill(
    setup: SetupToCheck, namespace: ProcessBuilderNamespace, values: Mapping[str, Any], path: str
) -> None:
    """Set a setup's plain values on a builder namespace, as nodes where the port takes
    nodes: str -> Str, int -> Int, float -> Float, bool -> Bool, list -> List, table -> Dict,
    except a table for a namespace port, which fills it."""
    ports = namespace._namespace
    for name, value in values.items():
        where = f"{path}.{name}" if path else name
        port = ports.get(name) if isinstance(ports, PortNamespace) else None
        try:
            if name in PLAIN_INPUTS:
                namespace[name] = value
            elif isinstance(port, PortNamespace) and isinstance(value, Mapping):
                _fill(setup, namespace[name], value, where)
            elif takes_nodes(port):
                namespace[name] = to_node(value)
            else:
                namespace[name] = value
        except TypeError as exc:
            raise _fail(setup, f"inputs.{where}: {exc}") from None
        except VegliaError as exc:
            raise _fail(setup, f"{exc}") from None


def _namespace_at(builder: ProcessBuilder[Process], dotted: str) -> ProcessBuilderNamespace:
    namespace: ProcessBuilderNamespace = builder
    for part in filter(None, dotted.split(".")):
        namespace = namespace[part]
    return namespace


def _stand_in(source: DataSource) -> Node:
    # An unstored node costs nothing: it is only validated, never stored.
    if source.needs_transport:
        return SinglefileData(b"", STAND_IN_NAME)
    return to_node({})


def checked_setup(setup: S) -> S:
    """``setup`` with its computer and its source's defaults filled in, once every check of
    this module passes; otherwise :class:`PipelineSetupError` says what to change."""
    process_class = process_class_of(setup)
    source = source_of(setup)
    options = dict(setup.options)
    computer = options.get("computer") or get_profile().get_option("computer.default")
    if not computer:
        raise _fail(
            setup,
            "no computer: give options.computer (no computer.default option is set either).",
        )
    options["computer"] = _computer(setup, computer, "options.computer")
    source_computer = None
    if source.needs_transport and setup.source_computer is not None:
        source_computer = _computer(setup, setup.source_computer, "source.computer")
    setup = replace(
        setup,
        options=options,
        source_settings=dict(source.settings),
        source_computer=source_computer,
    )
    if "monitors" in options:
        _check_monitors(setup, options["monitors"])
    _, holder = element_port(setup, process_class)
    if _given(setup.inputs, setup.input_port):
        raise _fail(
            setup,
            f"inputs.{setup.input_port} is the input_port: each element goes there; take it "
            "out of the fixed inputs.",
        )
    builder, target = _filled_builder(setup, process_class, holder)
    kind = "a file" if source.needs_transport else "a node"
    place_element(setup, {STAND_IN_NAME: _stand_in(source)}, kind, process_class, builder, target)
    return setup


def _filled_builder(
    setup: SetupToCheck, process_class: type[Process], holder: str
) -> tuple[ProcessBuilder[Process], ProcessBuilderNamespace]:
    """A builder with the setup's fixed inputs and options, and the namespace in it that
    holds ``input_port``."""
    builder = process_class.get_builder()
    _fill(setup, builder, setup.inputs, "")
    target = _namespace_at(builder, holder)
    _fill(setup, target, _settings(setup, process_class, target, holder), holder)
    return builder, target


def run_builder(
    setup: SetupToCheck, element_nodes: Mapping[str, Node], kind: str
) -> ProcessBuilder[Process]:
    """The builder of the setup's run for one element, whose nodes (``kind``: "a file" or
    "a node") are ``element_nodes`` by name; validated, or :class:`PipelineSetupError`."""
    process_class = process_class_of(setup)
    _, holder = element_port(setup, process_class)
    builder, target = _filled_builder(setup, process_class, holder)
    place_element(setup, element_nodes, kind, process_class, builder, target)
    return builder


def _given(values: Mapping[str, Any], dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(values, Mapping) or part not in values:
            return False
        values = values[part]
    return True


def _takes(namespace: ProcessBuilderNamespace, dotted: str) -> bool:
    """Whether the namespace has the input ``dotted``, or a namespace of any inputs on the
    way to it."""
    ports: Any = namespace._namespace
    for part in dotted.split("."):
        if not isinstance(ports, PortNamespace):
            return False
        if part not in ports:
            return ports.dynamic
        ports = ports[part]
    return True


def _settings(
    setup: SetupToCheck,
    process_class: type[Process],
    target: ProcessBuilderNamespace,
    holder: str,
) -> dict[str, Any]:
    """The options as the inputs of the namespace holding the element's port: its
    ``metadata`` (what the fixed inputs gave, with ``computer`` and ``options`` added) and
    ``monitors``."""
    options = setup.options
    job_options = {k: v for k, v in options.items() if k not in ("computer", "monitors")}
    where = f"{holder!r} of {setup.process}" if holder else setup.process
    for key, wanted in (("metadata.options", job_options), ("monitors", "monitors" in options)):
        if wanted and not _takes(target, key):
            raise _fail(
                setup,
                f"options: {where} has no input {key}, so it takes no options but computer; give "
                "them as its inputs, or point input_port into a calc job's namespace "
                "(e.g. 'job.files' for core.restart).",
            )
    existing = target.get("metadata")
    metadata = (
        existing.to_dict()
        if isinstance(existing, ProcessBuilderNamespace)
        else dict(existing or {})
    )
    # A process with no computer of its own (a workflow) still has one: its source's.
    if _takes(target, "metadata.computer"):
        metadata["computer"] = options["computer"]
    if job_options:
        metadata["options"] = {**dict(metadata.get("options") or {}), **job_options}
    settings: dict[str, Any] = {"metadata": metadata} if metadata else {}
    if "monitors" in options:
        settings["monitors"] = options["monitors"]
    return settings


def place_element(
    setup: SetupToCheck,
    element_nodes: Mapping[str, Node],
    kind: str,
    process_class: type[Process],
    builder: ProcessBuilder[Process],
    target: ProcessBuilderNamespace,
) -> None:
    """Put an element's nodes at ``input_port`` and validate the whole: a namespace takes
    them by name, a single input takes an element of exactly one; an input inside a
    namespace of any inputs (core.restart's ``job.files``) may be either kind, so each is
    tried."""
    port, _ = element_port(setup, process_class)
    name = setup.input_port.rsplit(".", 1)[-1]
    single = list(element_nodes.values())[:1] if len(element_nodes) == 1 else []
    if isinstance(port, PortNamespace):
        forms: list[Any] = [dict(element_nodes)]
    elif port is None:
        forms = [dict(element_nodes), *single]
    else:
        forms = single
    if not forms:
        raise _fail(
            setup,
            f"input_port {setup.input_port!r} takes one {kind.split()[-1]}, and this element "
            f"has {len(element_nodes)}; point input_port at a namespace (such as 'files').",
        )
    first: PipelineSetupError | None = None
    for value in forms:
        try:
            target[name] = value
            _validate(setup, process_class, builder, kind)
            return
        except VegliaError as exc:
            message = str(exc)
            if not isinstance(exc, PipelineSetupError):
                message = f"input_port {setup.input_port!r} cannot take {_of(setup, kind)}: {exc}"
                exc = _fail(setup, message)
            first = first or exc
    assert first is not None
    raise first


def _check_monitors(setup: SetupToCheck, monitors: Any) -> None:
    # Lazy: the monitor machinery only for a setup that has monitors.
    from veglia.engine.calcjob.monitors import parse_monitors

    if not isinstance(monitors, Mapping):
        raise _fail(
            setup,
            f"options.monitors must be a table of name = {{entry_point = ..., kwargs = ...}}, "
            f"not {monitors!r}.",
        )
    try:
        parse_monitors(monitors)
    except VegliaError as exc:
        raise _fail(setup, f"options.monitors: {exc}") from None


def _of(setup: SetupToCheck, kind: str) -> str:
    # A step of a chain has no source of its own: its element is the previous step's outputs.
    return f"{kind} of {setup.source}" if setup.source else kind


def _validate(
    setup: SetupToCheck, process_class: type[Process], builder: ProcessBuilder[Process], kind: str
) -> None:
    """Validate the inputs as a launch does: defaults filled in, then every port and the
    namespaces' validators (``core.shell`` wants a command or a code)."""
    ports = process_class.spec().inputs
    values = ports.pre_process(builder.to_dict())
    error = ports.validate(values)
    if error is not None:
        where = error.port.removeprefix("inputs.").removeprefix("inputs")
        if where.startswith(setup.input_port):
            raise _fail(
                setup,
                f"input_port {setup.input_port!r} cannot take {_of(setup, kind)}: "
                f"{error.message}; name an input that does.",
            )
        prefix = f"input {where!r}: " if where else "inputs: "
        raise _fail(setup, f"{prefix}{error.message}")
