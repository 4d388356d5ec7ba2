"""Workflows: processes that call calc jobs and other workflows, step by step.

A :class:`WorkChain` runs the steps of its ``outline`` (plumpy's ``while_``, ``if_`` and
``return_``), keeps what they learn in ``self.ctx``, and waits for the processes it
submits before the next step, as AiiDA's work chains do::

    class TwoSteps(WorkChain):
        @classmethod
        def define(cls, spec):
            super().define(spec)
            spec.input("x", valid_type=Int)
            spec.outline(cls.first, cls.second, cls.results)

        def first(self):
            return ToContext(job=self.submit(ShellJob, ...))

Each child gets a ``call`` link from the workflow. The waiting is checkpointed like every
state: a workflow whose worker dies is continued by another, which waits for the same
children. Children run in the daemon when the workflow does (possibly on other workers),
and beside it on the same loop when it was started with ``engine.run``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import plumpy
from plumpy.process_states import ProcessState
from plumpy.workchains import _PropagateReturn, if_, return_, while_

from veglia.engine.daemon.control import request_kill
from veglia.engine.exit_codes import ExitCode
from veglia.engine.launch import launch_child
from veglia.engine.persistence import decode_value, encode_value
from veglia.engine.process import Process
from veglia.engine.process_spec import ProcessSpec
from veglia.engine.progress import workflow_progress
from veglia.engine.runner import get_runner
from veglia.engine.waiting import InterruptibleWaiting
from veglia.notifications import notify
from veglia.orm.attributes import WAITING_FOR
from veglia.orm.nodes import ProcessNode, WorkflowNode, load_node

__all__ = ["ToContext", "WorkChain", "WorkChainSpec", "append_", "if_", "return_", "while_"]


class Context(dict):
    """``self.ctx``: a dict whose keys are also attributes (``ctx.jobs``)."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(
                f"The context has no {key!r} (it has: {', '.join(self)})"
            ) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        del self[key]


class WorkChainSpec(ProcessSpec, plumpy.WorkChainSpec):
    """A process spec with an ``outline``."""


class ToContext(dict):
    """Returned by a step: wait for these processes, then put them in ``self.ctx``.

    ``ToContext(job=node)`` sets ``ctx.job``; ``ToContext(jobs=append_(node))`` appends to
    the list ``ctx.jobs``.
    """


class _Append:
    def __init__(self, node: ProcessNode) -> None:
        self.node = node


def append_(node: ProcessNode) -> _Append:
    """In :class:`ToContext`: append the process to a list in the context, not assign it."""
    return _Append(node)


class ChildrenWaiting(InterruptibleWaiting):
    """WAITING until the workflow's submitted children have terminated.

    ``data`` is a list of ``{"pk", "key", "action"}``: plain, so it is checkpointed.
    """

    async def execute(self) -> Any:

        process: WorkChain = self.process  # type: ignore[assignment]
        pks = [item["pk"] for item in self.data]
        # A kill interrupts the wait; on_kill then kills the children.
        await self._interruptible(get_runner().child_watcher.wait(pks), finish_first=False)
        process.resolve_awaited(self.data)
        return self.create_state(ProcessState.RUNNING, process.do_step)


