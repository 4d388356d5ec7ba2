"""veglia's contracts, run over this package's own transport and scheduler."""

from veglia.testing.contracts import SchedulerContract, TransportContract


class TestFakeTransport(TransportContract):
    entry_points = "fake.*"


class TestFakeScheduler(SchedulerContract):
    entry_points = "fake.*"
