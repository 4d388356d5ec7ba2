"""Steps run one after another on one element: what a step is, which processes fit after
which, and the builder of a step's run from the previous step's outputs.

A step is plain data, as a pipeline setup stores it (in the inputs of the chain workflow,
:data:`~veglia.pipeline_setups.CHAIN_PROCESS`)::

    {"process": "core.shell", "input_port": "files",
     "inputs": {"command": "sort *.txt > sorted.txt", "outputs": ["sorted.txt"]},
     "options": {"computer": "localhost", "queue_name": "short"},
     "from_output": "files.sorted_txt"}   # optional: which output a single input takes

The first step's ``input_port`` takes the element; each later step's takes the previous
step's outputs: a namespace by name (a file by its file name, so it keeps it), a single
input the one output of its type (or the one ``from_output`` names). A calc job's own
plumbing (``remote_folder``, ``retrieved``, ``monitor_outputs``) is not passed on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from plumpy.ports import Port, PortNamespace

from veglia.engine.builder import ProcessBuilder
from veglia.engine.pipeline_setup_check import element_port, process_class_of, run_builder
from veglia.engine.process import Process
from veglia.exceptions import PipelineSetupError, VegliaError
from veglia.manage import get_profile
from veglia.orm.computers import load_computer
from veglia.orm.data import SinglefileData
from veglia.orm.nodes import Node
from veglia.pipeline_setups import PipelineSetup

__all__ = [
    "ANY_INPUT",
    "Step",
    "fitting_inputs",
    "output_types",
    "parse_steps",
    "step_builder",
    "step_element",
    "steps_problems",
]

STEP_KEYS = ("process", "input_port", "inputs", "options", "from_output")
#: Outputs every calc job has: how it ran, not what it made.
PLUMBING = frozenset({"remote_folder", "retrieved", "monitor_outputs"})
#: How an offered input reads when it is a namespace that takes any inputs.
ANY_INPUT = "<an input of its process>"
STEP_EXAMPLE = "{process = 'core.shell', input_port = 'files', inputs = {command = '...'}}"


@dataclass(frozen=True)
class Step:
    """One step: its process, the input taking what comes before, fixed inputs, options."""

    number: int
    process: str
    input_port: str
    inputs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    from_output: str | None = None

    @property
    def title(self) -> str:
        return f"step {self.number} ({self.process})"

    def as_setup(self) -> PipelineSetup:
        """The step as a setup without a source: its checks and builder are a setup's."""
        return PipelineSetup(
            name=f"step-{self.number}",
            process=self.process,
            input_port=self.input_port,
            source="",
            inputs=self.inputs,
            options=self.options,
        )

    def to_dict(self) -> dict[str, Any]:
        data = {
            "process": self.process,
            "input_port": self.input_port,
            "inputs": self.inputs,
            "options": self.options,
        }
        return data if self.from_output is None else {**data, "from_output": self.from_output}


def _step_error(step: Step, exc: VegliaError) -> PipelineSetupError:
    message = str(exc).removeprefix(f"Pipeline setup step-{step.number}: ")
    return PipelineSetupError(f"{step.title}: {message}")


def parse_steps(value: Any) -> tuple[list[Step], list[str]]:
    """The steps of plain data (a list of tables), and a one-line problem for each that
    will not do."""
    if isinstance(value, Mapping) or not isinstance(value, list | tuple) or not value:
        return [], [f"steps: give a list of at least one step, each a table such as {STEP_EXAMPLE}"]
    steps, problems = [], []
    for number, data in enumerate(value, 1):
        if not isinstance(data, Mapping):
            problems.append(f"step {number}: {data!r} is not a table; give e.g. {STEP_EXAMPLE}")
            continue
        unknown = sorted(set(data) - set(STEP_KEYS))
        if unknown:
            problems.append(
                f"step {number}: unknown key {unknown[0]!r}; a step's keys are: "
                f"{', '.join(STEP_KEYS)}"
            )
            continue
        wrong = [
            key
            for key, kind in (("process", str), ("input_port", str), ("from_output", str))
            if (key in data or key != "from_output") and not (isinstance(data.get(key), kind))
        ]
        wrong += [
            key for key in ("inputs", "options") if not isinstance(data.get(key, {}), Mapping)
        ]
        if wrong:
            problems.append(
                f"step {number}: {wrong[0]} is missing or not a "
                f"{'table' if wrong[0] in ('inputs', 'options') else 'string'}; "
                f"give e.g. {STEP_EXAMPLE}"
            )
            continue
        steps.append(
            Step(
                number,
                data["process"],
                data["input_port"],
                dict(data.get("inputs") or {}),
                dict(data.get("options") or {}),
                data.get("from_output"),
            )
        )
    return steps, problems


