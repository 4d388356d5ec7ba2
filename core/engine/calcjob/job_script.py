"""What plugins put around a job's commands in its submit script (the ``job_script_wrap`` hook).

A plugin returns a :class:`JobScriptWrap`: shell text to run before the job's commands (start a
sampler), words to put in front of each command line (``/usr/bin/time``), and shell text to run
after them whatever their exit (stop the sampler, summarise). The first wrap is the outermost:
its ``before`` runs first, its ``after`` last, its ``prefix`` comes first on the line.

The ``after`` parts run once: right after the commands, or from a trap when the script is
signalled (a scheduler's cancel or wall-time kill sends TERM to the whole job, then KILL after a
grace time), so what a plugin samples up to a kill is still written. ``$veglia_exit`` holds the
commands' exit status there (143 after a TERM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from veglia.exceptions import PluginError
from veglia.plugin_manager import results_of_each

__all__ = ["EXIT_STATUS_FILE", "JobScriptWrap", "recorded_wraps", "wrap_commands", "wraps_for"]

#: The file the job's own exit status is written to, read back whatever the scheduler says.
EXIT_STATUS_FILE = "_veglia_exit_status"

_NAME = re.compile(r"[a-z][a-z0-9_.-]*")


@dataclass(frozen=True)
class JobScriptWrap:
    """What one plugin adds around the commands of a job script.

    :param name: the plugin's name (``myplugin.sampler``), shown in the script and recorded on
        the node (attribute ``job_script_wraps``).
    :param before: shell text run before the commands, after the job's ``prepend_text``.
    :param prefix: words put in front of every command line (a wrapper program, a redirection).
    :param after: shell text run after the commands whatever their exit, also when the script
        is signalled (TERM, INT, HUP); ``$veglia_exit`` is the commands' exit status.
    :param live_trace: this wrap writes the live trace files (``_veglia_trace.json`` and
        ``_veglia_trace.series``, see docs/trace.md): the engine reads them at each poll.
    """

    name: str
    before: str = ""
    prefix: str = ""
    after: str = ""
    live_trace: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise PluginError(
                f"JobScriptWrap name {self.name!r} must be a lower-case plugin name, like "
                "'myplugin.sampler'"
            )
        for part in ("before", "prefix", "after"):
            if not isinstance(getattr(self, part), str):
                raise PluginError(f"JobScriptWrap {self.name}: {part} must be shell text (a str)")
        if "\n" in self.prefix:
            raise PluginError(
                f"JobScriptWrap {self.name}: prefix goes in front of each command line and "
                "cannot hold a newline; put setup in `before`"
            )

    def recorded(self) -> dict[str, Any]:
        """What the node keeps of it: the name and whether it writes a live trace."""
        return {"name": self.name, "live_trace": self.live_trace}


def wraps_for(node: Any, computer: Any) -> list[JobScriptWrap]:
    """The wraps every plugin gives this job, outermost first. A plugin that raises or
    returns something else fails the submission with its name: a job script half wrapped
    would measure nothing, or worse, not run what it should."""
    results, errors = results_of_each("job_script_wrap", node=node, computer=computer)
    if errors:
        plugin, exc = errors[0]
        raise PluginError(f"plugin {plugin} failed to wrap the job script: {exc}") from exc
    wraps = []
    for plugin, result in results:
        if not isinstance(result, JobScriptWrap):
            raise PluginError(
                f"plugin {plugin}: job_script_wrap must return a JobScriptWrap or None, not "
                f"{type(result).__name__}"
            )
        wraps.append(result)
    return wraps


def wrap_commands(lines: list[str], wraps: list[JobScriptWrap]) -> list[str]:
    """The job's command lines with the wraps around them, and its exit status written."""
    prefix = " ".join(w.prefix for w in wraps if w.prefix)
    commands = [f"{prefix} {line}" if prefix else line for line in lines] or ["true"]
    afters = [w for w in reversed(wraps) if w.after]
    script: list[str] = []
    if afters:
        # Once, whichever comes first: the end of the commands or a signal. Under a trap bash
        # waits for the running command, which got the same signal from the scheduler.
        script += [
            "veglia_wraps_after() {",
            '    [ -n "${veglia_wraps_done-}" ] && return 0',
            "    veglia_wraps_done=1",
            # Not indented: the text may hold a here-document.
            *(f"# -- after: {w.name}\n{w.after.rstrip(chr(10))}" for w in afters),
            "}",
            "trap 'veglia_exit=${veglia_exit:-143}; veglia_wraps_after; exit $veglia_exit' "
            "TERM INT HUP",
        ]
    for wrap in wraps:
        if wrap.before:
            script += [f"# -- before: {wrap.name}", wrap.before.rstrip("\n")]
    script += [
        *commands[:-1],
        commands[-1],
        f"veglia_exit=$?; echo $veglia_exit > {EXIT_STATUS_FILE}",
    ]
    if afters:
        script += ["veglia_wraps_after", "trap - TERM INT HUP"]
    return script


def recorded_wraps(wraps: list[JobScriptWrap]) -> list[dict[str, Any]]:
    """The node attribute ``job_script_wraps`` for these wraps."""
    return [w.recorded() for w in wraps]
