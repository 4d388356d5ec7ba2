"""veglia: run calculation jobs on local and remote computers through real batch schedulers,
with full provenance in a database and pluggable monitors that watch every running job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.lazy import lazy_exports

if TYPE_CHECKING:
    from veglia.entry_points import (
        CalculationFactory,
        DataFactory,
        DataSourceFactory,
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
    "DataSourceFactory",
    "MonitorFactory",
    "ParserFactory",
    "SchedulerFactory",
    "TransportFactory",
    "__version__",
    "get_profile",
    "get_storage",
    "load_profile",
]

#: Public name -> its module, imported on first use (PEP 562): every CLI start and every
#: plugin imports ``veglia``, and most need neither entry points nor profiles at once.
_EXPORTS = {
    "CalculationFactory": "veglia.entry_points",
    "DataFactory": "veglia.entry_points",
    "DataSourceFactory": "veglia.entry_points",
    "MonitorFactory": "veglia.entry_points",
    "ParserFactory": "veglia.entry_points",
    "SchedulerFactory": "veglia.entry_points",
    "TransportFactory": "veglia.entry_points",
    "get_profile": "veglia.manage",
    "get_storage": "veglia.manage",
    "load_profile": "veglia.manage",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
