"""The base of every veglia process: a plumpy process whose record is a node.

Every state change is written to the node (``process_state``) and, until the process ends,
a checkpoint of plain data goes into the node's ``checkpoint`` column, so another worker
can load it and carry on (see :mod:`veglia.engine.persistence`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import plumpy
from plumpy.process_states import ProcessState

from veglia.engine.builder import ProcessBuilder
from veglia.engine.exit_codes import ExitCode, ExitCodes
from veglia.engine.persistence import checkpoint_of, decode_value, encode_value, load_checkpoint
from veglia.engine.process_spec import ProcessSpec
from veglia.engine.runner import get_runner
from veglia.entry_points import get_entry_points, load_entry_point
from veglia.exceptions import EntryPointLoadError, MissingEntryPointError, StepAbandoned
from veglia.manage import get_storage
from veglia.notifications import notify
from veglia.orm.attributes import CALL_KEY, DAEMON, LAUNCH, PAUSED, PAUSED_REASON
from veglia.orm.data import to_node
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node
from veglia.orm.process_nodes import TERMINAL_STATES, ProcessNode
from veglia.storage.outage import is_storage_outage

if TYPE_CHECKING:
    from plumpy.utils import AttributesFrozendict

    from veglia.engine.dehydration import Wake
    from veglia.storage.backend import HeldTransaction

__all__ = [
    "CALLED_BY",
    "NODE_ATTRIBUTES",
    "TO_DAEMON",
    "Process",
    "load_process",
    "load_process_class",
    "save_checkpoint",
]

#: The workflow node creating processes here, and the call key of the one being created.
CALLED_BY: contextvars.ContextVar[tuple[ProcessNode, str | None] | None] = contextvars.ContextVar(
    "veglia_called_by", default=None
)

#: Whether the process being created goes to the daemon (``submit``): its node is then
#: stored with the ``daemon`` flag, in the commit of the node itself.
TO_DAEMON: contextvars.ContextVar[bool] = contextvars.ContextVar("veglia_to_daemon", default=False)

#: Attributes the launcher puts on the node of the process being created, in the node's
#: own commit (a pipeline setup's run names its element: no moment where the run exists
#: but does not say which element it is for).
NODE_ATTRIBUTES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "veglia_node_attributes", default=None
)

LOGGER = logging.getLogger("veglia.engine")


def flatten_inputs(inputs: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``{"a": {"b": node}}`` -> ``[("a__b", node)]``: link labels of nested ports."""
    flat: list[tuple[str, Any]] = []
    for key, value in inputs.items():
        label = f"{prefix}__{key}" if prefix else key
        if isinstance(value, Mapping):
            flat.extend(flatten_inputs(dict(value), label))
        else:
            flat.append((label, value))
    return flat


