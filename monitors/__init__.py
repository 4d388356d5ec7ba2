"""Built-in monitor functions, registered under the ``veglia.monitors`` entry points.

A monitor is ``monitor(node, transport, **kwargs) -> str | MonitorResult | None`` (the
``veglia.plugin_api.Monitor`` protocol): at each scheduler poll the engine calls it; a
returned message kills the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from veglia.monitors.basic import always_kill
    from veglia.monitors.files import convergence, file_pattern, stalled_output
    from veglia.monitors.gpu import gpu_idle
    from veglia.monitors.memory import memory_ceiling
    from veglia.monitors.pending import pending_too_long
    from veglia.monitors.responsive import unresponsive
    from veglia.monitors.walltime import walltime_guard
    from veglia.plugin_api import Monitor

    # Never run: the type checker checks that each built-in is a Monitor (the entry points
    # in pyproject.toml name the same functions), one line each for a readable error.
    _always_kill: Monitor = always_kill
    _convergence: Monitor = convergence
    _file_pattern: Monitor = file_pattern
    _gpu_idle: Monitor = gpu_idle
    _memory_ceiling: Monitor = memory_ceiling
    _pending_too_long: Monitor = pending_too_long
    _stalled_output: Monitor = stalled_output
    _unresponsive: Monitor = unresponsive
    _walltime_guard: Monitor = walltime_guard
