"""veglia: run calculation jobs on local and remote computers through real batch schedulers,
with full provenance in a database and pluggable monitors that watch every running job."""

from __future__ import annotations

from veglia.entry_points import (
    CalculationFactory,
    DataFactory,
    MonitorFactory,
    ParserFactory,
    SchedulerFactory,
    TransportFactory,
)
from veglia.manage import get_profile, get_storage, load_profile

__version__ = "0.1.0"

__all__ = [
    "CalculationFactory",
    "DataFactory",
    "MonitorFactory",
    "ParserFactory",
    "SchedulerFactory",
    "TransportFactory",
    "__version__",
    "get_profile",
    "get_storage",
    "load_profile",
]
