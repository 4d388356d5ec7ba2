"""The Parser base class: a finished calc job's retrieved files made into outputs.

A calc job names its parser with the ``parser_name`` option, an entry point of
``veglia.parsers``. After the job's files are retrieved, the engine makes
``ParserClass(calcjob)`` and calls :meth:`Parser.parse`; the exit code it returns (None:
success) becomes the job's unless the scheduler or a monitor had the last word. A calc job
that parses its own files overrides ``CalcJob.parse_retrieved`` instead.

Example::

    class WordCount(Parser):
        def parse(self, retrieved, outcome):
            if "stdout" not in retrieved.list_object_names():
                return self.exit_codes.ERROR_PARSER_FAILED.format(message="no stdout")
            words = len(retrieved.get_object_content("stdout").split())
            self.out("files.word_count", SinglefileData(str(words).encode(), "word_count"))
            return None
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from veglia.engine.calcjob import CalcJob
    from veglia.engine.exit_codes import ExitCode, ExitCodes
    from veglia.orm import CalcJobNode, FolderData

__all__ = ["Parser"]


class Parser(ABC):
    """Reads a finished job's retrieved files and attaches outputs to it."""

    def __init__(self, calcjob: CalcJob) -> None:
        #: The calc job being parsed (its inputs, options and exit codes).
        self.calcjob = calcjob

    @property
    def node(self) -> CalcJobNode:
        """The job's node (``node.options``, ``node.get_attribute("last_job_info")``...)."""
        assert self.calcjob.node is not None
        return self.calcjob.node

    @property
    def exit_codes(self) -> ExitCodes:
        """The calc job's exit codes, by label (``self.exit_codes.ERROR_PARSER_FAILED``)."""
        return self.calcjob.exit_codes

    def out(self, name: str, value: Any) -> None:
        """Attach ``value`` as the job's output ``name`` (a port of the calc job's spec;
        ``namespace.name`` for a dynamic namespace)."""
        self.calcjob.out(name, value)

    @abstractmethod
    def parse(self, retrieved: FolderData, outcome: dict[str, Any]) -> ExitCode | None:
        """Attach outputs from ``retrieved`` (the files the job's retrieve list brought
        back); return an exit code when they show a failure, None when all is well.

        ``outcome`` is what the engine learnt of the job besides its files: its
        ``exit_status`` (of the job's commands), ``failure`` (why the scheduler ended it,
        a :class:`~veglia.schedulers.JobFailure` value, or None), measured ``usage``, and
        ``skipped`` (retrieved names that were links or special files, not copied). An
        exception counts as ``ERROR_PARSER_FAILED`` with its message.
        """