def plain_data(value: Any) -> Any:
    """Inputs (frozen namespaces, tuples) as plain dicts and lists; nodes stay nodes."""
    if isinstance(value, Mapping) or hasattr(value, "items"):
        return {k: plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    return value


class _ExitCodesOfSpec:
    """``MyProcess.exit_codes`` (and ``self.exit_codes``): the exit codes of the spec."""

    def __get__(self, instance: object, owner: type[Process]) -> ExitCodes:
        return owner.spec().exit_codes


class Process(plumpy.Process):
    """A process recorded in the provenance graph."""

    _spec_class = ProcessSpec
    _node_class: ClassVar[type[ProcessNode]] = ProcessNode

    @classmethod
    def define(cls, spec: ProcessSpec) -> None:  # type: ignore[override]
        super().define(spec)
        spec.input_namespace("metadata", required=False)
        spec.input("metadata.label", valid_type=str, required=False)
        spec.input("metadata.description", valid_type=str, required=False)
        spec.inputs.valid_type = Node
        spec.outputs.valid_type = Node
        # Unknown inputs and outputs are mistakes (a typo in a port name), not extras.
        spec.inputs.dynamic = False
        spec.outputs.dynamic = False

    @classmethod
    def get_builder(cls) -> ProcessBuilder[Process]:

        return ProcessBuilder(cls)

    exit_codes: ClassVar[ExitCodes] = _ExitCodesOfSpec()  # type: ignore[assignment]

    #: Where the class is registered, for :meth:`process_type`.
    _entry_point_group: ClassVar[str] = "calculations"

    @classmethod
    def process_type(cls) -> str:
        """The entry point name when registered, else the import path."""

        for entry_point in get_entry_points(cls._entry_point_group):
            if entry_point.value == f"{cls.__module__}:{cls.__qualname__}":
                return entry_point.name
        return f"{cls.__module__}:{cls.__qualname__}"

    # -- the node --------------------------------------------------------------------------
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.node: ProcessNode | None = None

    if TYPE_CHECKING:
        # plumpy's is Optional: None only before the process is set up, and the steps,
        # parsers and hooks that read it all run after. (For type checkers only: the
        # property stays plumpy's.)
        @property
        def inputs(self) -> AttributesFrozendict: ...

        # plumpy's says plumpy's ProcessSpec; it is made of _spec_class, veglia's.
        @classmethod
        def spec(cls) -> ProcessSpec: ...

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self.inputs.get("metadata", {})) if self.inputs else {}

    #: Top-level inputs that are settings, not data: they are not stored as input nodes.
    non_db_inputs: ClassVar[frozenset[str]] = frozenset({"metadata", "code", "monitors"})

    def _create_node(self) -> ProcessNode:
        node = self._node_class(
            process_type=self.process_type(),
            label=self.metadata.get("label", ""),
            description=self.metadata.get("description", ""),
        )
        node.process_state = ProcessState.CREATED.value
        node.set_attribute(LAUNCH, launch_context())
        self.prepare_node(node)
        incoming: list[tuple[Node, str, str]] = []
        skip = self.non_db_inputs
        for label, value in flatten_inputs({k: v for k, v in self.inputs.items() if k not in skip}):
            if isinstance(value, Node):
                incoming.append((value, "input", label))
        call = CALLED_BY.get()
        if call is not None:
            caller, call_key = call
            incoming.append((caller, "call", "CALL"))
            if call_key is not None:
                node.set_attribute(CALL_KEY, call_key)
        if TO_DAEMON.get():
            # With the node, not after it: a submitter that dies before it hands the
            # process over leaves a daemon process the daemon's repair finds (an unflagged
            # one would wait, created, for ever), and one commit instead of two.
            node.set_attribute(DAEMON, True)
        node.set_attributes(NODE_ATTRIBUTES.get() or {})
        # One transaction: a worker that dies here leaves either no node or a whole one,
        # which a resumed caller finds by its call key. New inputs go in the same INSERT.
        node.store(incoming, together=[source for source, _, _ in incoming])
        return node

    def prepare_node(self, node: ProcessNode) -> None:
        """Set attributes on the node before it is stored (subclasses)."""

    def on_create(self) -> None:
        super().on_create()
        if self.node is None:
            self.node = self._create_node()
            self._pid = self.node.pk

    def report(self, message: str, *args: Any) -> None:
        """A line in the process's log, shown by ``veglia process report``."""
        text = message % args if args else message
        LOGGER.info("[%s] %s", self.pid, text)
        if self.node is not None:
            self.node.add_log("REPORT", text)

    # -- persistence -------------------------------------------------------------------------
    def encode_input_args(self, inputs: Any) -> Any:

        return encode_value(inputs)

    def decode_input_args(self, encoded: Any) -> Any:

        return decode_value(encoded)

    def save_instance_state(self, out_state: Any, save_context: Any) -> None:
        super().save_instance_state(out_state, save_context)
        out_state["node_pk"] = self.node.pk if self.node else None

    def load_instance_state(self, saved_state: Any, load_context: Any) -> None:

        super().load_instance_state(saved_state, load_context)
        node = getattr(load_context, "node", None)
        if node is None or node.pk != saved_state["node_pk"]:
            node = load_node(saved_state["node_pk"])
        assert isinstance(node, ProcessNode)  # a checkpoint names its process's node
        self.node = node

    # -- a database that went away ---------------------------------------------------------
    def create_state(self, state_label: Any, *args: Any, **kwargs: Any) -> Any:
        # plumpy makes EXCEPTED of whatever a step raised; a database outage says nothing
        # about the process, so it leaves the step instead (see StepAbandoned).
        if state_label == ProcessState.EXCEPTED and args and is_storage_outage(args[0]):
            raise StepAbandoned(self.node.pk if self.node else None) from args[0]
        return super().create_state(state_label, *args, **kwargs)

    def transition_failed(
        self, initial_state: Any, final_state: Any, exception: Exception, trace: Any
    ) -> None:
        if is_storage_outage(exception) and final_state != ProcessState.CREATED:
            raise StepAbandoned(self.node.pk if self.node else None) from exception
        super().transition_failed(initial_state, final_state, exception, trace)

    @contextmanager
    def closing_writes(self) -> Iterator[None]:
        """Write what a step found in the commit of the state change it ends in: one
        commit, not two, and the state never seen without what led to it.

        Nothing may be awaited after this block before the step ends: on SQLite the first
        write holds the database's write lock until that commit, and the worker's other
        processes write in this thread. Everything the step writes after it joins it. Should
        a step await all the same, the writes are committed on their own (and a warning
        says so).
        """
        storage = get_storage()
        held = storage.held()
        if held is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # not stepped by a loop: nothing to join
                with storage.transaction():
                    yield
                return
            held = storage.hold()
            loop.call_soon(_commit_stray_writes, held)
        try:
            yield
        except BaseException:
            held.end(commit=False)
            raise
        if held.error is not None:  # a failed write that something caught: as transaction()
            held.end(commit=False)
            raise held.error

    @contextmanager
    def outputs_stored_at_end(self) -> Iterator[None]:
        """Outputs emitted in the block are stored and linked at its end, in the order they
        were emitted (a parser's Python runs before the step's first write, not while it
        holds SQLite's write lock); none is stored should the block raise. As in aiida-core,
        a parser's outputs are attached once it has returned."""
        deferred: list[tuple[str, Node]] = []
        self._deferred_outputs = deferred
        try:
            yield
        finally:
            self._deferred_outputs = None
        for output_port, value in deferred:
            self._store_output(output_port, value)

    def when_step_ends(self, callback: Callable[[], Any]) -> None:
        """Call ``callback`` once the step ends and what it wrote is committed (at once when
        not stepped by a loop): clean-up that need not hold the database's write lock."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            callback()
            return
        self._step_end_callbacks = (*self._step_end_callbacks, callback)

    _step_end_callbacks: tuple[Callable[[], Any], ...] = ()

    async def step(self) -> None:
        try:
            await super().step()
        finally:
            # A step that ended without a state change (an interruption): its writes stand.
            held = get_storage().held()
            if held is not None:
                held.end(commit=True)
            callbacks, self._step_end_callbacks = self._step_end_callbacks, ()
            for callback in callbacks:
                try:
                    callback()
                except Exception:  # clean-up only: the step's outcome stands
                    LOGGER.exception("Clean-up after a step of process %s failed", self.pid)

    def transition_to(self, new_state: Any, **kwargs: Any) -> None:
        # One commit per state change: the new state, its checkpoint, what entering it
        # wrote (an exit status, logs, the trace record) and the step's closing writes,
        # together or not at all.
        storage = get_storage()
        with storage.transaction(storage.held()):
            super().transition_to(new_state, **kwargs)

    def on_entered(self, from_state: Any) -> None:
        super().on_entered(from_state)
        if self.node is None:
            return

        label = self._state.LABEL
        assert isinstance(label, ProcessState)  # plumpy's process states are labelled so
        state = label.value
        terminal = state in TERMINAL_STATES
        exit_with, self._exit_to_write = self._exit_to_write, None
        self.node.set_state_and_checkpoint(
            state, None if terminal else checkpoint_of(self), exit_with
        )
        if terminal:
            for write in self._terminal_writes:
                write()
            self.on_terminal_state_recorded()

    _terminal_writes: tuple[Callable[[], None], ...] = ()

    def take_wake(self) -> Wake | None:
        """What woke this process from dehydration, once (None: it was not asleep, or this
        is not a daemon worker). See ``veglia.engine.dehydration``."""
        sleeps = get_runner().sleeps
        if sleeps is None or self.node is None:
            return None
        return sleeps.take_wake(self.node.pk)

    def write_when_terminated(self, write: Callable[[], None]) -> None:
        """Run ``write`` in the commit that records the process's end (a daemon worker
        gives up its lease on it there)."""
        self._terminal_writes = (*self._terminal_writes, write)

    def on_terminal_state_recorded(self) -> None:
        """The process ended and its node says so (subclasses report, notify; call super)."""

        # A workflow here may be waiting for this one.
        get_runner().child_watcher.wake(self.node.pk if self.node is not None else None)

    # -- results -----------------------------------------------------------------------------
    _deferred_outputs: list[tuple[str, Node]] | None = None

    def out(self, output_port: str, value: Any) -> None:
        value = to_node(value)
        super().out(output_port, value)
        if self._deferred_outputs is not None:
            self._deferred_outputs.append((output_port, value))
        else:
            self._store_output(output_port, value)

    def _store_output(self, output_port: str, value: Node) -> None:
        value.store()
        assert self.node is not None
        link_type = "create" if self.node.node_type == "process.calcjob" else "output"
        value.add_incoming(self.node, link_type, output_port.replace(".", "__"))

    #: The exit status and message, written with the state the process enters (on_entered).
    _exit_to_write: tuple[int | None, str | None] | None = None

    def on_finish(self, result: Any, successful: bool) -> None:
        super().on_finish(result, successful)
        assert self.node is not None
        code = result if isinstance(result, ExitCode) else ExitCode(0)
        # Written with the FINISHED state (on_entered): one statement less in the end's
        # transaction, which holds SQLite's write lock.
        self._exit_to_write = (code.status, code.message)
        if code.status:  # `process report` says why it failed, as `process show` does
            self.node.add_log(
                "REPORT", f"finished with exit status {code.status}: {code.message or 'no message'}"
            )

    def on_except(self, exc_info: Any) -> None:
        super().on_except(exc_info)
        if self.node is not None:
            import traceback

            text = "".join(traceback.format_exception(*exc_info))
            self.node.add_log("ERROR", f"The process excepted: {exc_info[1]}", traceback=text)

            notify(
                "process_excepted",
                f"process {self.node.pk} ({self.node.process_type}) excepted",
                f"Process {self.node.pk} failed in a way retrying does not fix:\n\n"
                f"{type(exc_info[1]).__name__}: {exc_info[1]}\n\nSee `veglia process report "
                f"{self.node.pk}`.",
            )
            self.node.set_exit(None, f"{type(exc_info[1]).__name__}: {exc_info[1]}")

    def on_kill(self, msg: Any) -> None:
        super().on_kill(msg)
        if self.node is not None:
            text = (
                (msg or {}).get(plumpy.process_comms.MESSAGE_TEXT_KEY)
                if isinstance(msg, dict)
                else msg
            )
            self.node.set_exit(None, str(text or "Killed"))
            self.node.add_log("REPORT", f"Killed: {text or 'no reason given'}")

    def on_paused(self, msg: str | None = None) -> None:
        super().on_paused(msg)
        if self.node is not None:
            self.node.set_attributes({PAUSED: True, PAUSED_REASON: msg or ""})
            self.node.add_log("REPORT", f"Paused: {msg or 'on request'}")

            save_checkpoint(self)

    def on_playing(self) -> None:
        super().on_playing()
        if self.node is not None:
            self.node.set_attributes({PAUSED: False, PAUSED_REASON: ""})
            self.node.add_log("REPORT", "Played")
            # As the pause was: a process loaded from a checkpoint written while it was
            # paused (a dehydrated one woken, one whose worker died) would wait paused for a
            # play that has come already.
            save_checkpoint(self)


def load_process_class(process_type: str) -> type[Process]:
    """The class of a process type as nodes record it: a ``veglia.calculations`` or
    ``veglia.workflows`` entry point name, or ``module:QualName``."""
    if ":" in process_type:
        import importlib

        module, _, qualname = process_type.partition(":")
        try:
            target: Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise EntryPointLoadError(
                f"Process class {process_type!r} cannot be imported: {exc}. Install the "
                "package that provides it, or put its module on the PYTHONPATH."
            ) from None
        process_class: type[Process] = target
        return process_class
    for group in ("calculations", "workflows"):
        if any(ep.name == process_type for ep in get_entry_points(group)):
            loaded: type[Process] = load_entry_point(group, process_type)
            return loaded
    known = [ep.name for group in ("calculations", "workflows") for ep in get_entry_points(group)]
    raise MissingEntryPointError(
        f"No calculation or workflow {process_type!r}. Installed: {', '.join(known) or 'none'}."
    )


def save_checkpoint(process: Process) -> None:
    """Write the process's checkpoint into its node."""
    assert process.node is not None
    process.node.set_checkpoint(checkpoint_of(process))


def load_process(node: ProcessNode, **context: Any) -> Process:
    """Recreate the live process from its node's checkpoint (``loop``, ``communicator``):
    a :class:`Process`, whatever else the checkpoint names (it is refused)."""
    return load_checkpoint(node, Process, **context)


def _commit_stray_writes(held: HeldTransaction) -> None:
    if held.open:
        LOGGER.warning("a step awaited after its closing writes: committed before its state change")
        held.end(commit=True)


@functools.lru_cache(maxsize=1)
def launch_context() -> dict[str, str]:
    """How this Python process was started, recorded on the processes it creates: reporters
    show it (Seqera Platform's command line, launch dir and user)."""
    import getpass
    import shlex
    import sys

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = str(os.getuid())
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    argv = [os.path.basename(sys.argv[0]), *sys.argv[1:]] if sys.argv and sys.argv[0] else []
    return {"command": shlex.join(argv) or "python", "cwd": cwd, "user": user}
