"""What the parts a calc job owns (its live trace, its queue moves, the runtime holding them)
read of the job: a Protocol, so that they stand below :mod:`veglia.engine.calcjob.process`,
which makes them, rather than in a circle with it (tests/test_boundaries.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from veglia.orm.computers import Computer
    from veglia.orm.process_nodes import CalcJobNode

__all__ = ["OwningJob"]


class OwningJob(Protocol):
    """The :class:`~veglia.engine.calcjob.process.CalcJob` a part belongs to."""

    @property
    def node(self) -> CalcJobNode | None: ...

    @property
    def computer(self) -> Computer:
        """The job's computer, with its settings as stored now."""
        ...

    @property
    def options(self) -> dict[str, Any]:
        """The job's ``metadata.options``."""
        ...

    def report(self, message: str, *args: Any) -> None:
        """A line in the process's log."""
        ...
