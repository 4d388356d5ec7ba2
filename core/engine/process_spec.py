"""The process specification: plumpy's ports plus exit codes."""

from __future__ import annotations

import plumpy

from veglia.engine.exit_codes import ExitCode, ExitCodes

__all__ = ["ProcessSpec"]


class ProcessSpec(plumpy.ProcessSpec):
    """Inputs, outputs and the exit codes a process may finish with."""

    def __init__(self) -> None:
        super().__init__()
        self.exit_codes = ExitCodes()

    def exit_code(self, status: int, label: str, message: str) -> None:
        """Declare an exit code; status and label must be unique, status > 0."""
        if not isinstance(status, int) or status <= 0:
            raise ValueError(f"exit code status must be an integer > 0, not {status!r}")
        if label in self.exit_codes or self.exit_codes.by_status(status):
            raise ValueError(f"exit code {label} / {status} is declared twice")
        self.exit_codes[label] = ExitCode(status, message, label)
