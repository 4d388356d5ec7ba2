"""The ``core.guard`` plugin's hook implementations: the guard watcher in the job script."""

from __future__ import annotations

import functools
import json
import math
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veglia.plugin_api import hookimpl, parse_positive_seconds

if TYPE_CHECKING:
    # Lazy: every process loads this hook module (`veglia --help` too); the engine when asked.
    from veglia.plugin_api import ComputerProperty, JobScriptWrap

__all__ = [
    "GRACE_SECONDS",
    "LOG_FILE",
    "RECORD_FILE",
    "RUNNER_FILE",
    "guards_of",
    "parse_seconds",
    "runner_text",
    "start_text",
]

#: The watcher and every guard function of the job, beside the job script.
RUNNER_FILE = "_veglia_guard.sh"
#: Written once, when a guard stopped the job (read by the daemon at its next poll).
RECORD_FILE = "_veglia_guard.json"
#: A line per guard that failed, per stop, and the watcher's standing down.
LOG_FILE = "_veglia_guard.log"
#: Seconds between the TERM to the job's process group and its KILL, by default.
GRACE_SECONDS = 30
#: The default heartbeat file; ``{profile}`` is the profile's uuid, ``$HOME`` the node's.
DEFAULT_HEARTBEAT = "$HOME/.veglia/heartbeat/{profile}"


#: A number of seconds more than zero, as typed.
parse_seconds = parse_positive_seconds


@hookimpl
def computer_properties() -> list[ComputerProperty]:
    """``guards`` (yes/no), ``guard_interval``, ``guard_away_after``, ``guard_grace``
    (seconds) and ``guard_heartbeat`` (the heartbeat file on the computer)."""
    # Lazy: every process loads this hook module; the ORM only when asked.
    from veglia.plugin_api import ComputerProperty

    return [
        ComputerProperty(
            "guards", True, "Run the monitors' guards beside each job, for when no daemon runs."
        ),
        ComputerProperty(
            "guard_interval", 30, "Seconds between two checks of a job's guards.", parse_seconds
        ),
        ComputerProperty(
            "guard_away_after",
            300,
            "Seconds without a daemon heartbeat after which every guard acts.",
            parse_seconds,
        ),
        ComputerProperty(
            "guard_grace",
            GRACE_SECONDS,
            "Seconds between the TERM a guard sends a job and the KILL, if it still runs.",
            parse_seconds,
        ),
        ComputerProperty(
            "guard_heartbeat",
            DEFAULT_HEARTBEAT,
            "The heartbeat file the daemon touches on the computer ({profile}: the profile's "
            "uuid; $HOME and other variables are the node's).",
        ),
    ]


@functools.cache
def runner_text() -> str:
    """The watcher's bash functions, without their comment lines."""
    return _packaged("veglia.plugins.guard", "runner.sh")


@functools.cache
def start_text() -> str:
    """What the job script's own shell holds: ``veglia_guard_start`` and ``_stop``."""
    return _packaged("veglia.plugins.guard", "start.sh")


def _shell_word(text: str) -> str:
    """``text`` as one bash word that keeps it as it is (``$'...'`` for control characters
    other than a newline or a tab, which single quotes keep)."""
    if any(ord(c) < 32 and c not in "\n\t" for c in text):
        body = "".join(
            f"\\x{ord(c):02x}" if ord(c) < 32 else "\\" + c if c in "\\'" else c for c in text
        )
        return f"$'{body}'"
    return shlex.quote(text)


def guards_of(node: Any) -> list[tuple[str, str, Any, list[str]]]:
    """(monitor name, entry point, guard, its arguments) of each enabled guard of the job."""
    # Lazy: the engine only in a process that writes job scripts.
    from veglia.plugin_api import MonitorSpec, guard_arguments, guard_of, load_monitor

    found = []
    for value in node.get_attribute("monitors") or []:
        spec = MonitorSpec(**value)
        if not spec.guard:
            continue
        guard = guard_of(load_monitor(spec.entry_point))
        if guard is None:
            continue
        arguments = guard_arguments(spec.name, spec.entry_point, guard, spec.kwargs, node)
        found.append((spec.name, spec.entry_point, guard, arguments))
    return found


def _heartbeat_path(computer: Any) -> str:
    path = str(computer.get_property("guard_heartbeat") or DEFAULT_HEARTBEAT)
    if "{profile}" in path:
        # Lazy: the profile only in a process that writes job scripts.
        from veglia.plugin_api import get_profile

        path = path.replace("{profile}", str(get_profile().id))
    # Double quotes: the node's $HOME (and any variable) expands, nothing else does.
    return '"' + "".join("\\" + c if c in '"\\`' else c for c in path) + '"'


