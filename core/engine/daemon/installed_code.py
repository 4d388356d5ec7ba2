"""Whether the daemon runs the plugin code installed now: a worker imports its plugins once,
at start, so after `pip install` of a new version it goes on running the old one until
`veglia daemon restart`. Each worker writes the versions it started with in its status file
(``plugins``); `daemon status`, `veglia status` and a submission compare them with the
versions installed now and say which differ."""

from __future__ import annotations

import json

from veglia.config.profile import Profile
from veglia.engine.daemon.files import DaemonFiles
from veglia.entry_points import plugin_distributions

__all__ = ["old_code_message", "plugin_changes"]


def _running_versions(files: DaemonFiles) -> list[dict[str, str]]:
    """The plugin versions each worker runs (a worker that does not say is left out)."""
    found = []
    for worker in files.read_status().get("workers", []):
        try:
            seen = json.loads(files.worker_status(worker["pid"]).read_text())
        except (OSError, ValueError, KeyError):
            continue
        if isinstance(seen.get("plugins"), dict):
            found.append(seen["plugins"])
    return found


def plugin_changes(profile: Profile) -> list[str]:
    """Each plugin package whose version differs between a running worker and what is
    installed now (``veglia-example-plugin 0.1.0 -> 0.2.0``); empty when they agree or no
    daemon runs here."""
    files = DaemonFiles(profile)
    if files.supervisor_pid() is None:
        return []
    installed = plugin_distributions()
    changes: set[str] = set()
    for running in _running_versions(files):
        for name in set(running) | set(installed):
            old, new = running.get(name), installed.get(name)
            if old == new:
                continue
            if old is None:
                changes.add(f"{name} {new} (installed since)")
            elif new is None:
                changes.add(f"{name} {old} (uninstalled since)")
            else:
                changes.add(f"{name} {old} -> {new}")
    return sorted(changes)


def old_code_message(profile: Profile) -> str:
    """One line saying that the daemon runs older plugin code than is installed, or ``""``."""
    changes = plugin_changes(profile)
    if not changes:
        return ""
    return (
        f"the daemon of {profile.name!r} runs the plugin code it started with, not what is "
        f"installed now ({', '.join(changes)}): restart it with `veglia daemon restart`"
    )
