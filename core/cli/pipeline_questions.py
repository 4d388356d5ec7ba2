"""The questions of ``veglia pipeline create`` (VRPipe's UC2, steps 2 to 11): the data
source and its settings, the process to run on each element and the input that takes it,
the computer, fixed inputs and options, then step by step the processes to run on the
outputs of the one before (offered when an input fits them), a summary, a name, enable or
not.

A wrong answer is explained and asked again (UC1 4a); nothing is stored until every answer
fits together (the check of :mod:`veglia.engine.pipeline_setup_check`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

import click
from plumpy.ports import PortNamespace
from rich.markup import escape

from veglia.cli.output import console, echo_error, echo_info
from veglia.datasources import DataSource
from veglia.engine.pipeline_setup_check import checked_setup, element_port, process_class_of
from veglia.engine.pipeline_steps import ANY_INPUT, Step, fitting_inputs, output_types
from veglia.engine.process import load_process_class
from veglia.entry_points import get_entry_points, load_entry_point
from veglia.exceptions import NotExistent, PipelineSetupError, VegliaError
from veglia.manage import get_profile
from veglia.orm.computers import Computer, load_computer
from veglia.orm.data import SinglefileData
from veglia.pipeline_setups import (
    CHAIN_PORT,
    CHAIN_PROCESS,
    PipelineSetup,
    check_name,
    load_pipeline_setup,
    parse_toml_value,
    setup_toml,
)

__all__ = ["ask_setup"]

T = TypeVar("T")
#: The name a setup has while it is checked, before one is asked for.
DRAFT_NAME = "new-setup"
PROCESS_GROUPS = ("workflows", "calculations")


def _summary(obj: Any) -> str:
    """The first sentence of an object's docstring (which may run over several lines)."""
    paragraph = (inspect.getdoc(obj) or "").strip().split("\n\n")[0]
    sentence = " ".join(paragraph.split()).split(". ")[0]
    return sentence if not sentence or sentence.endswith(".") else f"{sentence}."


def _ask(prompt: str, convert: Callable[[str], T], default: str | None = None) -> T:
    """Prompt until ``convert`` accepts the answer; a refusal is explained, then asked again."""
    while True:
        answer = click.prompt(f"  {prompt}", default=default, show_default=bool(default))
        try:
            return convert(answer.strip())
        except (VegliaError, ValueError, TypeError) as exc:
            echo_error(escape(str(exc)))
            echo_info("  Please answer again.")


def _choice(names: list[str], kind: str, listing: str) -> Callable[[str], str]:
    def convert(answer: str) -> str:
        if answer not in names:
            raise PipelineSetupError(
                f"{answer!r} is not one of the {kind} offered ({', '.join(names)}); "
                f"answer with one of those names{listing}."
            )
        return answer

    return convert


# -- the data source (UC2 2-3) -----------------------------------------------------------------
def _ask_source() -> tuple[str, type[DataSource]]:
    entry_points = get_entry_points("datasources")
    names = [ep.name for ep in entry_points]
    echo_info("\n[bold]Data source[/bold]: where the pipeline's input comes from. Installed:")
    for name in names:
        echo_info(f"  {name:16} {escape(_summary(load_entry_point('datasources', name)))}")
    name = _ask("data source", _choice(names, "data sources", ""))
    return name, load_entry_point("datasources", name)


def _parse_setting(parse: Callable[[Any], Any], answer: str) -> Any:
    """The answer as text, or else as a TOML value (a number, a list, ...)."""
    try:
        return parse(answer)
    except (TypeError, ValueError) as first:
        value = parse_toml_value(answer)
        if isinstance(value, str):
            raise ValueError(str(first)) from None
        try:
            return parse(value)
        except (TypeError, ValueError):
            raise ValueError(str(first)) from None


