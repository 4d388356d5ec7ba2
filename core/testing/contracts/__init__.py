"""The contracts veglia's engine relies on, as test classes a plugin package subclasses.

veglia runs these over every installed entry point in its own test suite; a plugin
package runs them over its own entry points, in its own tests, by naming them::

    from veglia.testing.contracts import MonitorContract, SchedulerContract, TransportContract

    class TestMyScheduler(SchedulerContract):
        entry_points = "mylab.*"  # a name or fnmatch pattern, or a tuple of them

Importing a class is the whole opt-in: nothing is loaded into anyone's pytest run by an
entry point (``pytest11``), as in pandas' extension-array base tests. The classes need
pytest, which veglia itself does not. A transport is checked for its structure from its
class; its behaviour runs only where the test can open it, so a transport package
overrides :meth:`TransportContract.open_transport` to connect to a test host (the
default opens :class:`~veglia.testing.FakeTransport` and skips the rest, saying so).

One module per contract: :mod:`~veglia.testing.contracts.transport`,
:mod:`~veglia.testing.contracts.scheduler`, :mod:`~veglia.testing.contracts.monitor`.
"""

from veglia.testing.contracts.monitor import MonitorContract
from veglia.testing.contracts.scheduler import SchedulerContract
from veglia.testing.contracts.transport import TransportContract

__all__ = ["MonitorContract", "SchedulerContract", "TransportContract"]
