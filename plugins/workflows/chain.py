"""``core.chain``: run steps one after another on one element, each on the outputs of the
step before (a pipeline setup with steps runs this per element; see docs/pipelines.md).

Each step is a child process (a ``call`` link) launched once: a workflow continued from its
checkpoint finds the child it launched already. A failed step fails the chain with its exit
message; the chain's outputs are the last step's.
"""

from __future__ import annotations

from typing import Any

from veglia.plugin_api import (
    Data,
    ExitCode,
    List,
    ToContext,
    VegliaError,
    WorkChain,
    append_,
    parse_steps,
    plain_data,
    step_builder,
    step_element,
    steps_problems,
    while_,
)

__all__ = ["ChainWorkChain"]


def _steps_of(value: Any) -> Any:
    return value.get_list() if isinstance(value, List) else plain_data(value)


def _validate(inputs: Any, _: Any = None) -> str | None:
    problems = steps_problems(_steps_of(inputs.get("steps")), dict(inputs.get("files") or {}))
    # One line per problem: each says which step and what to change.
    return "\n".join(problems) or None


class ChainWorkChain(WorkChain):
    """Run steps one after another on one element, each on the outputs of the one before."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input_namespace(
            "files",
            valid_type=Data,
            dynamic=True,
            required=False,
            help="The element: files (or nodes) by name, for the first step's input_port.",
        )
        spec.input(
            "steps",
            valid_type=List,
            help="The steps: tables of process, input_port, inputs, options (and from_output).",
        )
        spec.inputs.validator = _validate
        spec.outputs.dynamic = True
        spec.outline(cls.setup, while_(cls.more_steps)(cls.run_step, cls.inspect_step), cls.results)
        spec.exit_code(401, "ERROR_STEP_FAILED", "Step {step} failed: {message}")
        spec.exit_code(402, "ERROR_STEP_INPUTS", "Step {step} cannot start: {message}")

    def setup(self) -> None:
        self.ctx.done = []

    def more_steps(self) -> bool:
        return len(self.ctx.done) < len(self._steps())

    def _steps(self) -> list[Any]:
        steps, _ = parse_steps(_steps_of(self.inputs["steps"]))
        return steps

    def run_step(self) -> ToContext | ExitCode:
        step = self._steps()[len(self.ctx.done)]
        try:
            if not self.ctx.done:
                element = dict(self.inputs.get("files") or {})
            else:
                element = step_element(step, dict(self.ctx.done[-1].outputs.items()))
            builder = step_builder(step, element)
        except VegliaError as exc:
            return self.exit_codes.ERROR_STEP_INPUTS.format(step=step.number, message=str(exc))
        builder.metadata.label = builder.metadata.get("label") or step.title
        node = self.submit(builder)
        self.report(f"{step.title}: process {node.pk}")
        return ToContext(done=append_(node))

    def inspect_step(self) -> ExitCode | None:
        step = self._steps()[len(self.ctx.done) - 1]
        node = self.ctx.done[-1]
        if node.is_finished_ok:
            return None
        if node.is_finished:
            why = node.exit_message or f"exit status {node.exit_status}"
        else:
            why = f"it was {node.process_state}"
        message = f"{step.process}, process {node.pk}: {why}"
        return self.exit_codes.ERROR_STEP_FAILED.format(step=step.number, message=message)

    def results(self) -> None:
        self.out_many(dict(self.ctx.done[-1].outputs.items()))
