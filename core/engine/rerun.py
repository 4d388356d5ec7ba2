"""Running a finished process again.

- A calc job, with the inputs it had: to remake files that were damaged after they were
  stored (``veglia verify --rerun``, the web view's re-run).
- A workflow from one of its steps (``veglia process rerun PK --from STEP --set x=3``): a
  new run with the same inputs but those set, which takes the children the first run
  launched before STEP instead of launching them again, and runs STEP and what follows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from veglia.engine.builder import ProcessBuilder, ProcessBuilderNamespace
from veglia.engine.launch import run_get_node, submit
from veglia.engine.persistence import decode_value
from veglia.engine.pipeline_setup_check import takes_nodes
from veglia.engine.process import NODE_ATTRIBUTES, Process, load_process_class
from veglia.engine.runner import get_runner
from veglia.exceptions import InputValidationError, NotExistent, ProcessActiveError
from veglia.manage import get_storage
from veglia.orm.attributes import (
    CODE,
    MONITORS,
    NOT_REPRODUCIBLE,
    PLAIN_INPUTS,
    RERUN_FROM,
    RERUN_OF,
)
from veglia.orm.computers import load_code
from veglia.orm.data import to_node
from veglia.orm.loading import load_node
from veglia.orm.process_nodes import CalcJobNode, WorkflowNode
from veglia.pipeline_setups import parse_toml_value
from veglia.storage.times import utcnow

if TYPE_CHECKING:
    from veglia.engine.workflow.workchain import WorkChain

__all__ = [
    "builder_from_node",
    "parse_settings",
    "record_not_reproducible",
    "rerun_workflow",
    "run_again",
    "set_aside",
    "submit_again",
    "workflow_builder",
]


def set_aside(blobs: set[str]) -> None:
    """Quarantine damaged blobs before their jobs run again: identical new content then
    restores them for every node that shares them."""
    repository = get_storage().repository
    for sha256 in blobs:
        repository.quarantine(sha256)


def run_again(pk: int) -> CalcJobNode:
    """Run calc job ``pk`` again here, with the inputs it had; the new node, ended."""
    _, node = run_get_node(builder_from_node(_calcjob(pk)))
    node.set_attribute(RERUN_OF, pk)
    return node  # type: ignore[return-value]


def record_not_reproducible(pk: int, rerun: int, blobs: Iterable[str]) -> None:
    """Note on calc job ``pk`` that its rerun ``rerun`` did not make these stored SHA-256s
    again (NOT_REPRODUCIBLE): ``veglia verify`` reports it and stops suggesting a rerun."""
    record = {"rerun": rerun, "at": utcnow().isoformat(timespec="seconds"), "sha256": sorted(blobs)}
    _calcjob(pk).set_attribute(NOT_REPRODUCIBLE, record)


def submit_again(pk: int) -> CalcJobNode:
    """Hand calc job ``pk`` to the daemon to run again, with the inputs it had; the new
    node at once (it runs once a daemon does)."""
    node = submit(builder_from_node(_calcjob(pk)))
    node.set_attribute(RERUN_OF, pk)
    return node  # type: ignore[return-value]


def _calcjob(pk: int) -> CalcJobNode:
    node = load_node(pk)
    if not isinstance(node, CalcJobNode):
        raise NotExistent(f"Node {pk} is no calc job; only calc jobs run again.")
    return node


def builder_from_node(node: CalcJobNode) -> ProcessBuilder[Process]:
    """A builder filled with the inputs, code, options and monitors the job ran with."""

    process_class = load_process_class(node.process_type)
    inputs: dict[str, Any] = {}
    for label, value in node.inputs.items():
        target = inputs
        *namespaces, name = label.split("__")
        for namespace in namespaces:
            target = target.setdefault(namespace, {})
        target[name] = value
    code = node.get_attribute(CODE)
    if code:
        inputs["code"] = load_code(code["pk"])
    options = {k: v for k, v in (node.options or {}).items() if v is not None}
    options["right_size"] = False  # the same requests as the original
    inputs["metadata"] = {
        "label": f"rerun of {node.pk}" + (f" ({node.label})" if node.label else ""),
        "computer": node.computer_label,
        "options": options,
        "cache": False,
    }
    monitors = node.get_attribute(MONITORS) or []
    if monitors:
        inputs["monitors"] = {
            m["name"]: {k: v for k, v in m.items() if k != "name"} for m in monitors
        }
    builder = process_class.get_builder()
    for key, value in inputs.items():
        builder[key] = value
    return builder


# -- a workflow, from one of its steps -------------------------------------------------------------
def parse_settings(texts: Iterable[str]) -> dict[str, Any]:
    """``["x=3", "job.files.a=b"]`` -> ``{"x": 3, "job.files.a": "b"}``: values read as
    ``veglia pipeline edit --set`` reads them (TOML, else the text itself)."""
    settings: dict[str, Any] = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise InputValidationError(f"--set {text!r} is not NAME=VALUE; write e.g. x=3.")
        settings[name.strip()] = parse_toml_value(value.strip())
    return settings


def workflow_builder(
    node: WorkflowNode, settings: Mapping[str, Any] = {}
) -> ProcessBuilder[Process]:
    """A builder of ``node``'s workflow with the inputs it had (its input nodes, the plain
    values kept in PLAIN_INPUTS) and ``settings`` ({"dotted.input": value}) set over
    them; a value goes in as a node where its port takes nodes."""
    process_class = load_process_class(node.process_type)
    builder = process_class.get_builder()
    inputs: dict[str, Any] = decode_value(node.get_attribute(PLAIN_INPUTS) or {})
    for label, value in node.inputs.items():
        target = inputs
        *namespaces, name = label.split("__")
        for namespace in namespaces:
            target = target.setdefault(namespace, {})
        target[name] = value
    for key, value in inputs.items():
        builder[key] = value
    for dotted, value in settings.items():
        _set(builder, dotted, value)
    return builder


def _set(builder: ProcessBuilder[Process], dotted: str, value: Any) -> None:
    *path, name = dotted.split(".")
    target: Any = builder
    for depth, part in enumerate(path):
        where = ".".join(path[: depth + 1])
        if isinstance(target, ProcessBuilderNamespace):
            try:
                target = target[part]
            except KeyError:
                # A dynamic namespace's plain dict (a calc job's metadata in core.restart).
                target[part] = {}
                target = target[part]
        elif isinstance(target, dict):
            target = target.setdefault(part, {})
        else:
            raise InputValidationError(f"--set {dotted}: {where} is no namespace of inputs.")
    if isinstance(target, ProcessBuilderNamespace):
        port = target._namespace.get(name)
        target[name] = to_node(value) if port is not None and takes_nodes(port) else value
    else:
        target[name] = value


def rerun_workflow(
    pk: int, step: str, settings: Mapping[str, Any] = {}, *, to_daemon: bool = False
) -> WorkflowNode:
    """Run workflow ``pk`` again from ``step``, with ``settings`` changed: here until it
    ends, or handed to the daemon (``to_daemon``, returned at once). The new run records
    RERUN_OF and RERUN_FROM; its steps before ``step`` reuse the first run's children."""
    node = load_node(pk)
    if not isinstance(node, WorkflowNode):
        raise NotExistent(
            f"Node {pk} is no workflow run; `process rerun --from` takes a workflow's PK "
            "(a calc job runs again with `veglia verify --rerun`)."
        )
    if not node.is_terminated:
        raise ProcessActiveError(
            f"Process {pk} is still {node.process_state}; rerun it once it has ended (or "
            f"`veglia process kill {pk}` first)."
        )
    # A workflow node's class is a WorkChain (the node is checked above).
    process_class = cast("type[WorkChain]", load_process_class(node.process_type))
    steps = process_class.spec().step_names
    if step not in steps:
        raise InputValidationError(
            f"{node.process_type} has no step {step!r}; its steps: {', '.join(steps)}."
        )
    builder = workflow_builder(node, settings)
    builder.metadata.description = f"rerun of process {pk} from step {step}"
    # Only while the run is created: the children it creates must not carry them.
    token = NODE_ATTRIBUTES.set({RERUN_OF: pk, RERUN_FROM: step})
    try:
        if to_daemon:
            return submit(builder)  # type: ignore[return-value]
        instance = get_runner().instantiate(builder.process_class, builder.to_dict())
    finally:
        NODE_ATTRIBUTES.reset(token)
    get_runner().run_until_terminated(instance)
    assert instance.node is not None
    return instance.node.refresh()  # type: ignore[return-value]
