"""The daemon: a ``supervisor`` keeps N ``worker`` processes alive; workers take processes
from the broker (``broker_tasks``) or the database, each under its ``lease``, and ``control``
carries kill, pause and play to them. ``reconcile`` repairs stranded processes, ``outages``
resumes jobs paused while their computer was away, and ``child_watcher`` wakes workflows.

Run as ``python -m veglia.engine.daemon supervise N`` / ``worker`` (``veglia daemon`` does).
"""

from veglia.engine.daemon.files import DaemonFiles

__all__ = ["DaemonFiles"]