# -- what fits after what ----------------------------------------------------------------------
def _types(valid_type: Any) -> tuple[type, ...]:
    if valid_type is None:
        return (Node,)
    return valid_type if isinstance(valid_type, tuple) else (valid_type,)


def _overlap(given: tuple[type, ...], taken: tuple[type, ...]) -> bool:
    return any(issubclass(a, b) or issubclass(b, a) for a in given for b in taken)


def output_types(process_class: type[Process]) -> dict[str, tuple[type, ...]]:
    """The outputs a process declares, by name (``files.*`` for a namespace of any), with
    their types; ``*`` for a process whose outputs are known only when it ran."""
    found: dict[str, tuple[type, ...]] = {}

    def walk(namespace: PortNamespace, prefix: str) -> None:
        for name, port in namespace.items():
            if not prefix and name in PLUMBING:
                continue
            if isinstance(port, PortNamespace):
                if port.dynamic:
                    found[f"{prefix}{name}.*"] = _types(port.valid_type)
                walk(port, f"{prefix}{name}.")
            else:
                found[f"{prefix}{name}"] = _types(port.valid_type)

    outputs = process_class.spec().outputs
    walk(outputs, "")
    if not found and outputs.dynamic:
        found["*"] = _types(outputs.valid_type)
    return found


def fitting_inputs(
    process_class: type[Process], given: Mapping[str, tuple[type, ...]]
) -> list[str]:
    """The inputs of a process that could take some of the outputs ``given`` (as
    :func:`output_types` gives them); a namespace of any inputs as ``job.<...>``."""
    types = tuple(t for kinds in given.values() for t in kinds)

    def walk(namespace: PortNamespace, prefix: str) -> Iterator[str]:
        for name, port in namespace.items():
            if name in ("metadata", "monitors", "code"):
                continue
            full = f"{prefix}{name}"
            if isinstance(port, PortNamespace) and not port.dynamic:
                yield from walk(port, f"{full}.")
            elif isinstance(port, PortNamespace) and port.valid_type is None:
                yield f"{full}.{ANY_INPUT}"
            elif _overlap(types, _types(port.valid_type)):
                yield full

    return list(walk(process_class.spec().inputs, ""))


# -- a step's run -------------------------------------------------------------------------------
def _port_of(step: Step) -> tuple[type[Process], Any]:
    setup = step.as_setup()
    try:
        process_class = process_class_of(setup)
        port, _ = element_port(setup, process_class)
    except VegliaError as exc:
        raise _step_error(step, exc) from None
    return process_class, port


def _output_name(label: str) -> str:
    return label.replace("__", ".")


def step_element(step: Step, outputs: Mapping[str, Node]) -> dict[str, Node]:
    """What of the previous step's ``outputs`` (by link label) goes to the step's
    ``input_port``, by name."""
    _, port = _port_of(step)
    offered = {
        _output_name(label): node
        for label, node in outputs.items()
        if label.split("__")[0] not in PLUMBING
    }
    if step.from_output is not None:
        wanted = _output_name(step.from_output)
        if wanted not in offered:
            raise PipelineSetupError(
                f"{step.title}: from_output {step.from_output!r} is not an output of the step "
                f"before (its outputs: {', '.join(sorted(offered)) or 'none'}); name one of those."
            )
        offered = {wanted: offered[wanted]}
    taken = _types(port.valid_type) if isinstance(port, Port | PortNamespace) else (Node,)
    fit = {name: node for name, node in offered.items() if isinstance(node, taken)}
    if isinstance(port, Port) and not isinstance(port, PortNamespace):
        if len(fit) != 1:
            raise PipelineSetupError(
                f"{step.title}: input_port {step.input_port!r} takes one "
                f"{' or '.join(t.__name__ for t in taken)}, and the step before gave "
                f"{len(fit)} ({', '.join(sorted(fit)) or 'none'}); name the one with from_output."
            )
        return fit
    element: dict[str, Node] = {}
    for name, node in fit.items():
        # A file keeps its name: the next command finds `sorted.txt`, not `sorted_txt`.
        key = node.filename if isinstance(node, SinglefileData) else name.rsplit(".", 1)[-1]
        if key in element:
            raise PipelineSetupError(
                f"{step.title}: two outputs of the step before are both named {key!r}; pick "
                "one with from_output."
            )
        element[key] = node
    return element


