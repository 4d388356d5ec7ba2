"""The contract every registered scheduler keeps, built-in or from another package.

veglia.testing.contracts.SchedulerContract, run over every ``veglia.schedulers`` entry
point and veglia's test double, ``veglia.testing.FakeScheduler``, without a batch system.
"""

from __future__ import annotations

from typing import ClassVar

from veglia.testing import FakeCluster, FakeScheduler
from veglia.testing.contracts import SchedulerContract


class TestSchedulers(SchedulerContract):
    entry_points = "*"
    others: ClassVar = {"veglia.testing.FakeScheduler": lambda: FakeScheduler(FakeCluster())}
