"""Calc jobs: one job on a computer, from upload through the scheduler to its parsed outputs.

``process`` is the :class:`CalcJob` and its steps; ``commands`` the checkpointed WAITING
commands it steps through; ``tasks`` the transport work of each step. Around them: the job's
``options``, ``holds`` (blocked submissions, unreachable computers), ``right_sizing`` with
its ``history``, the polling ``job_poller``, ``monitors`` and their ``monitor_runner``,
``kill``, ``trace`` and ``caching``.
"""

from veglia.engine.calcjob.calcinfo import CalcInfo, CodeInfo
from veglia.engine.calcjob.process import CalcJob

__all__ = ["CalcInfo", "CalcJob", "CodeInfo"]
