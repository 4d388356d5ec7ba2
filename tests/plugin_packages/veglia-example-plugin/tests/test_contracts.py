"""veglia's contracts, run over this package's own scheduler and monitor."""

from veglia.testing.contracts import MonitorContract, SchedulerContract


class TestSetsidScheduler(SchedulerContract):
    entry_points = "example.*"


class TestNanGuard(MonitorContract):
    entry_points = "example.*"