def _ask_settings(source_class: type[DataSource]) -> dict[str, Any]:
    while True:
        settings: dict[str, Any] = {}
        for setting in source_class.accepted_settings:
            optional = "" if setting.required else " (empty: the default)"
            echo_info(f"\n[bold]{setting.name}[/bold]: {escape(setting.help)}{optional}")
            default = None if setting.required else _shown(setting.default)

            def convert(answer: str, setting: Any = setting) -> Any:
                if not answer and not setting.required:
                    return setting.default
                return _parse_setting(setting.parse, answer)

            settings[setting.name] = _ask(setting.name, convert, default)
        try:
            return dict(source_class(settings).settings)
        except VegliaError as exc:
            echo_error(escape(str(exc)))
            echo_info("  Please give the settings again.")


def _shown(value: Any) -> str:
    return "" if value is None else str(value)


def _computer(answer: str) -> str:
    return load_computer(answer).label


def _ask_computer(what: str, default: str | None) -> str:
    labels = [computer.label for computer in Computer.list()]
    echo_info(f"\n[bold]computer[/bold]: {what}. Set up: {', '.join(labels) or 'none'}")
    return _ask("computer", _computer, default)


# -- the process (UC2 4-6) ---------------------------------------------------------------------
def _element_ports(namespace: Any, takes_files: bool, prefix: str = "") -> Iterator[str]:
    """The inputs that could take an element: a port or namespace of files (or of any node,
    for a source of nodes), outside ``metadata`` and ``monitors``."""
    for name, port in namespace.items():
        if name in ("metadata", "monitors", "code"):
            continue
        full = f"{prefix}{name}"
        valid = port.valid_type
        types = valid if isinstance(valid, tuple) else (valid,)
        if isinstance(port, PortNamespace) and not port.dynamic:
            yield from _element_ports(port, takes_files, f"{full}.")
        elif isinstance(port, PortNamespace) and valid is None:
            # Any inputs (core.restart's ``job``): the element goes to one of them.
            yield f"{full}.{ANY_INPUT}"
        elif not takes_files or SinglefileData in types:
            yield full


def _processes(takes_files: bool) -> dict[str, list[str]]:
    """The installed processes with an input that could take an element, and those inputs."""
    offered: dict[str, list[str]] = {}
    for group in PROCESS_GROUPS:
        for entry_point in get_entry_points(group):
            try:
                process_class = load_entry_point(group, entry_point.name)
                ports = list(_element_ports(process_class.spec().inputs, takes_files))
            except (VegliaError, AttributeError):
                continue  # `veglia plugin list` shows what is broken
            if ports:
                offered[entry_point.name] = ports
    return offered


def _offer(offered: dict[str, list[str]], what: str) -> str:
    """List the offered processes, each with its docstring's first sentence; the chosen one."""
    for name, ports in offered.items():
        group = next(g for g in PROCESS_GROUPS if any(e.name == name for e in get_entry_points(g)))
        about = _summary(load_entry_point(group, name))
        echo_info(f"  {name:22} {escape(about)} (inputs for {what}: {escape(', '.join(ports))})")
    names = list(offered)
    return _ask("process", _choice(names, "processes", "; see `veglia plugin show` for each"))


def _ask_process(source_class: type[DataSource]) -> tuple[str, list[str]]:
    offered = _processes(source_class.needs_transport)
    kind = "files" if source_class.needs_transport else "nodes"
    echo_info(
        f"\n[bold]process[/bold]: the workflow or calc job run on each element. Those with an "
        f"input that takes {kind}:"
    )
    name = _offer(offered, "an element")
    return name, offered[name]


def _ask_input_port(draft: PipelineSetup, candidates: list[str]) -> str:
    echo_info(
        "\n[bold]input_port[/bold]: the input that takes each element (a namespace takes each "
        "file under its name; a namespace of a workflow's calc job is dotted, e.g. job.files)"
    )
    process_class = process_class_of(draft)

    def convert(answer: str) -> str:
        element_port(replace(draft, input_port=answer), process_class)
        return answer

    plain = [candidate for candidate in candidates if ANY_INPUT not in candidate]
    return _ask("input_port", convert, plain[0] if plain else None)


