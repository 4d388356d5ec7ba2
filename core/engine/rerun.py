"""Running a finished calc job again with the inputs it had: to remake files that were
damaged after they were stored (``veglia verify --rerun``)."""

from __future__ import annotations

from typing import Any

from veglia.engine.builder import ProcessBuilder
from veglia.entry_points import load_process_class
from veglia.orm.attributes import CODE, MONITORS
from veglia.orm.computers import load_code
from veglia.orm.nodes import CalcJobNode

__all__ = ["builder_from_node"]


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
