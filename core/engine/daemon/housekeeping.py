"""What a daemon does once, beside running processes: the plugins' daemon hooks, with a
broker the repair of stranded processes (see :mod:`reconcile`), and, on the worker's loop,
the cancels of killed jobs still pending (``calcjob.kill.PendingCancelSweeper``).

Its first worker does it, not the supervisor: the supervisor then loads neither the
database layer nor a broker client, and stays a few MB (bench/daemon_memory.py). The
supervisor marks that worker with :data:`PRIMARY_ENV`, and the worker that replaces it
when it dies takes its duties over.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from veglia.config.profile import Profile
from veglia.engine.daemon.files import DaemonFiles
from veglia.engine.daemon.reconcile import Reconciler
from veglia.engine.daemon.supervisor import PRIMARY_ENV
from veglia.plugin_manager import call_each
from veglia.storage.outage import is_storage_outage

__all__ = ["PRIMARY_ENV", "RECONCILE_SECONDS", "Housekeeper", "call_daemon_hook", "log_failure"]

LOGGER = logging.getLogger("veglia.daemon")
#: How often stranded processes are looked for (two looks before one is repaired).
RECONCILE_SECONDS = 5.0


def log_failure(what: str, exc: Exception) -> None:
    """One line for a database that is away (it is expected, and said often); the whole
    traceback for anything else."""
    if is_storage_outage(exc):
        LOGGER.warning("%s: the database does not answer (%s)", what, str(exc).splitlines()[0])
    else:
        LOGGER.error("%s", what, exc_info=exc)


def call_daemon_hook(name: str, profile: Profile, **more: object) -> None:
    """A daemon hook, each implementation on its own: a failing plugin never keeps the
    daemon from running jobs, nor the other plugins from starting."""
    for plugin, exc in call_each(name, profile=profile, **more):
        LOGGER.error("plugin %s failed in %s: %s", plugin, name, exc)


class Housekeeper:
    """The daemon hooks, and a thread that repairs stranded processes (with a broker);
    ``repaired`` counts the processes it queued again."""

    def __init__(
        self,
        profile: Profile,
        interval: float = RECONCILE_SECONDS,
        on_repair: Callable[[], None] | None = None,
    ) -> None:
        self.profile = profile
        self.interval = interval
        #: Called (from the repair thread) after processes were queued again.
        self.on_repair = on_repair
        self.reconciler = Reconciler(profile) if profile.broker_url else None
        self._stop = threading.Event()

    @property
    def repaired(self) -> int | None:
        """None without a broker: nothing is repaired then."""
        return None if self.reconciler is None else self.reconciler.repaired

    def start(self) -> None:
        start_options = DaemonFiles(self.profile).read_start_options()
        call_daemon_hook("daemon_started", self.profile, start_options=start_options)
        if self.reconciler is not None:
            # A thread of its own: a look waits on the database and the broker, which the
            # worker's event loop must not.
            threading.Thread(
                target=self._repair_until_stopped, daemon=True, name="veglia-repair"
            ).start()

    def stop(self) -> None:
        self._stop.set()
        call_daemon_hook("daemon_stopping", self.profile)

    def _repair_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.reconciler.step() and self.on_repair is not None:  # type: ignore[union-attr]
                    self.on_repair()
            except Exception as exc:  # the broker or the database is away: look again later
                log_failure("could not look for stranded processes", exc)
