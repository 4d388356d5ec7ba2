"""Calc jobs: one job on a computer, from upload through the scheduler to its parsed outputs.

``process`` is the :class:`CalcJob`, its steps and what it does to itself, with ``runtime``
what it keeps in memory; ``commands`` the checkpointed WAITING commands it steps through;
``tasks`` the transport work of each step. Around them: the job's ``options``, ``holds``
(the notifications of blocked submissions and unreachable computers), ``right_sizing`` with
its ``history``, the polling ``job_poller``, ``monitors`` and their ``monitor_runner``,
``live_trace`` and ``queue_move``, ``kill`` (the cancellers), ``trace`` and ``caching``.

The names below load when first used: the runner imports ``job_poller`` from here, below
the processes that use the runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.lazy import lazy_exports

if TYPE_CHECKING:
    from veglia.engine.calcjob.calcinfo import CalcInfo, CodeInfo
    from veglia.engine.calcjob.process import CalcJob

_EXPORTS = {
    "CalcInfo": "veglia.engine.calcjob.calcinfo",
    "CodeInfo": "veglia.engine.calcjob.calcinfo",
    "CalcJob": "veglia.engine.calcjob.process",
}

__all__ = ["CalcInfo", "CalcJob", "CodeInfo"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