class WorkChain(Process):
    """A workflow of steps; see the module docstring."""

    _spec_class = WorkChainSpec
    _node_class = WorkflowNode
    _entry_point_group = "workflows"
    #: Whether the end of this workflow, when no other called it, is notified. Off for
    #: wrappers of a single job (the restart policy), which would mail once per job.
    notify_on_finish: ClassVar[bool] = True

    @classmethod
    def spec(cls) -> WorkChainSpec:  # type: ignore[override]
        return super().spec()  # type: ignore[return-value]

    @classmethod
    def get_state_classes(cls) -> dict[Any, Any]:
        states = dict(super().get_state_classes())
        states[ProcessState.WAITING] = ChildrenWaiting
        return states

    #: Methods the engine calls: a step of the same name would silently replace one.
    _RESERVED = frozenset(
        {"step", "step_until_terminated", "execute", "run", "do_step", "kill", "pause", "play"}
        | {"submit", "out", "report", "to_context", "resolve_awaited", "kill_children"}
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        clash = sorted(cls._RESERVED & set(cls.__dict__))
        if clash:
            raise TypeError(
                f"{cls.__name__} defines {', '.join(clash)}, which the engine calls on every "
                "workflow; rename the step (say, 'run_step')."
            )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ctx = Context()
        self._stepper: Any = None
        self._awaiting: list[dict[str, Any]] = []
        # Children are keyed "<step>.<n>": the step count is checkpointed before each step
        # runs, so a step repeated after a worker died gives its children the same keys.
        self._steps_done = 0
        self._children_in_step = 0
        self._resumed = False

    def on_create(self) -> None:
        super().on_create()
        self._stepper = self.spec().get_outline().create_stepper(self)

    # -- persistence -----------------------------------------------------------------------
    def save_instance_state(self, out_state: Any, save_context: Any) -> None:

        super().save_instance_state(out_state, save_context)
        out_state["ctx"] = encode_value(dict(self.ctx))
        out_state["steps_done"] = self._steps_done
        if self._stepper is not None:
            out_state["stepper_state"] = self._stepper.save()

    def load_instance_state(self, saved_state: Any, load_context: Any) -> None:

        super().load_instance_state(saved_state, load_context)
        self.ctx = Context(decode_value(saved_state.get("ctx") or {}))
        self._awaiting = []
        self._steps_done = int(saved_state.get("steps_done", 0))
        self._children_in_step = 0
        self._resumed = True
        self._stepper = None
        if saved_state.get("stepper_state") is not None:
            self._stepper = (
                self.spec().get_outline().recreate_stepper(saved_state["stepper_state"], self)
            )

    # -- stepping ------------------------------------------------------------------------------
    async def run(self) -> Any:
        return self.do_step()

    def do_step(self) -> Any:
        """One step of the outline; then wait for what it submitted, go on, or finish."""
        self._awaiting = []
        self._children_in_step = 0
        try:
            finished, value = self._stepper.step()
        except _PropagateReturn as exc:
            finished, value = True, exc.exit_code
        finally:
            self._steps_done += 1
            self._resumed = False  # later steps are new: none of their children exist yet
        if isinstance(value, ToContext):
            self.to_context(**value)
            value = None
        if isinstance(value, ExitCode) and value.status != 0:
            return value  # a step that returns a failing exit code ends the workflow
        if not finished:
            if self._awaiting:
                pks = [item["pk"] for item in self._awaiting]
                assert self.node is not None
                self.node.set_attribute(WAITING_FOR, pks)  # shown by `process list`
                text = ", ".join(map(str, pks))
                return plumpy.Wait(None, msg=f"Waiting for {text}", data=list(self._awaiting))
            return plumpy.Continue(self.do_step)
        return value if isinstance(value, ExitCode) else ExitCode(0)

    def to_context(self, **children: ProcessNode | _Append) -> None:
        """Wait for these processes before the next step, then put them in the context."""
        for key, value in children.items():
            action = "append" if isinstance(value, _Append) else "assign"
            node = value.node if isinstance(value, _Append) else value
            if not isinstance(node, ProcessNode):
                raise TypeError(
                    f"ToContext({key}=...) takes the node of a submitted process, not "
                    f"{type(node).__name__}; use self.submit(...)."
                )
            self._awaiting.append({"pk": node.pk, "key": key, "action": action})

    def resolve_awaited(self, awaited: list[dict[str, Any]]) -> None:

        if self.node is not None:
            self.node.delete_attribute(WAITING_FOR)
        for item in awaited:
            node = load_node(item["pk"])
            if item["action"] == "append":
                self.ctx.setdefault(item["key"], [])
                self.ctx[item["key"]] = [*self.ctx[item["key"]], node]
            else:
                self.ctx[item["key"]] = node

    # -- children --------------------------------------------------------------------------
    def submit(self, process: Any, /, **inputs: Any) -> ProcessNode:
        """Launch a child process (a class or a builder); return its node at once."""

        assert self.node is not None
        call_key = f"{self._steps_done}.{self._children_in_step}"
        self._children_in_step += 1
        return launch_child(self.node, process, inputs, call_key, resumed=self._resumed)

    def kill_children(self, message: str) -> None:
        """Kill the children still running, wherever they run (without waiting)."""

        if self.node is None:
            return
        for child in self.node.called:
            if not child.is_terminated:
                request_kill(child, message)

    def on_kill(self, msg: Any) -> None:
        super().on_kill(msg)
        self.kill_children(f"its caller, process {self.pid}, was killed")

    def on_terminal_state_recorded(self) -> None:
        super().on_terminal_state_recorded()
        self._notify_finished()

    def _notify_finished(self) -> None:
        """One message when a pipeline (a workflow no other workflow called) ends."""

        node = self.node
        assert node is not None
        if not self.notify_on_finish or node.caller is not None:
            return
        node.refresh()
        name = node.label or node.process_type
        if node.is_finished_ok:
            outcome = "finished"
        elif node.is_finished:
            outcome = f"failed [{node.exit_status}]"
        else:
            outcome = node.process_state or "ended"
        progress = workflow_progress(node)
        notify(
            "workflow_finished",
            f"pipeline {name} (process {node.pk}) {outcome}",
            f"Pipeline {name} (process {node.pk}) {outcome} after "
            f"{progress.elapsed_text}.\n\nSteps: {progress.summary}.\n"
            + (f"Exit message: {node.exit_message}\n" if node.exit_message else "")
            + f"\nSee `veglia process show {node.pk}` and `veglia process report {node.pk}`.",
        )

    def out_many(self, outputs: dict[str, Any]) -> None:
        """Attach several outputs at once (``self.out_many(dict(job.outputs.items()))``)."""
        for label, value in outputs.items():
            self.out(label, value)
