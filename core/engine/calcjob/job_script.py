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

from collections.abc import Collection
from importlib.resources import files
from pathlib import Path
from typing import Any

from veglia.exceptions import PluginError
from veglia.plugin_manager import gather
from veglia.plugin_types import JobScriptWrap

__all__ = [
    "EXIT_STATUS_FILE",
    "JobScriptWrap",
    "packaged_shell",
    "put_files",
    "recorded_wraps",
    "wrap_commands",
    "wrap_files",
    "wraps_for",
]

#: The file the job's own exit status is written to, read back whatever the scheduler says.
EXIT_STATUS_FILE = "_veglia_exit_status"


def packaged_shell(package: str, name: str) -> str:
    """Shell text shipped as file ``name`` of Python package ``package``, without its
    comment lines: what a wrap puts in a job script or beside it, stored with each job."""
    text = files(package).joinpath(name).read_text()
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def wraps_for(node: Any, computer: Any) -> list[JobScriptWrap]:
    """The wraps every plugin gives this job, outermost first. A plugin that raises or
    returns something else fails the submission with its name: a job script half wrapped
    would measure nothing, or worse, not run what it should."""
    results, errors = gather("job_script_wrap", node=node, computer=computer)
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
            # A script that ends early (`set -e` in the prepend text) still runs them.
            "trap 'veglia_exit=${veglia_exit:-$?}; veglia_wraps_after' EXIT",
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
        script += ["veglia_wraps_after", "trap - TERM INT HUP EXIT"]
    return script


def wrap_files(wraps: list[JobScriptWrap], taken: Collection[str]) -> dict[str, bytes]:
    """The wraps' files by name, uploaded beside the job's own (``taken``, by relative path):
    from memory, not through the upload's sandbox folder, which would create and delete
    each of them once more for every job."""
    found: dict[str, bytes] = {}
    for wrap in wraps:
        for file_name, text in wrap.files.items():
            if file_name in taken or file_name in found:
                raise PluginError(
                    f"plugin {wrap.name}: its file {file_name} would replace one of the job's "
                    "own; rename one of them"
                )
            found[file_name] = text.encode()
    return found


def put_files(wraps: list[JobScriptWrap], folder: Path) -> None:
    """The wraps' files into a folder (a job's work directory made by hand)."""
    taken = {path.name for path in folder.iterdir()}
    for file_name, content in wrap_files(wraps, taken).items():
        (folder / file_name).write_bytes(content)


def recorded_wraps(wraps: list[JobScriptWrap]) -> list[dict[str, Any]]:
    """The node attribute ``job_script_wraps`` for these wraps."""
    return [w.recorded() for w in wraps]
