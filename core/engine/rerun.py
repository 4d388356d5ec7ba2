"""Running a finished calc job again with the inputs it had: to remake files that were
damaged after they were stored (``veglia verify --rerun``, the web view's re-run)."""

from __future__ import annotations

from typing import Any

from veglia.engine.builder import ProcessBuilder
from veglia.engine.launch import run_get_node, submit
from veglia.entry_points import load_process_class
from veglia.exceptions import NotExistent
from veglia.manage import get_storage
from veglia.orm.attributes import CODE, MONITORS, RERUN_OF
from veglia.orm.computers import load_code
from veglia.orm.nodes import load_node
from veglia.orm.process_nodes import CalcJobNode

__all__ = ["builder_from_node", "run_again", "set_aside", "submit_again"]


def set_aside(blobs: set[str]) -> None:
    """Quarantine damaged blobs before their jobs run again: identical new content then
    restores them for every node that shares them."""
    repository = get_storage().repository
    for sha256 in blobs:
        repository.quarantine(sha256)


def run_again(pk: int) -> CalcJobNode:
    """Run calc job ``pk`` again here, with the inputs it had; the new node, ended."""
    _, node = run_get_node(builder_from_node(_calcjob(pk)))  # type: ignore[arg-type]
    node.set_attribute(RERUN_OF, pk)
    return node  # type: ignore[return-value]


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


def builder_from_node(node: CalcJobNode) -> ProcessBuilder:
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
