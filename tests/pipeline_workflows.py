"""Workflows used by the pipeline tests (importable, so their checkpoints load)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from veglia import orm
from veglia.engine.workflow.workchain import ToContext, WorkChain, append_, if_, while_
from veglia.entry_points import CalculationFactory

ShellJob = CalculationFactory("core.shell")


class CountedShell(WorkChain):
    """Run ``command`` ``times`` times one after another, then once more if ``extra``."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("command", valid_type=orm.Str)
        spec.input("times", valid_type=orm.Int)
        spec.input("extra", valid_type=orm.Bool, required=False)
        spec.output("last", valid_type=orm.SinglefileData)
        spec.outline(
            cls.setup,
            while_(cls.more)(cls.launch),
            if_(cls.wants_extra)(cls.launch),
            cls.results,
        )
        spec.exit_code(401, "ERROR_CHILD_FAILED", "A job failed.")

    def setup(self) -> None:
        self.ctx.count = 0

    def more(self) -> bool:
        return self.ctx.count < self.inputs["times"].value

    def wants_extra(self) -> bool:
        return bool(self.inputs.get("extra") and self.inputs["extra"].value)

    def launch(self) -> ToContext:
        self.ctx.count += 1
        command = orm.Str(f"{self.inputs['command'].value}; echo run {self.ctx.count}")
        return ToContext(jobs=append_(self.submit(ShellJob, command=command)))

    def results(self) -> Any:
        if not all(job.is_finished_ok for job in self.ctx.jobs):
            return self.exit_codes.ERROR_CHILD_FAILED
        self.out("last", self.ctx.jobs[-1].outputs.stdout)
        return None


class DiesAfterSubmit(WorkChain):
    """Submits one job and, the first time only (no ``marker`` file yet), kills its own
    worker before the workflow is checkpointed: the unlucky order, made to happen."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("command", valid_type=orm.Str)
        spec.input("marker", valid_type=orm.Str)
        spec.outline(cls.launch, cls.results)
        spec.exit_code(401, "ERROR_CHILD_FAILED", "The job failed.")

    def launch(self) -> ToContext:
        job = self.submit(ShellJob, command=self.inputs["command"])
        marker = Path(self.inputs["marker"].value)
        if not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return ToContext(job=job)

    def results(self) -> Any:
        return None if self.ctx.job.is_finished_ok else self.exit_codes.ERROR_CHILD_FAILED


class ThreeSteps(WorkChain):
    """Three shell steps on one computer, each under the restart policy; each step's
    command gets the previous step's stdout as ``in.txt``."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("commands", valid_type=orm.List)
        spec.input("computer", valid_type=orm.Str)
        spec.output("result", valid_type=orm.SinglefileData)
        spec.outline(cls.run_step, cls.run_step, cls.run_step, cls.results)
        spec.exit_code(402, "ERROR_STEP_FAILED", "Step {step} failed.")

    def run_step(self) -> Any:
        from veglia.plugins.workflows.restart import RestartWorkChain

        steps = self.ctx.get("steps", [])
        if steps and not steps[-1].is_finished_ok:
            return self.exit_codes.ERROR_STEP_FAILED.format(step=len(steps))
        job: dict[str, Any] = {
            "command": orm.Str(self.inputs["commands"].get_list()[len(steps)]),
            "metadata": {
                "computer": self.inputs["computer"].value,
                "options": {"max_wallclock_seconds": 60},
            },
        }
        if steps:
            job["files"] = {"in.txt": steps[-1].outputs.stdout}
        child = self.submit(
            RestartWorkChain,
            process=orm.Str("core.shell"),
            job=job,
            metadata={"label": f"step {len(steps) + 1}"},
        )
        return ToContext(steps=append_(child))

    def results(self) -> Any:
        if not self.ctx.steps[-1].is_finished_ok:
            return self.exit_codes.ERROR_STEP_FAILED.format(step=3)
        self.out("result", self.ctx.steps[-1].outputs.stdout)
        return None


class NamedSteps(WorkChain):
    """One shell job per command, one after another, each labelled ``step N`` and watched by
    the ``monitors`` given (the same for every step)."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("commands", valid_type=orm.List)
        spec.input("monitors", valid_type=orm.Dict, required=False)
        spec.outline(while_(cls.more)(cls.launch), cls.results)
        spec.exit_code(401, "ERROR_CHILD_FAILED", "A step failed.")

    def more(self) -> bool:
        return len(self.ctx.get("jobs", [])) < len(self.inputs["commands"].get_list())

    def launch(self) -> ToContext:
        done = len(self.ctx.get("jobs", []))
        builder = ShellJob.get_builder()
        builder.command = orm.Str(self.inputs["commands"].get_list()[done])
        builder.metadata.label = f"step {done + 1}"
        if "monitors" in self.inputs:
            builder.monitors = self.inputs["monitors"].get_dict()
        return ToContext(jobs=append_(self.submit(builder)))

    def results(self) -> Any:
        if not all(job.is_finished_ok for job in self.ctx.jobs):
            return self.exit_codes.ERROR_CHILD_FAILED
        return None


class PrepareComputeSummarize(WorkChain):
    """prepare -> compute -> summarize, one shell job each, each reading the previous job's
    stdout as ``in.txt``. prepare appends a line to the file ``tokens`` (how many times it
    ran); compute prints ``x=<x>``, after ``guard`` (shell) when given."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("x", valid_type=orm.Int)
        spec.input("tokens", valid_type=orm.Str)
        spec.input("guard", valid_type=orm.Str, required=False)
        spec.output("result", valid_type=orm.SinglefileData)
        spec.outline(cls.prepare, cls.compute, cls.summarize, cls.results)
        spec.exit_code(401, "ERROR_STEP_FAILED", "Step {step} failed.")

    def _shell(self, command: str, previous: Any = None) -> Any:
        inputs: dict[str, Any] = {"command": orm.Str(command)}
        if previous is not None:
            inputs["files"] = {"in.txt": previous.outputs.stdout}
        return self.submit(ShellJob, **inputs)

    def prepare(self) -> ToContext:
        tokens = self.inputs["tokens"].value
        return ToContext(prepared=self._shell(f"echo prepared >> {tokens}; echo base"))

    def compute(self) -> Any:
        if not self.ctx.prepared.is_finished_ok:
            return self.exit_codes.ERROR_STEP_FAILED.format(step="prepare")
        guard = self.inputs["guard"].value + "; " if "guard" in self.inputs else ""
        command = f"{guard}cat in.txt; echo x={self.inputs['x'].value}"
        return ToContext(computed=self._shell(command, self.ctx.prepared))

    def summarize(self) -> Any:
        if not self.ctx.computed.is_finished_ok:
            return self.exit_codes.ERROR_STEP_FAILED.format(step="compute")
        return ToContext(summary=self._shell("cat in.txt; echo done", self.ctx.computed))

    def results(self) -> Any:
        if not self.ctx.summary.is_finished_ok:
            return self.exit_codes.ERROR_STEP_FAILED.format(step="summarize")
        self.out("result", self.ctx.summary.outputs.stdout)
        return None


class GoesBackToPrepare(PrepareComputeSummarize):
    """PrepareComputeSummarize whose failing compute sends it back to prepare, once."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.on_failure(cls.compute, go_back_to=cls.prepare, attempts=1)