def _with_computer(step: Step, process_class: type[Process]) -> Step:
    if "computer" in step.options:
        label = step.options["computer"]
    else:
        label = get_profile().get_option("computer.default")
        if not label:
            # A workflow step may have no computer: its own steps name theirs.
            return step
    if not isinstance(label, str) or not label:
        raise PipelineSetupError(f"{step.title}: options.computer = {label!r}; give a label.")
    try:
        label = load_computer(label).label
    except VegliaError as exc:
        raise _step_error(step, exc) from None
    return Step(
        step.number,
        step.process,
        step.input_port,
        step.inputs,
        {**step.options, "computer": label},
        step.from_output,
    )


def step_builder(
    step: Step, element: Mapping[str, Node], kind: str = "a node"
) -> ProcessBuilder[Process]:
    """The validated builder of the step's run with ``element`` at its input_port."""
    process_class, _ = _port_of(step)
    step = _with_computer(step, process_class)
    try:
        builder = run_builder(step.as_setup(), element, kind)
    except KeyError:
        raise PipelineSetupError(
            f"{step.title}: no computer: give options.computer in the step (no computer.default "
            "option is set either)."
        ) from None
    except VegliaError as exc:
        raise _step_error(step, exc) from None
    return builder


def steps_problems(value: Any, element: Mapping[str, Node]) -> list[str]:
    """One line for each problem of ``steps`` (plain data) run on ``element``: the first
    step is checked with the element, each later one with a file standing in for what the
    step before gives, when its input takes files."""
    steps, problems = parse_steps(value)
    before: tuple[Step, dict[str, tuple[type, ...]]] | None = None
    for step in steps:
        if before is not None and before[0].number != step.number - 1:
            before = None  # the step before will not do: what it gives is unknown
        try:
            process_class, port = _port_of(step)
        except VegliaError as exc:
            problems.append(str(exc))
            before = None
            continue
        try:
            if step.number == 1:
                step_builder(step, element, "the element")
            elif before is not None:
                _check_fit(step, process_class, port, *before)
        except VegliaError as exc:
            problems.append(str(exc))
        before = (step, output_types(process_class))
    return sorted(problems, key=_step_number)


def _step_number(problem: str) -> int:
    number = problem.split(" ", 2)[1].split(":")[0] if problem.startswith("step ") else ""
    return int(number) if number.isdigit() else 0


def _check_fit(
    step: Step,
    process_class: type[Process],
    port: Any,
    previous: Step,
    given: dict[str, tuple[type, ...]],
) -> None:
    taken = _types(port.valid_type) if port is not None else (Node,)
    if step.from_output is not None:
        wanted = _output_name(step.from_output)
        namespaces = {name[:-2] for name in given if name.endswith(".*")}
        known = wanted in given or "*" in given or wanted.rsplit(".", 1)[0] in namespaces
        if not known:
            raise PipelineSetupError(
                f"{step.title}: from_output {step.from_output!r} is not an output of "
                f"{previous.title} (its outputs: {', '.join(sorted(given)) or 'none'})."
            )
    if not _overlap(tuple(t for kinds in given.values() for t in kinds), taken):
        raise PipelineSetupError(
            f"{step.title}: input_port {step.input_port!r} takes "
            f"{' or '.join(t.__name__ for t in taken)}, which no output of {previous.title} "
            f"gives ({', '.join(sorted(given)) or 'none'}); pick an input that takes one."
        )
    if _overlap((SinglefileData,), taken):
        # A file stands in for the outputs: the fixed inputs and options are checked whole.
        stand_in = SinglefileData(b"", "element")
        step_builder(step, {"element": stand_in}, "a file")
    else:
        _with_computer(step, process_class)
