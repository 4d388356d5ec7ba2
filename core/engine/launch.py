"""Launching processes: in the foreground (``run``) or through the daemon (``submit``)."""

from __future__ import annotations

from typing import Any

from veglia.engine.builder import ProcessBuilder
from veglia.engine.process import Process
from veglia.orm.nodes import ProcessNode

__all__ = ["run", "run_get_node", "submit"]


def _split(process: type[Process] | ProcessBuilder, inputs: dict[str, Any]) -> tuple[type, dict]:
    if isinstance(process, ProcessBuilder):
        return process.process_class, {**process.to_dict(), **inputs}
    return process, inputs


def run_get_node(
    process: type[Process] | ProcessBuilder, **inputs: Any
) -> tuple[dict[str, Any], ProcessNode]:
    """Run in this Python process until it ends; return its outputs and its node."""
    from veglia.engine.runner import get_runner

    process_class, all_inputs = _split(process, inputs)
    runner = get_runner()
    instance = runner.instantiate(process_class, all_inputs)
    runner.run_until_terminated(instance)
    assert instance.node is not None
    node = instance.node.refresh()
    if instance.is_excepted:
        raise instance.exception()  # type: ignore[misc]
    return dict(instance.outputs), node


def run(process: type[Process] | ProcessBuilder, **inputs: Any) -> dict[str, Any]:
    """Run in this Python process until it ends; return its outputs."""
    return run_get_node(process, **inputs)[0]


def submit(process: type[Process] | ProcessBuilder, **inputs: Any) -> ProcessNode:
    """Store the process and hand it to the daemon; return its node at once."""
    from veglia.engine.runner import get_runner
    from veglia.engine.submission import notify_daemon

    process_class, all_inputs = _split(process, inputs)
    instance = get_runner().instantiate(process_class, all_inputs)
    assert instance.node is not None
    node = instance.node
    node.set_attribute("daemon", True)
    instance.close()
    notify_daemon(node)
    return node
