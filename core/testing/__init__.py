"""Test doubles for plugin authors: a transport and a scheduler that need no computer.

As httpx ships ``MockTransport``, veglia ships these so a monitor, a parser or a
calculation can be tested without sshd or a batch system:

- :class:`FakeTransport` is a whole :class:`~veglia.transports.Transport`: a sandbox folder
  on this machine stands for the computer, every call is recorded, commands can be
  answered by the test (or run with bash in the sandbox), and any call can be made to fail.
- :class:`FakeScheduler` is a :class:`~veglia.schedulers.Scheduler` whose jobs the test
  drives: a submission gets an id and waits, queued, until the test starts, runs or
  finishes it; listings report what the test set. Its jobs live in a :class:`FakeCluster`.
- :class:`FakeNode` is a running job's node as a monitor sees it, in memory.

Example, a monitor tested against a file the "job" wrote::

    from veglia.testing import FakeNode, FakeTransport

    def test_my_monitor_stops_on_nan():
        with FakeTransport() as transport:
            (transport.root / "out.log").write_text("energy = NaN\\n")
            assert my_monitor(FakeNode(), transport, path="out.log")
            assert [call.name for call in transport.calls] == ["read_bytes"]

Both can also be registered as entry points of a test package (``fake.transport =
"veglia.testing:FakeTransport"``) to run a whole calc job through the engine; see
docs/plugins.md, "Testing your plugin".

The contracts the engine relies on, as test classes a plugin package subclasses over its
own entry points, are in :mod:`veglia.testing.contracts` (which needs pytest).

One module per double: :mod:`~veglia.testing.transport`, :mod:`~veglia.testing.scheduler`,
:mod:`~veglia.testing.cluster`, :mod:`~veglia.testing.node`; import them from here.
"""

from veglia.testing.cluster import FakeCluster
from veglia.testing.node import FakeNode
from veglia.testing.scheduler import FakeScheduler
from veglia.testing.transport import Call, FakeTransport

__all__ = ["Call", "FakeCluster", "FakeNode", "FakeScheduler", "FakeTransport"]