# -- fixed inputs and options ------------------------------------------------------------------
def _pair(answer: str) -> tuple[list[str], Any]:
    key, sep, value = answer.partition("=")
    if not sep or not key.strip():
        raise PipelineSetupError(
            f"{answer!r} is not NAME = VALUE; give e.g. command = 'wc -l *', or nothing to finish."
        )
    return key.strip().split("."), parse_toml_value(value.strip())


def _ask_pairs(title: str, about: str, hint: str) -> dict[str, Any]:
    """NAME = VALUE answers (dotted names nest), until an empty one."""
    echo_info(
        f"\n[bold]{title}[/bold]: {about}; one NAME = VALUE a line, empty to finish{escape(hint)}"
    )
    values: dict[str, Any] = {}
    while True:
        answer = _ask(title, lambda text: _pair(text) if text else None, default="")
        if answer is None:
            return values
        keys, value = answer
        table = values
        for key in keys[:-1]:
            table = table.setdefault(key, {})
        table[keys[-1]] = value


# -- steps after the first process -------------------------------------------------------------
def _processes_after(previous: str) -> dict[str, list[str]]:
    """The installed processes with an input that fits an output of ``previous``."""
    given = output_types(load_process_class(previous))
    offered: dict[str, list[str]] = {}
    for group in PROCESS_GROUPS:
        for entry_point in get_entry_points(group):
            try:
                process_class = load_entry_point(group, entry_point.name)
                ports = fitting_inputs(process_class, given)
            except (VegliaError, AttributeError):
                continue  # `veglia plugin list` shows what is broken
            # A chain in a chain is only a longer chain: its steps are offered one by one.
            if ports and entry_point.name != CHAIN_PROCESS:
                offered[entry_point.name] = ports
    return offered


def _ask_step_port(step: Step, previous: str, candidates: list[str]) -> str:
    echo_info(
        f"\n[bold]input_port[/bold]: the input of {step.process} that takes the outputs of "
        f"{previous} (a namespace takes each under its name, a file under its file name)"
    )
    process_class = process_class_of(step.as_setup())
    plain = [candidate for candidate in candidates if ANY_INPUT not in candidate]
    anywhere = [c.split(f".{ANY_INPUT}")[0] + "." for c in candidates if ANY_INPUT in c]

    def convert(answer: str) -> str:
        element_port(replace(step.as_setup(), input_port=answer), process_class)
        if answer not in plain and not any(answer.startswith(a) for a in anywhere):
            raise PipelineSetupError(
                f"input {answer!r} of {step.process} takes nothing that {previous} gives; "
                f"answer with one of: {', '.join(candidates)}."
            )
        return answer

    return _ask("input_port", convert, plain[0] if plain else None)


def _ask_steps(draft: PipelineSetup, first: dict[str, Any], computer: str) -> list[dict[str, Any]]:
    """The steps after the first process, each asked with its input, inputs and options;
    each is checked with those before it (the whole chain, as the daemon will run it)."""
    steps = [first]
    while click.confirm("\n  Add a step after it (run on its outputs)?", default=False):
        previous = steps[-1]["process"]
        offered = _processes_after(previous)
        if not offered:
            echo_info(f"  No installed workflow or calc job takes what {previous} gives.")
            break
        echo_info(
            f"\n[bold]step {len(steps) + 1}[/bold]: a workflow or calc job run on the outputs "
            f"of {previous}. Those with an input that fits them:"
        )
        process = _offer(offered, f"the outputs of {previous}")
        step = Step(len(steps) + 1, process, "")
        step = replace(step, input_port=_ask_step_port(step, previous, offered[process]))
        computer = _ask_computer(f"the computer {process} runs on", computer)
        while True:
            inputs = _ask_pairs(
                "fixed input", "the same for every element", _process_inputs(step.as_setup())
            )
            options = _ask_pairs(
                "option",
                "queue_name, max_wallclock_seconds, resources, monitors, ...",
                "\n  e.g. queue_name = 'short'",
            )
            added = replace(step, inputs=inputs, options={"computer": computer, **options})
            try:
                checked_setup(_chain(draft, [*steps, added.to_dict()]))
                break
            except PipelineSetupError as exc:
                echo_error(escape(str(exc).removeprefix(f"Pipeline setup {DRAFT_NAME}: inputs: ")))
                echo_info(
                    f"  Please give the fixed inputs and options of step {step.number} again."
                )
        steps.append(added.to_dict())
    return steps


