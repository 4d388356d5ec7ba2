"""Built-in monitor functions, registered under the ``veglia.monitors`` entry points.

A monitor is ``monitor(node, transport, **kwargs) -> str | None``: at each scheduler poll
the engine calls it; a returned message kills the job.
"""
