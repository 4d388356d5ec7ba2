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

A step may declare a failure behaviour: ``spec.on_failure(cls.align, go_back_to=cls.prepare)``
sends the workflow back to an earlier step (its context as it was then) when a child the
step waited for fails. A finished run can be sent back by hand too (``veglia process rerun
PK --from STEP``): a new run replays the steps before STEP with the children the first run
launched, and runs the rest again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import plumpy
from plumpy.persistence import LoadSaveContext
from plumpy.process_states import ProcessState
from plumpy.workchains import (
    _Block,
    _FunctionCall,
    _FunctionStepper,
    _If,
    _PropagateReturn,
    _While,
    return_,
)
from plumpy.workchains import if_ as _plumpy_if
from plumpy.workchains import while_ as _plumpy_while

from veglia.engine.daemon.control import request_kill
from veglia.engine.dehydration import ChildrenSleep
from veglia.engine.exit_codes import ExitCode
from veglia.engine.launch import find_called, launch_child
from veglia.engine.persistence import decode_value, encode_value
from veglia.engine.process import Process
from veglia.engine.process_spec import ProcessSpec
from veglia.engine.progress import workflow_progress
from veglia.engine.runner import get_runner
from veglia.engine.waiting import InterruptibleWaiting
from veglia.exceptions import ProcessDehydrated
from veglia.notifications import notify
from veglia.orm.attributes import (
    PLAIN_INPUTS,
    RERUN_FROM,
    RERUN_OF,
    REUSED_CALLS,
    WAITING_FOR,
    WENT_BACK,
)
from veglia.orm.computers import Code
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node
from veglia.orm.process_nodes import ProcessNode, WorkflowNode

__all__ = ["ToContext", "WorkChain", "WorkChainSpec", "append_", "if_", "return_", "while_"]

if TYPE_CHECKING:

    class _Outline(Protocol):
        def __call__(self, *instructions: Any) -> Any: ...

    # plumpy types these for its own WorkChain (whose steps are Callable[[WorkChain], Any]);
    # veglia's WorkChain runs the same instructions with its own subclasses' methods.
    def while_(condition: Callable[[Any], bool]) -> _Outline: ...
    def if_(condition: Callable[[Any], bool]) -> _Outline: ...

else:
    while_ = _plumpy_while
    if_ = _plumpy_if


class Context(dict[str, Any]):
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


@dataclass(frozen=True)
class FailureBehaviour:
    """What a workflow does when a child that ``step`` waited for fails: start again from
    the earlier step ``go_back_to``, at most ``attempts`` times (then it fails as without)."""

    step: str
    go_back_to: str
    attempts: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(
                f"on_failure({self.step!r}): attempts must be a whole number of at least 1, "
                f"not {self.attempts!r}."
            )


class _StepStepper(_FunctionStepper):
    """plumpy's stepper of one step, telling the workflow which step runs: its children
    are then known by step (failure behaviours, reruns from a step)."""

    def step(self) -> tuple[bool, Any]:
        workchain = cast("WorkChain", self._workchain)  # plumpy types it as its own WorkChain
        workchain._enter_step(self._fn.__name__)
        return super().step()


class _Step(_FunctionCall):
    def create_stepper(self, workchain: Any) -> _StepStepper:
        return _StepStepper(workchain, self._fn)

    def recreate_stepper(self, saved_state: Any, workchain: Any) -> _StepStepper:
        load_context = LoadSaveContext(workchain=workchain, func_spec=self)
        return _StepStepper.recreate_from(saved_state, load_context)  # type: ignore[return-value]


def _named_steps(instruction: Any, names: list[str]) -> Any:
    """The outline with each step made a :class:`_Step`; ``names`` gets the step names in
    outline order (each once)."""
    if isinstance(instruction, _FunctionCall):
        name = instruction._fn.__name__
        if name not in names:
            names.append(name)
        return instruction if isinstance(instruction, _Step) else _Step(instruction._fn)
    if isinstance(instruction, _Block):
        instruction._instruction[:] = [_named_steps(i, names) for i in instruction._instruction]
    elif isinstance(instruction, _If):
        for conditional in instruction._ifs:
            _named_steps(conditional.body, names)
    elif isinstance(instruction, _While):
        _named_steps(instruction.body, names)
    return instruction


