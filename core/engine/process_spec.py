"""The process specification: plumpy's ports plus exit codes."""

from __future__ import annotations

import inspect
import types

import plumpy
from plumpy.ports import Port, PortNamespace

from veglia.engine.exit_codes import ExitCode, ExitCodes

__all__ = ["ProcessSpec"]


class ProcessSpec(plumpy.ProcessSpec):
    """Inputs, outputs and the exit codes a process may finish with."""

    def __init__(self) -> None:
        super().__init__()
        self.exit_codes = ExitCodes()

    def seal(self) -> None:
        if not self.sealed:
            _sign_validators(self.inputs)
            _sign_validators(self.outputs)
        super().seal()

    def exit_code(self, status: int, label: str, message: str) -> None:
        """Declare an exit code; status and label must be unique, status > 0."""
        if not isinstance(status, int) or status <= 0:
            raise ValueError(f"exit code status must be an integer > 0, not {status!r}")
        if label in self.exit_codes or self.exit_codes.by_status(status):
            raise ValueError(f"exit code {label} / {status} is declared twice")
        self.exit_codes[label] = ExitCode(status, message, label)


def _sign_validators(port: Port) -> None:
    """Give each validator of ``port`` and the ports under it its signature, computed once:
    plumpy reads a validator's signature (``inspect.getfullargspec``) at every validation,
    which cost a tenth of a submission. Only plain functions that wrap nothing are signed:
    for them ``inspect`` then answers as it did (for the others it computes it each time,
    as before)."""
    validator = port.validator
    if type(validator) is types.FunctionType and not hasattr(validator, "__wrapped__"):
        signature = inspect.signature(validator, follow_wrapped=False)
        validator.__dict__.setdefault("__signature__", signature)
    if isinstance(port, PortNamespace):
        for child in port.values():
            _sign_validators(child)
