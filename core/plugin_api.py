"""What a plugin author uses, in one place: ``from veglia.plugin_api import ...``.

Each name is re-exported from the module that defines it (so ``plugin_api.Transport is
veglia.transports.Transport``); this list is the public surface veglia keeps stable for
plugins, and ``tests/test_public_api.py`` pins it: a change to it is a deliberate edit of
that test.

- hooks: :data:`hookimpl` marks the functions of a ``veglia.plugins`` module (every hook is
  in ``veglia.hookspecs``), :class:`Option` declares a configuration option
  (``register_options``), :class:`JobScriptWrap` what a plugin puts around a job's commands
  (``job_script_wrap``), :class:`Panel` a table it adds to the overview page
  (``overview_panels``), :class:`PluginMigrations` its own tables and their Alembic
  migrations (``storage_migrations``);
- transports (``veglia.transports``): :class:`Transport`, :class:`FileStat`,
  :class:`AuthOption`;
- schedulers (``veglia.schedulers``): :class:`Scheduler`, :class:`JobTemplate`,
  :class:`JobResources`, :class:`JobInfo`, :class:`JobState`, :class:`JobFailure`,
  :class:`QueueInfo`;
- calculations and parsers (``veglia.calculations``, ``veglia.parsers``): :class:`CalcJob`,
  :class:`CalcInfo`, :class:`CodeInfo`, :class:`ExitCode`, :class:`Parser`;
- monitors (``veglia.monitors``): :class:`Monitor` (a monitor function's signature, for
  type checkers), returning a :data:`MonitorOutcome` (a message, a :class:`MonitorResult`
  or None); :func:`watch_files` with
  :class:`FileWatch` declares the files a monitor reads, handed over as :class:`FileSlice`
  objects read for many jobs at once; a monitor taking ``trace`` gets the job's
  :class:`LiveTrace` (:class:`TraceSample` points), :func:`watch_trace` lets it read it
  itself when called directly; :func:`guarded` attaches a :class:`Guard` (its shell twin,
  run beside the job while no daemon is heard from), :func:`guard_of` reads it;
- data sources (``veglia.datasources``): :class:`DataSource` built from :class:`Setting`
  values, listing :class:`Element` objects in a :class:`Listing`;
- the exceptions plugins raise, under :class:`VegliaError`;
- test doubles (``veglia.testing``): :class:`FakeTransport`, :class:`FakeScheduler`,
  :class:`FakeCluster`, :class:`FakeNode`.

Importing it loads the engine; ``import veglia`` alone does not.
"""

from __future__ import annotations

from veglia.config.options import Option
from veglia.datasources import DataSource, Element, Listing, Setting
from veglia.engine.calcjob import CalcJob
from veglia.engine.calcjob.calcinfo import CalcInfo, CodeInfo
from veglia.engine.calcjob.file_watch import FileSlice, FileWatch, watch_files
from veglia.engine.calcjob.guards import Guard, guard_of, guarded, positive_kwarg
from veglia.engine.calcjob.job_script import JobScriptWrap, packaged_shell
from veglia.engine.calcjob.live_trace import LiveTrace, TraceSample, watch_trace
from veglia.engine.calcjob.monitors import Monitor, MonitorOutcome, MonitorResult
from veglia.engine.calcjob.options import CalcJobOption
from veglia.engine.exit_codes import ExitCode
from veglia.exceptions import (
    CommandOutputTooLarge,
    DataSourceError,
    HostKeyError,
    MonitorError,
    SchedulerError,
    SchedulerSubmitError,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
    VegliaError,
)
from veglia.hookspecs import hookimpl
from veglia.orm.computers import ComputerProperty
from veglia.parsers import Parser
from veglia.schedulers import (
    JobFailure,
    JobInfo,
    JobResources,
    JobState,
    JobTemplate,
    QueueInfo,
    Scheduler,
)
from veglia.storage.plugin_schema import PluginMigrations
from veglia.testing import FakeCluster, FakeNode, FakeScheduler, FakeTransport
from veglia.transports import AuthOption, FileStat, Transport
from veglia.views.panels import Panel

__all__ = [
    "AuthOption",
    "CalcInfo",
    "CalcJob",
    "CalcJobOption",
    "CodeInfo",
    "CommandOutputTooLarge",
    "ComputerProperty",
    "DataSource",
    "DataSourceError",
    "Element",
    "ExitCode",
    "FakeCluster",
    "FakeNode",
    "FakeScheduler",
    "FakeTransport",
    "FileSlice",
    "FileStat",
    "FileWatch",
    "Guard",
    "HostKeyError",
    "JobFailure",
    "JobInfo",
    "JobResources",
    "JobScriptWrap",
    "JobState",
    "JobTemplate",
    "Listing",
    "LiveTrace",
    "Monitor",
    "MonitorError",
    "MonitorOutcome",
    "MonitorResult",
    "Option",
    "Panel",
    "Parser",
    "PluginMigrations",
    "QueueInfo",
    "Scheduler",
    "SchedulerError",
    "SchedulerSubmitError",
    "Setting",
    "TraceSample",
    "Transport",
    "TransportConnectionError",
    "TransportError",
    "TransportTimeoutError",
    "VegliaError",
    "guard_of",
    "guarded",
    "hookimpl",
    "packaged_shell",
    "positive_kwarg",
    "watch_files",
    "watch_trace",
]
