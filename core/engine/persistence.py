"""Checkpoints: a process saved as plain, versioned JSON in its node, and loaded back.

Inputs and outputs that are nodes are saved as references (``{"__node__": uuid}``), so a
checkpoint holds no pickled objects and a later release can still read it.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import importlib
import json
from typing import TYPE_CHECKING, Any, TypeVar

import plumpy

from veglia.engine.exit_codes import ExitCode
from veglia.exceptions import ProcessClassError, StorageError
from veglia.manage import get_storage
from veglia.orm.computers import Code, load_code
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node, shared_strings
from veglia.storage.outage import is_storage_outage

if TYPE_CHECKING:
    from veglia.orm.process_nodes import ProcessNode

__all__ = [
    "CHECKPOINT_VERSION",
    "checkpoint_of",
    "decode_value",
    "encode_value",
    "load_checkpoint",
    "load_checkpoint_class",
]

P = TypeVar("P")

CHECKPOINT_VERSION = 1
#: Classes a checkpoint names that have since moved: checkpoints written before the move
#: (a job waiting through an upgrade) still load.
MOVED_CLASSES = {
    "veglia.engine.calcjob:JobWaiting": "veglia.engine.calcjob.commands:JobWaiting",
    "veglia.engine.workchain:ChildrenWaiting": "veglia.engine.workflow.workchain:ChildrenWaiting",
}


def encode_value(value: Any) -> Any:
    """Plain data for JSON: nodes become references, mappings and sequences recurse."""

    if isinstance(value, Node):
        return {"__node__": value.store().uuid}
    if isinstance(value, Code):
        return {"__code__": value.pk}
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


#: While a checkpoint loads: its nodes by UUID. plumpy decodes the inputs twice (as given
#: and as parsed); each node is read once, and both hold the same object.
_LOADING: contextvars.ContextVar[dict[str, Node] | None] = contextvars.ContextVar(
    "veglia_checkpoint_nodes", default=None
)


def decode_value(value: Any) -> Any:

    if isinstance(value, dict):
        if set(value) == {"__node__"}:
            loaded = _LOADING.get()
            if loaded is None:
                return load_node(value["__node__"])
            node = loaded.get(value["__node__"])
            if node is None:
                node = loaded[value["__node__"]] = load_node(value["__node__"])
            return node
        if set(value) == {"__code__"}:
            return load_code(value["__code__"])
        return {k: decode_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value


#: Types a checkpoint holds as they are, by exact type (an enum of str is not one of them).
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def _to_json(value: Any) -> Any:
    """Bundle values JSON lacks: sets, tuples and classes, as tagged plain data."""
    if type(value) in _PLAIN_TYPES:  # most values: spared the checks below (every checkpoint)
        return value
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, tuple):
        return {"__tuple__": [_to_json(v) for v in value]}
    if isinstance(value, set | frozenset):
        return {"__set__": [_to_json(v) for v in value]}
    if isinstance(value, type):
        return {"__type__": f"{value.__module__}:{value.__qualname__}"}
    if isinstance(value, ExitCode):
        return {"__exit_code__": [value.status, value.message, value.label]}
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"{type(value).__name__} ({value!r}) cannot go into a checkpoint")


def _from_json(value: dict[str, Any]) -> Any:
    if len(value) == 1:
        if "__tuple__" in value:
            return tuple(value["__tuple__"])
        if "__set__" in value:
            return set(value["__set__"])
        if "__exit_code__" in value:
            return ExitCode(*value["__exit_code__"])
        if "__type__" in value:
            return load_checkpoint_class(value["__type__"], object)
    return value


def load_checkpoint_class(name: str, base: type) -> type:
    """The class ``module:QualName`` a checkpoint names, imported, when it is a subclass of
    ``base``; a ``ProcessClassError`` otherwise.

    A checkpoint is data anyone who can write the database can change, and this imports
    the module it names (its import-time code runs). What it then uses is checked to be a
    class of the kind expected before anything calls it: a function or any other object a
    forged name reaches is refused here.
    """
    module, sep, qualname = name.partition(":")
    if not (sep and module and qualname):
        raise ProcessClassError(f"{name!r} is no class name (module:QualName)")
    try:
        target: Any = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
    except Exception as exc:  # a module's own code may raise anything as it is imported
        if is_storage_outage(exc):  # says nothing about the class: the step is tried again
            raise
        raise ProcessClassError(
            f"class {name} cannot be imported here ({type(exc).__name__}: {exc})"
        ) from None
    if not (isinstance(target, type) and issubclass(target, base)):
        raise ProcessClassError(f"{name} is no {base.__qualname__} class")
    return target


class _CheckpointClassLoader(plumpy.loaders.ObjectLoader):
    """What plumpy may load for a checkpoint's bundles (the process, its state, the state's
    command): classes it can recreate from saved data, and nothing else."""

    def load_object(self, identifier: str) -> Any:
        return load_checkpoint_class(identifier, plumpy.persistence.Savable)

    def identify_object(self, obj: Any) -> str:
        return f"{obj.__module__}:{obj.__qualname__}"


_CLASS_LOADER = _CheckpointClassLoader()
#: What a class defined where a daemon worker cannot import it needs (one sentence).
WHERE_PROCESS_CLASSES_GO = (
    "a daemon worker imports a process's class by its module's name, so define it in a "
    "module of an installed package (or one on the daemon's PYTHONPATH), or register it "
    "under a veglia.calculations or veglia.workflows entry point, not in a script"
)


def _moved_classes_renamed(value: Any) -> Any:
    if isinstance(value, dict):
        meta = value.get(plumpy.persistence.META)
        if isinstance(meta, dict):
            name = meta.get(plumpy.persistence.META__CLASS_NAME)
            if name in MOVED_CLASSES:
                meta[plumpy.persistence.META__CLASS_NAME] = MOVED_CLASSES[name]
        for item in value.values():
            _moved_classes_renamed(item)
    elif isinstance(value, list):
        for item in value:
            _moved_classes_renamed(item)
    return value


def checkpoint_of(process: plumpy.persistence.Savable) -> str:
    """The process's checkpoint as JSON text."""
    bundle = plumpy.persistence.Bundle(process)
    return json.dumps({"version": CHECKPOINT_VERSION, "bundle": _to_json(dict(bundle))})


