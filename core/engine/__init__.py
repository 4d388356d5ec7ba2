"""The engine: processes, calc jobs, and how they are run."""

from veglia.engine.builder import InputValidationError, ProcessBuilder
from veglia.engine.calcinfo import CalcInfo, CodeInfo
from veglia.engine.calcjob import CalcJob
from veglia.engine.exit_codes import ExitCode
from veglia.engine.launch import run, run_get_node, submit
from veglia.engine.process import Process

__all__ = [
    "CalcInfo",
    "CalcJob",
    "CodeInfo",
    "ExitCode",
    "InputValidationError",
    "Process",
    "ProcessBuilder",
    "run",
    "run_get_node",
    "submit",
]
