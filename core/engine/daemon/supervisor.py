"""The supervisor: keeps N worker processes alive and restarts any that dies, until it is
told to stop.

It imports nothing of the engine, the storage or the broker (tests/test_daemon.py checks):
what needs them, the repair of stranded processes and the plugins' daemon hooks, runs in
the first worker (see :mod:`housekeeping`), so the supervisor stays a few MB."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any, TypedDict

from veglia.config.private_paths import private_file, private_folder
from veglia.config.profile import Profile
from veglia.engine.daemon.files import DaemonFiles, write_json
from veglia.engine.daemon.live_config import INTERVAL as CONFIG_INTERVAL
from veglia.engine.daemon.live_config import follow_config
from veglia.engine.daemon.scaling import clear_requests, take_requests

__all__ = ["supervise"]

LOGGER = logging.getLogger("veglia.daemon")
#: Set to ``1`` in the environment of the worker that keeps house (see housekeeping).
PRIMARY_ENV = "VEGLIA_DAEMON_PRIMARY"
#: How long a worker told to stop (SIGTERM) may take before it is killed.
RETIRE_TIMEOUT = 30.0


class _Slot(TypedDict, total=False):
    """One worker the supervisor keeps running."""

    process: subprocess.Popen[bytes]
    restarts: int
    started: float
    primary: bool
    quick_deaths: int  # deaths in a row within 10 s of starting
    retry_at: float  # when to start it again after such a death


def supervise(profile: Profile, workers: int) -> None:
    """Start ``workers`` workers and restart any that dies, until SIGTERM; add or remove
    workers when ``veglia daemon incr / decr`` asks (see :mod:`scaling`)."""
    files = DaemonFiles(profile)
    private_folder(files.folder)
    files.pid.write_text(str(os.getpid()))
    clear_requests(files)
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def spawn(primary: bool) -> subprocess.Popen[bytes]:
        log = open(private_file(files.log), "ab")  # noqa: SIM115 - closed once the child has it
        process = subprocess.Popen(
            [sys.executable, "-m", "veglia.engine.daemon", "worker"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            **files.spawn_options(VEGLIA_PROFILE=profile.name, **{PRIMARY_ENV: str(int(primary))}),
        )
        log.close()  # the child has its own copy
        return process

    def new_slot(primary: bool) -> _Slot:
        return {
            "process": spawn(primary),
            "restarts": 0,
            "started": time.time(),
            "primary": primary,
        }

    slots: list[_Slot] = [new_slot(index == 0) for index in range(workers)]
    #: Workers removed by `daemon decr`, told to stop: each with when it is killed instead.
    retiring: list[tuple[subprocess.Popen[bytes], float]] = []
    next_config = time.time() + CONFIG_INTERVAL
    most = None if profile.broker_url else 1  # without a broker, one worker takes everything

    def write_status() -> None:
        write_json(
            files.status,
            {
                "supervisor": os.getpid(),
                "started": started,
                "broker": bool(profile.broker_url),
                "modules": sorted(sys.modules),  # kept few: see tests/test_daemon.py
                "workers": [
                    {"pid": s["process"].pid, "restarts": s["restarts"], "started": s["started"]}
                    for s in slots
                ],
                "retiring": [process.pid for process, _ in retiring],
            },
        )

    def scale(delta: int) -> None:
        """Add or remove workers; the newest go first, the first one (which keeps house)
        never: at least one worker stays."""
        wanted = max(1, len(slots) + delta)
        wanted = wanted if most is None else min(wanted, most)
        while len(slots) < wanted:
            slots.append(new_slot(False))
        while len(slots) > wanted:
            process = slots.pop()["process"]
            process.terminate()  # a worker stops at SIGTERM, its processes checkpointed
            retiring.append((process, time.time() + RETIRE_TIMEOUT))
        LOGGER.warning("daemon now has %d worker(s)", len(slots))

    def reap_retiring() -> bool:
        """Forget the removed workers that have stopped, kill those past their time; True
        when one went."""
        gone = False
        for entry in list(retiring):
            process, deadline = entry
            if process.poll() is None and time.time() < deadline:
                continue
            if process.poll() is None:
                LOGGER.warning("removed worker %d did not stop; killing it", process.pid)
                process.kill()
                process.wait()
            files.worker_status(process.pid).unlink(missing_ok=True)
            retiring.remove(entry)
            gone = True
        return gone

    started = time.time()
    write_status()
    LOGGER.warning("daemon started with %d worker(s)", workers)
    while not stopping:
        time.sleep(0.2)
        if time.time() >= next_config:
            next_config = time.time() + CONFIG_INTERVAL
            try:
                follow_config()  # the hooks' threads (a reporter's sender) read them too
            except Exception:
                LOGGER.exception("could not read the profile's options again")
        requests = take_requests(files)
        if requests.delta:
            scale(requests.delta)
        if requests.delta or reap_retiring():
            write_status()
        requests.done()
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
            slot.update(
                {
                    "process": spawn(slot["primary"]),
                    "restarts": slot["restarts"] + 1,
                    "started": time.time(),
                }
            )
            write_status()
    processes = [slot["process"] for slot in slots] + [process for process, _ in retiring]
    for process in processes:
        process.terminate()
    deadline = time.time() + RETIRE_TIMEOUT
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            process.kill()
        files.worker_status(process.pid).unlink(missing_ok=True)
    files.status.unlink(missing_ok=True)
    files.pid.unlink(missing_ok=True)
    LOGGER.warning("daemon stopped")