def load_checkpoint(node: ProcessNode, base: type[P], **context: Any) -> P:
    """Recreate the live process from its node's checkpoint (``loop``, ``communicator``),
    refused unless the class it names is a subclass of ``base``:
    :func:`veglia.engine.process.load_process` gives ``Process`` (this module stands below
    it, as every process saves itself through it)."""
    # Its reads (the checkpoint, the input nodes) in one transaction: one commit.
    with get_storage().transaction():
        token = _LOADING.set({})
        try:
            return _load_process(node, base, **context)
        finally:
            _LOADING.reset(token)


def _load_process(node: ProcessNode, base: type[P], **context: Any) -> P:
    try:
        return _load_checked(node, base, **context)
    except ProcessClassError as exc:
        raise ProcessClassError(
            f"Process {node.pk} cannot be loaded: {exc}; {WHERE_PROCESS_CLASSES_GO}."
        ) from None


def _load_checked(node: ProcessNode, base: type[P], **context: Any) -> P:
    text = node.get_checkpoint()
    if not text:
        raise StorageError(
            f"Process {node.pk} has no checkpoint (state {node.process_state}); it cannot be "
            "continued."
        )
    # The strings of its inputs and states are the same for every process of a kind: a
    # worker holding thousands of them keeps one copy of each.
    data = shared_strings(json.loads(text, object_hook=_from_json))
    if data.get("version", 0) > CHECKPOINT_VERSION:
        raise StorageError(
            f"The checkpoint of process {node.pk} was written by a newer veglia; upgrade."
        )
    bundle = plumpy.persistence.Bundle.__new__(plumpy.persistence.Bundle)
    bundle.update(_moved_classes_renamed(data["bundle"]))
    # A process class before any instance is made, whatever the checkpoint says.
    meta = bundle.get(plumpy.persistence.META)
    name = meta.get(plumpy.persistence.META__CLASS_NAME) if isinstance(meta, dict) else None
    if not isinstance(name, str):
        raise StorageError(f"The checkpoint of process {node.pk} names no class; it is damaged.")
    load_checkpoint_class(name, base)
    if context.get("loop") is not None:
        # plumpy makes futures for the loaded process on the current loop: make it ours.
        asyncio.set_event_loop(context["loop"])
    # The process's own node, as just read: the process takes it rather than reading it again.
    load_context = plumpy.persistence.LoadSaveContext(loader=_CLASS_LOADER, node=node, **context)
    return bundle.unbundle(load_context)  # type: ignore[return-value]
