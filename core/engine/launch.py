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
    process: type[Process] | ProcessBuilder, /, **inputs: Any
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


def run(process: type[Process] | ProcessBuilder, /, **inputs: Any) -> dict[str, Any]:
    """Run in this Python process until it ends; return its outputs."""
    return run_get_node(process, **inputs)[0]


def submit(process: type[Process] | ProcessBuilder, /, **inputs: Any) -> ProcessNode:
    """Store the process and hand it to the daemon; return its node at once."""
    return _to_daemon(process, inputs, caller=None)


def _instantiate(
    process: type[Process] | ProcessBuilder, inputs: dict[str, Any], caller: ProcessNode | None
) -> Process:
    """The process, stored, with its ``call`` link from the caller when there is one."""
    from veglia.engine.runner import get_runner

    process_class, all_inputs = _split(process, inputs)
    instance = get_runner().instantiate(process_class, all_inputs)
    assert instance.node is not None
    if caller is not None:
        instance.node.add_incoming(caller, "call", "CALL")
    return instance


def _to_daemon(
    process: type[Process] | ProcessBuilder, inputs: dict[str, Any], caller: ProcessNode | None
) -> ProcessNode:
    from veglia.engine.submission import notify_daemon

    instance = _instantiate(process, inputs, caller)
    node = instance.node
    assert node is not None
    node.set_attribute("daemon", True)
    instance.close()
    notify_daemon(node)
    return node


def launch_child(
    caller: ProcessNode, process: type[Process] | ProcessBuilder, inputs: dict[str, Any]
) -> ProcessNode:
    """A process called by a workflow, linked to it: run in the daemon when the caller is,
    else beside the caller on this runner's loop."""
    from veglia.engine.runner import get_runner

    if caller.get_attribute("daemon"):
        return _to_daemon(process, inputs, caller)
    instance = _instantiate(process, inputs, caller)
    get_runner().start_local(instance)
    assert instance.node is not None
    return instance.node
