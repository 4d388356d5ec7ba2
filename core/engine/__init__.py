"""The engine: processes, calc jobs, workflows, and the daemon that runs them.

``process`` is the base of every process; ``calcjob`` runs one job on a computer,
``workflow`` chains processes, ``daemon`` runs them in the background; ``launch`` is how a
user runs or submits one, ``runner`` the event loop and transport queue a process runs on,
``persistence`` its checkpoints.

The names below are loaded when first used (PEP 562), so that importing one submodule (the
daemon's supervisor, the CLI's) does not import the whole engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.lazy import lazy_exports

if TYPE_CHECKING:
    from veglia.engine.builder import InputValidationError, ProcessBuilder
    from veglia.engine.calcjob import CalcInfo, CalcJob, CodeInfo
    from veglia.engine.calcjob.monitors import MonitorResult
    from veglia.engine.exit_codes import ExitCode
    from veglia.engine.launch import run, run_get_node, submit
    from veglia.engine.process import Process
    from veglia.engine.workflow import ToContext, WorkChain, append_, if_, return_, while_

#: Public name -> the module that defines it.
_EXPORTS = {
    "CalcInfo": "veglia.engine.calcjob",
    "CalcJob": "veglia.engine.calcjob",
    "CodeInfo": "veglia.engine.calcjob",
    "ExitCode": "veglia.engine.exit_codes",
    "InputValidationError": "veglia.engine.builder",
    "MonitorResult": "veglia.engine.calcjob.monitors",
    "Process": "veglia.engine.process",
    "ProcessBuilder": "veglia.engine.builder",
    "ToContext": "veglia.engine.workflow",
    "WorkChain": "veglia.engine.workflow",
    "append_": "veglia.engine.workflow",
    "if_": "veglia.engine.workflow",
    "return_": "veglia.engine.workflow",
    "run": "veglia.engine.launch",
    "run_get_node": "veglia.engine.launch",
    "submit": "veglia.engine.launch",
    "while_": "veglia.engine.workflow",
}

__all__ = [
    "CalcInfo",
    "CalcJob",
    "CodeInfo",
    "ExitCode",
    "InputValidationError",
    "MonitorResult",
    "Process",
    "ProcessBuilder",
    "ToContext",
    "WorkChain",
    "append_",
    "if_",
    "return_",
    "run",
    "run_get_node",
    "submit",
    "while_",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
