"""The engine: processes, calc jobs, workflows, and the daemon that runs them.

``process`` is the base of every process; ``calcjob`` runs one job on a computer,
``workflow`` chains processes, ``daemon`` runs them in the background; ``launch`` is how a
user runs or submits one, ``runner`` the event loop and transport queue a process runs on,
``persistence`` its checkpoints.
"""

from veglia.engine.builder import InputValidationError, ProcessBuilder
from veglia.engine.calcjob import CalcInfo, CalcJob, CodeInfo
from veglia.engine.calcjob.monitors import MonitorResult
from veglia.engine.exit_codes import ExitCode
from veglia.engine.launch import run, run_get_node, submit
from veglia.engine.process import Process
from veglia.engine.workflow import ToContext, WorkChain, append_, if_, return_, while_

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