def _step_name(step: str | Callable[..., Any]) -> str:
    return step if isinstance(step, str) else step.__name__


class WorkChainSpec(ProcessSpec, plumpy.WorkChainSpec):
    """A process spec with an ``outline`` and, for some steps, a failure behaviour."""

    def __init__(self) -> None:
        super().__init__()
        self._step_names: list[str] = []
        self._failure_behaviours: dict[str, FailureBehaviour] = {}

    def outline(self, *commands: Any) -> None:
        super().outline(*commands)
        self._step_names = []
        self._outline = _named_steps(self._outline, self._step_names)

    @property
    def step_names(self) -> list[str]:
        """The names of the outline's steps, in outline order (a repeated step once)."""
        return list(self._step_names)

    def on_failure(
        self,
        step: str | Callable[..., Any],
        *,
        go_back_to: str | Callable[..., Any],
        attempts: int = 1,
    ) -> None:
        """When a child that ``step`` waited for (``ToContext``) fails, go back to the
        earlier step ``go_back_to`` and run from there, with the context as it was when
        that step began; at most ``attempts`` times, then the workflow goes on as without
        (its next step sees the failed child). Declare it after the outline."""
        name, target = _step_name(step), _step_name(go_back_to)
        if not self._step_names:
            raise ValueError(f"on_failure({name!r}): declare the outline first.")
        for what in (name, target):
            if what not in self._step_names:
                raise ValueError(
                    f"on_failure: {what!r} is no step of the outline (its steps: "
                    f"{', '.join(self._step_names)})."
                )
        if self._step_names.index(target) >= self._step_names.index(name):
            raise ValueError(
                f"on_failure({name!r}): go_back_to={target!r} must be a step before {name!r}."
            )
        self._failure_behaviours[name] = FailureBehaviour(name, target, attempts)

    @property
    def failure_behaviours(self) -> dict[str, FailureBehaviour]:
        """The declared failure behaviours by the name of their step."""
        return dict(self._failure_behaviours)