@hookimpl
def job_script_wrap(node: Any, computer: Any) -> JobScriptWrap | None:
    """The guard watcher beside the job's commands, when its monitors have enabled guards
    and the computer's ``guards`` is on."""
    if node is None or not computer.get_property("guards"):
        return None
    guards = guards_of(node)
    if not guards:
        return None
    # Lazy: the engine only in a process that writes job scripts.
    from veglia.plugin_api import JobScriptWrap

    # One function per distinct guard text, numbered in a fixed order: the same monitors give
    # the same file, stored once in the repository.
    shells = sorted({guard.shell for _, _, guard, _ in guards})
    number = {shell: i for i, shell in enumerate(shells)}
    sources = [f"_veglia_guard_src[{i}]={_shell_word(shell)}" for i, shell in enumerate(shells)]
    table: list[str] = []
    for name, entry_point, guard, arguments in guards:
        table += [
            name,
            entry_point,
            str(number[guard.shell]),
            "1" if guard.always else "0",
            str(len(arguments)),
            *arguments,
        ]
    interval = parse_seconds(str(computer.get_property("guard_interval")))
    away_after = parse_seconds(str(computer.get_property("guard_away_after")))
    start = " ".join(
        [
            "veglia_guard_start",
            str(interval),
            str(int(away_after)),
            _heartbeat_path(computer),
            str(math.ceil(parse_seconds(str(computer.get_property("guard_grace"))))),
            *map(_shell_word, table),
        ]
    )
    return JobScriptWrap(
        name="core.guard",
        # The placeholder fd keeps the prefix's close valid should the watcher not start.
        before=f"exec {{veglia_guard_fd}}</dev/null\n{start_text()}\n{start}",
        files={RUNNER_FILE: "\n".join([runner_text(), *sources, ""])},
        # The job's programs must not hold the watcher's pipe: a daemon the job leaves
        # behind would keep the watcher from seeing the end.
        prefix="{veglia_guard_fd}>&-",
        after="veglia_guard_stop 2>/dev/null || :",
        retrieve=(RECORD_FILE, LOG_FILE),
    )


#: (computer pk, user) -> when this process last touched its heartbeat (monotonic seconds).
_touched: dict[tuple[Any, ...], float] = {}


@hookimpl
def computer_contacted(computer: Any, transport: Any) -> None:
    """Touch the computer's heartbeat, which tells the guards the daemon watches; a fifth of
    ``guard_away_after`` apart at most, not at every poll."""
    if not computer.get_property("guards"):
        return
    away_after = parse_seconds(str(computer.get_property("guard_away_after")))
    key = (getattr(computer, "pk", None), getattr(transport, "username", None))
    now = time.monotonic()
    if now - _touched.get(key, float("-inf")) < away_after / 5:
        return
    # Counted before the touch: one that fails is tried again at the same pace, not at every
    # poll (its failure is in the daemon log each time).
    _touched[key] = now
    path = _heartbeat_path(computer)
    status, _, stderr = transport.exec_command(
        f'mkdir -p "$(dirname {path})" && touch {path}', timeout=30
    )
    if status != 0:
        raise RuntimeError(
            f"could not touch the guards' heartbeat {path}: {stderr.strip()}; every guard of "
            "its jobs acts as if the daemon were away. Set the computer's guard_heartbeat to a "
            "writable file."
        )


@hookimpl
def job_stopped_beside(node: Any, folder: Path) -> dict[str, Any] | None:
    """The stop a guard recorded in ``_veglia_guard.json``, and the guards that failed (from
    ``_veglia_guard.log``) in the job's log."""
    log = folder / LOG_FILE
    if log.is_file():
        for line in log.read_text(errors="replace").splitlines():
            if "failed" in line:
                node.add_log("WARNING", f"guard: {line.strip()[:500]}")
    path = folder / RECORD_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    if not isinstance(record, dict) or record.get("version") != 1:
        raise ValueError(f"{RECORD_FILE} is not a guard record of version 1")
    message = str(record.get("message", ""))
    if record.get("daemon_away"):
        message += " (while the daemon was away)"
    return {
        "name": str(record["monitor"]),
        "message": message,
        "time": record.get("at"),
        "guard": {
            key: record.get(key)
            for key in ("entry_point", "evidence", "daemon_heard", "daemon_away")
        },
    }


def _packaged(package: str, name: str) -> str:
    # Lazy: every process loads this hook module; the engine only where scripts are written.
    from veglia.plugin_api import packaged_shell

    return packaged_shell(package, name)
