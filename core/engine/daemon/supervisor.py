"""The supervisor: keeps N worker processes alive, restarts any that dies, and looks for
stranded processes (with a broker) until it is told to stop."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

from veglia.config.private_paths import private_file, private_folder
from veglia.config.profile import Profile
from veglia.engine.daemon.files import DaemonFiles, write_json
from veglia.engine.daemon.live_config import INTERVAL as CONFIG_INTERVAL
from veglia.engine.daemon.live_config import follow_config
from veglia.engine.daemon.reconcile import Reconciler
from veglia.plugin_manager import call_each
from veglia.storage.outage import is_storage_outage

__all__ = ["call_daemon_hook", "log_failure", "supervise"]

LOGGER = logging.getLogger("veglia.daemon")
#: How often the supervisor looks for stranded processes (two looks before it repairs one).
RECONCILE_SECONDS = 5.0


def supervise(profile: Profile, workers: int) -> None:
    """Start ``workers`` workers and restart any that dies, until SIGTERM."""
    files = DaemonFiles(profile)
    private_folder(files.folder)
    files.pid.write_text(str(os.getpid()))
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def spawn() -> subprocess.Popen:
        log = open(private_file(files.log), "ab")  # noqa: SIM115 - the child keeps it open
        return subprocess.Popen(
            [sys.executable, "-m", "veglia.engine.daemon", "worker"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "VEGLIA_PROFILE": profile.name},
        )

    slots = [{"process": spawn(), "restarts": 0, "started": time.time()} for _ in range(workers)]

    reconciler = None
    if profile.broker_url:
        reconciler = Reconciler(profile)
    next_look = time.time() + RECONCILE_SECONDS
    next_config = time.time() + CONFIG_INTERVAL

    def write_status() -> None:
        write_json(
            files.status,
            {
                "supervisor": os.getpid(),
                "started": started,
                "repaired": reconciler.repaired if reconciler else 0,
                "workers": [
                    {"pid": s["process"].pid, "restarts": s["restarts"], "started": s["started"]}
                    for s in slots
                ],
            },
        )

    started = time.time()
    write_status()
    call_daemon_hook("daemon_started", profile)
    LOGGER.warning("daemon started with %d worker(s)", workers)
    while not stopping:
        time.sleep(0.2)
        if time.time() >= next_config:
            next_config = time.time() + CONFIG_INTERVAL
            try:
                follow_config()  # the hooks' threads (a reporter's sender) read them too
            except Exception as exc:
                log_failure("could not read the profile's options again", exc)
        if reconciler is not None and time.time() >= next_look:
            next_look = time.time() + RECONCILE_SECONDS
            try:
                if reconciler.step():
                    write_status()
            except Exception as exc:  # the broker or the database is away: look again later
                log_failure("could not look for stranded processes", exc)
        for slot in slots:
            code = slot["process"].poll()
            if code is None or stopping or time.time() < slot.get("retry_at", 0):
                continue
            if "retry_at" not in slot:
                files.worker_status(slot["process"].pid).unlink(missing_ok=True)
                # A worker that dies at start (a broken setting) is retried ever more slowly.
                quick = time.time() - slot["started"] < 10
                slot["quick_deaths"] = slot.get("quick_deaths", 0) + 1 if quick else 0
                if quick:
                    delay = min(2 ** slot["quick_deaths"], 60)
                    LOGGER.warning(
                        "worker %d exited with %s at start; retrying in %d s",
                        slot["process"].pid,
                        code,
                        delay,
                    )
                    slot["retry_at"] = time.time() + delay
                    continue
            slot.pop("retry_at", None)
            LOGGER.warning("worker %d exited with %s; starting another", slot["process"].pid, code)
            slot.update(process=spawn(), restarts=slot["restarts"] + 1, started=time.time())
            write_status()
    call_daemon_hook("daemon_stopping", profile)
    for slot in slots:
        slot["process"].terminate()
    deadline = time.time() + 30
    for slot in slots:
        try:
            slot["process"].wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            slot["process"].kill()
        files.worker_status(slot["process"].pid).unlink(missing_ok=True)
    files.status.unlink(missing_ok=True)
    files.pid.unlink(missing_ok=True)
    LOGGER.warning("daemon stopped")


def log_failure(what: str, exc: Exception) -> None:
    """One line for a database that is away (it is expected, and said often); the whole
    traceback for anything else."""
    if is_storage_outage(exc):
        LOGGER.warning("%s: the database does not answer (%s)", what, str(exc).splitlines()[0])
    else:
        LOGGER.error("%s", what, exc_info=exc)


def call_daemon_hook(name: str, profile: Profile) -> None:
    """A daemon hook, each implementation on its own: a failing plugin never keeps the
    daemon from running jobs, nor the other plugins from starting."""

    for plugin, exc in call_each(name, profile=profile):
        LOGGER.error("plugin %s failed in %s: %s", plugin, name, exc)