def _chain(draft: PipelineSetup, steps: list[dict[str, Any]]) -> PipelineSetup:
    """The setup running ``steps`` one after another: the chain workflow, with the steps
    as its input (so a setup of steps is stored, edited and run as any other)."""
    return replace(
        draft,
        process=CHAIN_PROCESS,
        input_port=CHAIN_PORT,
        inputs={"steps": steps},
        options={"computer": steps[0]["options"]["computer"]},
    )


def _process_inputs(draft: PipelineSetup) -> str:
    ports = process_class_of(draft).spec().inputs
    names = [
        f"{name}{'' if not port.required else ' (required)'}"
        for name, port in ports.items()
        if name not in ("metadata", "monitors") and name != draft.input_port.split(".")[0]
    ]
    return f"\n  inputs of {draft.process}: {', '.join(names) or 'none'}"


def _max_active(answer: str) -> int | None:
    if not answer:
        return None
    if not answer.isdigit() or int(answer) < 1:
        raise PipelineSetupError(
            f"{answer!r} is not a whole number >= 1; give how many runs at most, or nothing."
        )
    return int(answer)


# -- all of it -------------------------------------------------------------------------------
def ask_setup() -> PipelineSetup:
    """A checked setup from the answers (unstored)."""
    source_name, source_class = _ask_source()
    settings = _ask_settings(source_class)
    default_computer = get_profile().get_option("computer.default") or None
    source_computer = None
    if source_class.needs_transport:
        source_computer = _ask_computer("the computer the source is read on", default_computer)
    process, candidates = _ask_process(source_class)
    draft = PipelineSetup(
        name=DRAFT_NAME,
        process=process,
        input_port="",
        source=source_name,
        source_settings=settings,
    )
    draft = replace(draft, input_port=_ask_input_port(draft, candidates))
    computer = _ask_computer(
        "the computer the process runs on", source_computer or default_computer
    )
    while True:
        inputs = _ask_pairs("fixed input", "the same for every element", _process_inputs(draft))
        options = _ask_pairs(
            "option",
            "queue_name, max_wallclock_seconds, resources, monitors, ...",
            "\n  e.g. queue_name = 'short', resources = { num_machines = 1 }",
        )
        echo_info("\n[bold]max_active[/bold]: at most this many runs at once (empty: no cap)")
        max_active = _ask("max_active", _max_active, default="")
        try:
            checked = checked_setup(
                replace(
                    draft,
                    inputs=inputs,
                    options={"computer": computer, **options},
                    source_computer=source_computer,
                    max_active=max_active,
                )
            )
            break
        except PipelineSetupError as exc:
            echo_error(escape(str(exc)))
            echo_info("  Please give the fixed inputs and options again.")
    first = {
        "process": checked.process,
        "input_port": checked.input_port,
        "inputs": checked.inputs,
        "options": checked.options,
    }
    steps = _ask_steps(checked, first, computer)
    if len(steps) > 1:
        checked = checked_setup(_chain(checked, steps))
    echo_info("\n[bold]Summary[/bold] (`veglia pipeline show NAME --toml` prints it again):")
    console.print(setup_toml(checked).split("\n", 1)[1], markup=False, end="")
    echo_info("\n[bold]name[/bold]: what to call it (a word, e.g. align-reads)")
    name = _ask("name", _new_name)
    enabled = click.confirm("  Enable it now (the daemon starts it on new elements)?", default=True)
    return replace(checked, name=name, enabled=enabled)


def _new_name(answer: str) -> str:
    name = check_name(answer)
    try:
        existing = load_pipeline_setup(name)
    except NotExistent:
        return name
    raise PipelineSetupError(
        f"A pipeline setup named {name!r} exists already (version {existing.version}); give "
        "another name."
    )
