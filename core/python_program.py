"""A Python program that veglia runs on a computer in one command, to ask about many files
in one round trip (a command per file would take minutes for 10,000 files over SSH).

The program is made of plain functions, sent as their source with ``python3 -c``: the
question goes in as JSON on stdin, the last function's answer comes back as JSON on stdout.
Those functions run on the computer, so they use the standard library only, Python 3.6
syntax, and annotations 3.6 need not evaluate (quoted). ``veglia.file_reads`` (the
monitors' reads) and the file data sources each have one.
"""

from __future__ import annotations

import inspect
import json
import shlex
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from veglia.exceptions import TransportError

__all__ = ["CommandRunner", "PythonProgram"]


class CommandRunner(Protocol):
    """What a program needs of a :class:`veglia.transports.Transport` (which reads files
    through a program of :mod:`veglia.file_reads`, so is named here by what it does)."""

    hostname: str

    def exec_command(
        self,
        command: str,
        *,
        workdir: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]: ...


class PythonProgram:
    """``functions`` run on the computer as one ``python3`` command; the last one answers.

    ``title`` is the program's first line, a comment: where an error quotes the command cut
    short (a whole program would bury it), that is what it shows. ``imports`` are the
    modules the functions use (``json`` and ``sys`` come with every program).
    """

    def __init__(
        self, title: str, functions: Sequence[Callable[..., Any]], imports: Sequence[str]
    ) -> None:
        modules = ", ".join(sorted({*imports, "json", "sys"}))
        source = (
            f"# {title}\nimport {modules}\n"
            + "".join(inspect.getsource(function) for function in functions)
            + f"sys.stdout.write(json.dumps({functions[-1].__name__}(json.load(sys.stdin))))\n"
        )
        #: The shell command that reads a JSON question on stdin and prints the answer.
        self.command = f"python3 -c {shlex.quote(source)}"

    def ask(self, transport: CommandRunner, question: Any, *, what: str, timeout: float) -> Any:
        """The answer to ``question`` from the computer; None when it has no ``python3``
        (exit 127), for the caller to say or to fall back on. ``what`` names the command in
        the errors raised for a failed command or an answer that is no JSON."""
        code, out, err = transport.exec_command(
            self.command, stdin=json.dumps(question).encode(), timeout=timeout
        )
        if code == 127:
            return None
        where = f"{what} on {transport.hostname}"
        if code != 0:
            raise TransportError(f"{where} failed (exit {code}): {err.strip()[-500:]}")
        try:
            return json.loads(out)
        except ValueError:
            raise TransportError(
                f"{where} gave output that is not the expected JSON (does a login script "
                f"print to stdout?): {out[:200]!r}"
            ) from None
