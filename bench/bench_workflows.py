"""The workflow the pipeline benchmark runs (a module, so daemon workers can import it)."""

from __future__ import annotations

from typing import Any

from veglia import orm
from veglia.engine.workflow.workchain import ToContext, WorkChain, append_, while_
from veglia.entry_points import CalculationFactory

AddJob = CalculationFactory("core.arithmetic.add")


class AddChain(WorkChain):
    """``steps`` additions one after the other, each adding 1 to the previous sum."""

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("steps", valid_type=orm.Int)
        spec.output("sum", valid_type=orm.Int)
        spec.outline(cls.setup, while_(cls.more)(cls.add_one), cls.results)

    def setup(self) -> None:
        self.ctx.value = 0
        self.ctx.jobs = []

    def more(self) -> bool:
        return len(self.ctx.jobs) < self.inputs["steps"].value

    def add_one(self) -> ToContext:
        if self.ctx.jobs:
            self.ctx.value = self.ctx.jobs[-1].outputs.sum.value
        job = self.submit(AddJob, x=orm.Int(self.ctx.value), y=orm.Int(1))
        return ToContext(jobs=append_(job))

    def results(self) -> None:
        self.out("sum", self.ctx.jobs[-1].outputs.sum)
