"""Where a profile's daemon keeps its pid, status files and log, read by the CLI too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from veglia.config.config import veglia_home
from veglia.config.profile import Profile

__all__ = ["DaemonFiles", "write_json"]


class DaemonFiles:
    """Where a profile's daemon keeps its pid, status and log."""

    def __init__(self, profile: Profile) -> None:
        self.folder = profile.daemon_folder
        self.pid = self.folder / "supervisor.pid"
        self.status = self.folder / "status.json"
        self.log = self.folder / "daemon.log"
        #: The values of the plugins' `daemon start` options (the daemon_start_options hook).
        self.start_options = self.folder / "start-options.json"
        #: Touched when a kill, pause or play is written on a node for the daemon to carry out
        #: (without a broker): its worker then looks among all its processes, asleep or not.
        self.control_requested = self.folder / "control-requested"

    def worker_status(self, pid: int) -> Path:
        return self.folder / f"worker-{pid}.json"

    def supervisor_pid(self) -> int | None:
        """The supervisor's pid when it is alive."""
        try:
            pid = int(self.pid.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def spawn_options(self, **env: str) -> dict[str, Any]:
        """What a daemon process (supervisor or worker) is started with: this folder as its
        working folder and the environment plus ``env``.

        ``python -m`` puts the working folder first on the import path: a folder the user
        happened to start the daemon from, where anyone who can write it could plant a module
        the daemon imports (even one shadowing the standard library). The daemon's folder is
        private. Relative entries of ``VEGLIA_HOME`` and ``PYTHONPATH`` are made absolute so
        they keep naming what the user meant."""
        environment = {**os.environ, **env, "VEGLIA_HOME": str(veglia_home())}
        if environment.get("PYTHONPATH"):
            environment["PYTHONPATH"] = os.pathsep.join(
                os.path.abspath(entry) if entry else entry
                for entry in environment["PYTHONPATH"].split(os.pathsep)
            )
        return {"cwd": self.folder, "env": environment}

    def read_start_options(self) -> dict[str, Any]:
        try:
            result: dict[str, Any] = json.loads(self.start_options.read_text())
            return result
        except (OSError, json.JSONDecodeError):
            return {}

    def read_status(self) -> dict[str, Any]:
        try:
            result: dict[str, Any] = json.loads(self.status.read_text())
            return result
        except (OSError, json.JSONDecodeError):
            return {}


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
