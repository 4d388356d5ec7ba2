"""Exit codes: the number and message a process finishes with."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ExitCode", "ExitCodes"]


@dataclass(frozen=True)
class ExitCode:
    """``status`` 0 is success; ``label`` names the code in ``Process.exit_codes``."""

    status: int = 0
    message: str | None = None
    label: str = ""

    def format(self, **kwargs: object) -> ExitCode:
        """The same code with ``{placeholders}`` of the message filled in."""
        message = (self.message or "").format(**kwargs)
        return ExitCode(self.status, message, self.label)


class ExitCodes(dict[str, ExitCode]):
    """Exit codes by label, with attribute access (``cls.exit_codes.ERROR_X``)."""

    def __getattr__(self, label: str) -> ExitCode:
        try:
            return self[label]
        except KeyError:
            raise AttributeError(f"no exit code {label!r} (known: {', '.join(self)})") from None

    def by_status(self, status: int) -> ExitCode | None:
        return next((code for code in self.values() if code.status == status), None)