class ToContext(dict[str, Any]):
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

    ``data`` is a list of ``{"pk", "key", "action", "step"}``: plain, so it is checkpointed.
    """

    async def execute(self) -> Any:  # type: ignore[override]  # async, as plumpy's Waiting

        process: WorkChain = self.process  # type: ignore[assignment]
        assert self.data is not None  # the children it was given when entered
        pks = [item["pk"] for item in self.data]
        runner = get_runner()
        # In a daemon worker it waits dehydrated, and is woken once they have all ended (or
        # for a kill, pause or play); woken, it waits here for what is left of the wait.
        sleeps, node = runner.sleeps, process.node
        # (``take_wake`` last: it takes the wake it reads.)
        if (
            sleeps is not None
            and node is not None
            and sleeps.may_sleep(node.pk)
            and process.take_wake() is None
        ):
            sleep = ChildrenSleep(node.pk, tuple(pks))
            runner.child_watcher.sleep(sleep)
            raise ProcessDehydrated(sleep)
        # A kill interrupts the wait; on_kill then kills the children.
        await self._interruptible(runner.child_watcher.wait(pks), finish_first=False)
        process.resolve_awaited(self.data)
        return self.create_state(ProcessState.RUNNING, process.do_step)


class WorkChain(Process):
    """A workflow of steps; see the module docstring."""

    _spec_class = WorkChainSpec
    _node_class = WorkflowNode
    node: WorkflowNode | None  # the node _node_class makes
    _entry_point_group = "workflows"
    #: Whether the end of this workflow, when no other called it, is notified. Off for
    #: wrappers of a single job (the restart policy), which would mail once per job.
    notify_on_finish: ClassVar[bool] = True

    @classmethod
    def spec(cls) -> WorkChainSpec:
        return super().spec()  # type: ignore[return-value]  # made of _spec_class

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
        #: The step running now (None between steps of a workflow just loaded).
        self._step: str | None = None
        #: A rerun's replay: {"of": pk, "until": step} until the step is reached.
        self._replay: dict[str, Any] | None = None
        #: The context and stepper as they were when each go-back target step began.
        self._snapshots: dict[str, dict[str, Any]] = {}
        #: How many times each step's failure behaviour went back.
        self._went_back: dict[str, int] = {}

    def on_create(self) -> None:
        super().on_create()
        # plumpy types its outline for its own WorkChain; veglia's runs the same steppers.
        self._stepper = self.spec().get_outline().create_stepper(self)  # type: ignore[arg-type]
        assert self.node is not None
        if self.node.get_attribute(RERUN_FROM) is not None:
            self._replay = {
                "of": self.node.get_attribute(RERUN_OF),
                "until": self.node.get_attribute(RERUN_FROM),
            }

    def prepare_node(self, node: ProcessNode) -> None:
        super().prepare_node(node)
        plain = _plain_inputs(dict(self.inputs))
        if plain:
            node.set_attribute(PLAIN_INPUTS, plain)

    # -- persistence -----------------------------------------------------------------------
    def save_instance_state(self, out_state: Any, save_context: Any) -> None:

        super().save_instance_state(out_state, save_context)
        out_state["ctx"] = encode_value(dict(self.ctx))
        out_state["steps_done"] = self._steps_done
        if self._stepper is not None:
            out_state["stepper_state"] = self._stepper.save()
        out_state["replay"] = self._replay
        out_state["snapshots"] = self._snapshots
        out_state["went_back"] = self._went_back

    def load_instance_state(self, saved_state: Any, load_context: Any) -> None:

        super().load_instance_state(saved_state, load_context)
        self.ctx = Context(decode_value(saved_state.get("ctx") or {}))
        self._awaiting = []
        self._steps_done = int(saved_state.get("steps_done", 0))
        self._children_in_step = 0
        self._resumed = True
        self._step = None
        self._replay = saved_state.get("replay")
        self._snapshots = dict(saved_state.get("snapshots") or {})
        self._went_back = dict(saved_state.get("went_back") or {})
        self._stepper = None
        if saved_state.get("stepper_state") is not None:
            self._stepper = (
                self.spec().get_outline().recreate_stepper(saved_state["stepper_state"], self)  # type: ignore[arg-type]
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
            self._awaiting.append({"pk": node.pk, "key": key, "action": action, "step": self._step})

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
        self._apply_failure_behaviour(awaited)

    # -- steps by name: failure behaviours and reruns --------------------------------------
    def _enter_step(self, name: str) -> None:
        """Called as each step begins (by the outline's steppers)."""
        self._step = name
        if self._replay is not None and name == self._replay["until"]:
            self.report(
                f"step {name}: the rerun of process {self._replay['of']} runs again from here"
            )
            self._replay = None
        if name in self._go_back_targets():
            # The stepper stands at this step, about to run it: restored, it runs it again.
            self._snapshots[name] = {
                "ctx": encode_value(dict(self.ctx)),
                "stepper": self._stepper.save(),
            }

    @classmethod
    def _go_back_targets(cls) -> set[str]:
        return {b.go_back_to for b in cls.spec().failure_behaviours.values()}

    def _apply_failure_behaviour(self, awaited: list[dict[str, Any]]) -> None:
        """Go back to an earlier step when a child awaited by a step with a failure
        behaviour failed and attempts are left."""
        behaviours = self.spec().failure_behaviours
        for item in awaited:
            behaviour = behaviours.get(item.get("step") or "")
            if behaviour is None:
                continue
            child = load_node(item["pk"])
            assert isinstance(child, ProcessNode)  # what a workflow awaits is a process
            if child.is_finished_ok:
                continue
            self._go_back(behaviour, child)
            return

    def _go_back(self, behaviour: FailureBehaviour, failed: ProcessNode) -> None:
        """Start again from ``behaviour.go_back_to`` because ``failed`` failed, if
        attempts are left (else a report line, and the workflow goes on as without)."""
        why = failed.exit_message or failed.process_state or "failed"
        done = self._went_back.get(behaviour.step, 0)
        snapshot = self._snapshots.get(behaviour.go_back_to)
        if done >= behaviour.attempts or snapshot is None:
            self.report(
                f"step {behaviour.step}: process {failed.pk} failed ({why}); no attempts left "
                f"to go back to step {behaviour.go_back_to}"
            )
            return
        self._went_back[behaviour.step] = done + 1
        self.report(
            f"step {behaviour.step}: process {failed.pk} failed ({why}); going back to step "
            f"{behaviour.go_back_to} (attempt {done + 1} of {behaviour.attempts})"
        )
        assert self.node is not None
        entry = {
            "step": behaviour.step,
            "failed": failed.pk,
            "to": behaviour.go_back_to,
            "attempt": done + 1,
        }
        self.node.set_attribute(WENT_BACK, [*self.node.get_attribute(WENT_BACK, []), entry])
        self.ctx = Context(decode_value(snapshot["ctx"]))
        outline = self.spec().get_outline()
        self._stepper = outline.recreate_stepper(snapshot["stepper"], self)  # type: ignore[arg-type]

    # -- children --------------------------------------------------------------------------
    def submit(self, process: Any, /, **inputs: Any) -> ProcessNode:
        """Launch a child process (a class or a builder); return its node at once."""

        assert self.node is not None
        call_key = f"{self._steps_done}.{self._children_in_step}"
        self._children_in_step += 1
        if self._replay is not None:
            reused = self._reuse(call_key, process)
            if reused is not None:
                return reused
        return launch_child(self.node, process, inputs, call_key, resumed=self._resumed)

    def _reuse(self, call_key: str, process: Any) -> ProcessNode | None:
        """In a rerun's replay: the child the earlier run launched under ``call_key`` (or
        reused itself), when it is of the same process; recorded in REUSED_CALLS."""
        assert self.node is not None and self._replay is not None
        earlier = load_node(self._replay["of"])
        assert isinstance(earlier, ProcessNode)
        child = find_called(earlier, call_key)
        if child is None:
            pk = (earlier.get_attribute(REUSED_CALLS) or {}).get(call_key)
            reused = load_node(pk) if pk is not None else None
            child = reused if isinstance(reused, ProcessNode) else None
        process_class = getattr(process, "process_class", process)
        if not isinstance(child, ProcessNode) or child.process_type != (
            process_class.process_type()
        ):
            self.report(
                f"step {self._step}: process {earlier.pk} launched no such child here; "
                "launching it anew"
            )
            return None
        self.node.set_attribute(
            REUSED_CALLS, {**(self.node.get_attribute(REUSED_CALLS) or {}), call_key: child.pk}
        )
        self.report(f"step {self._step}: reusing process {child.pk} of process {earlier.pk}")
        return child

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


def _plain_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs that are no nodes (a namespace's plain values, ``metadata``), nested as
    given: nodes have their input links, these would be lost."""
    plain: dict[str, Any] = {}
    for key, value in inputs.items():
        if isinstance(value, Node):
            continue
        if isinstance(value, dict) or hasattr(value, "items"):
            inner = _plain_inputs(dict(value))
            if inner:
                plain[key] = inner
        elif isinstance(value, str | int | float | bool | Code) or value is None:
            plain[key] = encode_value(value)  # a code as {"__code__": pk}
        elif isinstance(value, list | tuple) and all(isinstance(v, _SCALARS) for v in value):
            plain[key] = list(value)
    return plain


_SCALARS = (str, int, float, bool)
