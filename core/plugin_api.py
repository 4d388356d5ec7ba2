"""What a plugin author uses, in one place: ``from veglia.plugin_api import ...``.

The built-in plugins (``veglia.plugins``) and monitors (``veglia.monitors``) import nothing
else of veglia (``tests/test_boundaries.py`` holds them to it): what they need is here.

Each name is re-exported from the module that defines it (so ``plugin_api.Transport is
veglia.transports.Transport``); this list is the public surface veglia keeps stable for
plugins, and ``tests/test_public_api.py`` pins it: a change to it is a deliberate edit of
that test.

Names load on first use (PEP 562, :func:`lazy_exports`): importing this module loads
nothing, and ``from veglia.plugin_api import hookimpl`` loads ``veglia.hookspecs`` alone, so
a plugin's hook module, which every ``veglia`` command loads, can import what it needs at its
top without loading the engine; a name from the engine loads the engine.

- hooks: :data:`hookimpl` marks the functions of a ``veglia.plugins`` module (every hook is
  in ``veglia.hookspecs``), :class:`Option` declares a configuration option
  (``register_options``), :class:`JobScriptWrap` what a plugin puts around a job's commands
  (``job_script_wrap``; :func:`packaged_shell` reads a shell script shipped in a plugin's
  package), :class:`Panel` a table it adds to the overview page (``overview_panels``),
  :class:`PluginMigrations` its own tables and their Alembic migrations
  (``storage_migrations``); :func:`lazy_exports` keeps a plugin package's ``__init__``
  light; what a hook is handed, as Protocols to type an implementation with:
  :class:`ProfileLike`, :class:`ProcessNodeLike`, :class:`CalcJobNodeLike`,
  :class:`ComputerLike` (``veglia.plugin_types``, with the types a plugin hands in);
- configuration: the value parsers an :class:`Option` takes (:func:`parse_boolean`,
  :func:`parse_positive_int`, :func:`parse_positive_seconds`), the :class:`Config` and
  :func:`split_password`; the loaded profile and its storage (:func:`get_profile`,
  :func:`get_storage`, :func:`load_profile`); :func:`notify` sends a user notification;
- transports (``veglia.transports``): :class:`Transport`, :class:`FileStat`,
  :class:`AuthOption`, :func:`shown_command` and :func:`shown_output` (a command and its
  output, cut for a message); :class:`LocalTransportBase` (a transport on this machine),
  :func:`read_requests` (many files read in one remote program) and :class:`PythonProgram`;
- schedulers (``veglia.schedulers``): :class:`Scheduler`, :class:`JobTemplate`,
  :class:`JobResources`, :class:`JobInfo`, :class:`JobState`, :class:`JobFailure`,
  :class:`QueueInfo`;
- calculations, parsers and their data: :class:`CalcJob`, :class:`CalcInfo`,
  :class:`CodeInfo`, :class:`ExitCode`, :class:`Parser`, :class:`CalcJobOption` (an option
  a plugin adds to every calc job), :class:`ComputerProperty` (a property it adds to every
  computer); the data types :class:`Data`, :class:`Bool`, :class:`Int`, :class:`Float`,
  :class:`Str`, :class:`List`, :class:`FolderData`, :class:`SinglefileData` and
  :func:`to_node`; the loaders :func:`load_node`, :func:`load_computer`,
  :func:`load_group`; :class:`ProcessNode`; the attribute keys a process node carries
  (:data:`ATTEMPTS`, :data:`BLOCKED`, :data:`COMPUTER`, :data:`JOB_ID`, :data:`LAUNCH`,
  :data:`MEMORY_AFTER_OOM_KB`, :data:`MONITORS`, :data:`OPTIONS`, :data:`QUEUES`,
  :data:`RESTART`, :data:`SIMILARITY_KEY`, :data:`SUBMISSION_REJECTED`);
  :func:`checked_relative` (a path that stays inside a folder), :func:`node_hashes`
  (caching), the job history (:func:`similar_waits`, :func:`memory_needed_after_oom`) and
  queues (:func:`choose_queue`, :func:`queues_from_attribute`);
- workflows: :class:`WorkChain` with :class:`ToContext`, :func:`while_`, :func:`append_`;
  :class:`ProcessBuilder`, :func:`load_process_class`, :func:`plain_data` (a node's plain
  Python value), :func:`launch_context`; pipeline steps (:func:`parse_steps`,
  :func:`step_builder`, :func:`step_element`, :func:`steps_problems`);
- traces: a job's :class:`LiveTrace` of :class:`TraceSample` points, :func:`watch_trace`,
  :func:`parse_series` and :func:`evenly` (a sampler's series, thinned); a job's JSON trace
  file (:func:`read_trace_file`, :func:`parse_trace`, capped at :data:`MAX_TRACE_BYTES`) and
  its ``proc`` block put on a trace record (:func:`apply_proc_block`);
- monitors (``veglia.monitors``): :class:`Monitor` (a monitor function's signature, for
  type checkers), returning a :data:`MonitorOutcome` (a message, a :class:`MonitorResult`
  or None); :func:`watch_files` with
  :class:`FileWatch` declares the files a monitor reads, handed over as :class:`FileSlice`
  objects read for many jobs at once; a monitor taking ``trace`` gets the job's
  :class:`LiveTrace`, :func:`watch_trace` lets it read it itself when called directly;
  :func:`guarded` attaches a :class:`Guard` (its shell twin, run beside the job while no
  daemon is heard from), :func:`guard_of` reads it, :func:`guard_arguments` its arguments
  for a monitor's kwargs; :func:`positive_kwarg` checks a monitor's argument, and one
  annotated :data:`Regex` must compile (checked when the builder is filled);
  :class:`MonitorSpec` and :func:`load_monitor` read a job's monitors;
- data sources (``veglia.datasources``): :class:`DataSource` built from :class:`Setting`
  values, listing :class:`Element` objects in a :class:`Listing`; :class:`Known`,
  :func:`read_known` and :func:`combined_checksum` for what a source saw before;
- storage, for a plugin's own tables: :class:`PluginMigrations`, :class:`JsonType`,
  :data:`NAMING_CONVENTION`, :func:`utcnow`, :func:`format_seconds`; the nodes table
  :class:`Node` for read-only queries; the change probe (:class:`ChangeStamp`,
  :func:`change_stamp`, :func:`recent_writes`, :func:`nodes_touched_by`);
- daemon control: :func:`control_process`, :func:`unblock_process`,
  :func:`daemon_running`; re-running (:func:`set_aside`, :func:`submit_again`) and
  checking stored files (:class:`FileCheck`, :func:`check_files`, :func:`nodes_to_check`);
- read models for front-ends (``veglia.views``): :func:`overview_view` (and
  :func:`workers`), :func:`processes_view`, :func:`job_view`, :func:`workflow_view`,
  :func:`node_view` (:data:`DRAWN_NODES`), :func:`pipelines_view`, :func:`pipeline_view`,
  :func:`problem_of`, :func:`load_process_node`;
- the exceptions plugins raise or catch, under :class:`VegliaError`;
- test doubles (``veglia.testing``): :class:`FakeTransport`, :class:`FakeScheduler`,
  :class:`FakeCluster`, :class:`FakeNode`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.lazy import lazy_exports

if TYPE_CHECKING:
    from veglia.config.config import Config, split_password
    from veglia.config.values import parse_boolean, parse_positive_int, parse_positive_seconds
    from veglia.datasources import (
        DataSource,
        Element,
        Known,
        Listing,
        Setting,
        combined_checksum,
        read_known,
    )
    from veglia.engine.builder import ProcessBuilder
    from veglia.engine.calcjob import CalcJob
    from veglia.engine.calcjob.caching import node_hashes
    from veglia.engine.calcjob.calcinfo import CalcInfo, CodeInfo
    from veglia.engine.calcjob.file_watch import FileSlice, FileWatch, watch_files
    from veglia.engine.calcjob.guards import (
        Guard,
        guard_arguments,
        guard_of,
        guarded,
        positive_kwarg,
    )
    from veglia.engine.calcjob.history import memory_needed_after_oom, similar_waits
    from veglia.engine.calcjob.job_script import packaged_shell
    from veglia.engine.calcjob.live_trace import (
        LiveTrace,
        TraceSample,
        evenly,
        parse_series,
        watch_trace,
    )
    from veglia.engine.calcjob.monitors import (
        Monitor,
        MonitorOutcome,
        MonitorResult,
        MonitorSpec,
        Regex,
        load_monitor,
    )
    from veglia.engine.calcjob.queues import choose_queue, queues_from_attribute
    from veglia.engine.calcjob.trace_file import (
        MAX_TRACE_BYTES,
        apply_proc_block,
        parse_trace,
        read_trace_file,
    )
    from veglia.engine.daemon.control import control_process, unblock_process
    from veglia.engine.daemon.presence import daemon_running
    from veglia.engine.exit_codes import ExitCode
    from veglia.engine.pipeline_steps import parse_steps, step_builder, step_element, steps_problems
    from veglia.engine.process import launch_context, load_process_class, plain_data
    from veglia.engine.rerun import set_aside, submit_again
    from veglia.engine.workflow.workchain import ToContext, WorkChain, append_, while_
    from veglia.exceptions import (
        CommandOutputTooLarge,
        ConfigurationError,
        DataSourceError,
        HostKeyError,
        InvalidOptionError,
        MonitorError,
        NotExistent,
        SchedulerError,
        SchedulerSubmitError,
        TraceFileUnusable,
        TransportConnectionError,
        TransportError,
        TransportTimeoutError,
        UnsafePathError,
        VegliaError,
        WrongNodeTypeError,
    )
    from veglia.file_reads import read_requests
    from veglia.hookspecs import hookimpl
    from veglia.integrity import FileCheck, check_files, nodes_to_check
    from veglia.local_transport_base import LocalTransportBase
    from veglia.manage import get_profile, get_storage, load_profile
    from veglia.notifications import notify
    from veglia.orm.attributes import (
        ATTEMPTS,
        BLOCKED,
        COMPUTER,
        JOB_ID,
        LAUNCH,
        MEMORY_AFTER_OOM_KB,
        MONITORS,
        OPTIONS,
        QUEUES,
        RESTART,
        SIMILARITY_KEY,
        SUBMISSION_REJECTED,
    )
    from veglia.orm.computers import load_computer
    from veglia.orm.data import (
        Bool,
        Data,
        Float,
        FolderData,
        Int,
        List,
        SinglefileData,
        Str,
        to_node,
    )
    from veglia.orm.groups import load_group
    from veglia.orm.loading import load_node
    from veglia.orm.process_nodes import ProcessNode
    from veglia.orm.queries import ChangeStamp, change_stamp, nodes_touched_by, recent_writes
    from veglia.parsers import Parser
    from veglia.plugin_types import (
        CalcJobNodeLike,
        CalcJobOption,
        ComputerLike,
        ComputerProperty,
        JobScriptWrap,
        Option,
        Panel,
        ProcessNodeLike,
        ProfileLike,
    )
    from veglia.python_program import PythonProgram
    from veglia.relative_paths import checked_relative
    from veglia.schedulers import (
        JobFailure,
        JobInfo,
        JobResources,
        JobState,
        JobTemplate,
        QueueInfo,
        Scheduler,
    )
    from veglia.storage.models import Node
    from veglia.storage.plugin_schema import PluginMigrations
    from veglia.storage.tables import NAMING_CONVENTION, JsonType
    from veglia.storage.times import format_seconds, utcnow
    from veglia.testing import FakeCluster, FakeNode, FakeScheduler, FakeTransport
    from veglia.transports import AuthOption, FileStat, Transport, shown_command, shown_output
    from veglia.views.job import job_view
    from veglia.views.node import DRAWN_NODES, node_view
    from veglia.views.overview import overview_view, workers
    from veglia.views.pipelines import pipeline_view, pipelines_view
    from veglia.views.problems import problem_of
    from veglia.views.processes import processes_view
    from veglia.views.workflow import load_process_node, workflow_view

__all__ = [
    "ATTEMPTS",
    "BLOCKED",
    "COMPUTER",
    "DRAWN_NODES",
    "JOB_ID",
    "LAUNCH",
    "MAX_TRACE_BYTES",
    "MEMORY_AFTER_OOM_KB",
    "MONITORS",
    "NAMING_CONVENTION",
    "OPTIONS",
    "QUEUES",
    "RESTART",
    "SIMILARITY_KEY",
    "SUBMISSION_REJECTED",
    "AuthOption",
    "Bool",
    "CalcInfo",
    "CalcJob",
    "CalcJobNodeLike",
    "CalcJobOption",
    "ChangeStamp",
    "CodeInfo",
    "CommandOutputTooLarge",
    "ComputerLike",
    "ComputerProperty",
    "Config",
    "ConfigurationError",
    "Data",
    "DataSource",
    "DataSourceError",
    "Element",
    "ExitCode",
    "FakeCluster",
    "FakeNode",
    "FakeScheduler",
    "FakeTransport",
    "FileCheck",
    "FileSlice",
    "FileStat",
    "FileWatch",
    "Float",
    "FolderData",
    "Guard",
    "HostKeyError",
    "Int",
    "InvalidOptionError",
    "JobFailure",
    "JobInfo",
    "JobResources",
    "JobScriptWrap",
    "JobState",
    "JobTemplate",
    "JsonType",
    "Known",
    "List",
    "Listing",
    "LiveTrace",
    "LocalTransportBase",
    "Monitor",
    "MonitorError",
    "MonitorOutcome",
    "MonitorResult",
    "MonitorSpec",
    "Node",
    "NotExistent",
    "Option",
    "Panel",
    "Parser",
    "PluginMigrations",
    "ProcessBuilder",
    "ProcessNode",
    "ProcessNodeLike",
    "ProfileLike",
    "PythonProgram",
    "QueueInfo",
    "Regex",
    "Scheduler",
    "SchedulerError",
    "SchedulerSubmitError",
    "Setting",
    "SinglefileData",
    "Str",
    "ToContext",
    "TraceFileUnusable",
    "TraceSample",
    "Transport",
    "TransportConnectionError",
    "TransportError",
    "TransportTimeoutError",
    "UnsafePathError",
    "VegliaError",
    "WorkChain",
    "WrongNodeTypeError",
    "append_",
    "apply_proc_block",
    "change_stamp",
    "check_files",
    "checked_relative",
    "choose_queue",
    "combined_checksum",
    "control_process",
    "daemon_running",
    "evenly",
    "format_seconds",
    "get_profile",
    "get_storage",
    "guard_arguments",
    "guard_of",
    "guarded",
    "hookimpl",
    "job_view",
    "launch_context",
    "lazy_exports",
    "load_computer",
    "load_group",
    "load_monitor",
    "load_node",
    "load_process_class",
    "load_process_node",
    "load_profile",
    "memory_needed_after_oom",
    "node_hashes",
    "node_view",
    "nodes_to_check",
    "nodes_touched_by",
    "notify",
    "overview_view",
    "packaged_shell",
    "parse_boolean",
    "parse_positive_int",
    "parse_positive_seconds",
    "parse_series",
    "parse_steps",
    "parse_trace",
    "pipeline_view",
    "pipelines_view",
    "plain_data",
    "positive_kwarg",
    "problem_of",
    "processes_view",
    "queues_from_attribute",
    "read_known",
    "read_requests",
    "read_trace_file",
    "recent_writes",
    "set_aside",
    "shown_command",
    "shown_output",
    "similar_waits",
    "split_password",
    "step_builder",
    "step_element",
    "steps_problems",
    "submit_again",
    "to_node",
    "unblock_process",
    "utcnow",
    "watch_files",
    "watch_trace",
    "while_",
    "workers",
    "workflow_view",
]

#: Public name -> the module that defines it, imported on first use: a plugin's hook module
#: is loaded by every ``veglia`` command, and most of them need no engine.
_HOMES = {
    "hookimpl": "veglia.hookspecs",
    # The small types hooks pass (veglia.plugin_types): loading one loads no engine.
    "Option": "veglia.plugin_types",
    "JobScriptWrap": "veglia.plugin_types",
    "CalcJobOption": "veglia.plugin_types",
    "ComputerProperty": "veglia.plugin_types",
    "ProfileLike": "veglia.plugin_types",
    "ProcessNodeLike": "veglia.plugin_types",
    "CalcJobNodeLike": "veglia.plugin_types",
    "ComputerLike": "veglia.plugin_types",
    "packaged_shell": "veglia.engine.calcjob.job_script",
    "Panel": "veglia.plugin_types",
    "parse_boolean": "veglia.config.values",
    "parse_positive_int": "veglia.config.values",
    "parse_positive_seconds": "veglia.config.values",
    "Config": "veglia.config.config",
    "split_password": "veglia.config.config",
    "get_profile": "veglia.manage",
    "get_storage": "veglia.manage",
    "load_profile": "veglia.manage",
    "notify": "veglia.notifications",
    "AuthOption": "veglia.transports",
    "FileStat": "veglia.transports",
    "Transport": "veglia.transports",
    "shown_command": "veglia.transports",
    "shown_output": "veglia.transports",
    "LocalTransportBase": "veglia.local_transport_base",
    "read_requests": "veglia.file_reads",
    "PythonProgram": "veglia.python_program",
    "JobFailure": "veglia.schedulers",
    "JobInfo": "veglia.schedulers",
    "JobResources": "veglia.schedulers",
    "JobState": "veglia.schedulers",
    "JobTemplate": "veglia.schedulers",
    "QueueInfo": "veglia.schedulers",
    "Scheduler": "veglia.schedulers",
    "CalcJob": "veglia.engine.calcjob",
    "CalcInfo": "veglia.engine.calcjob.calcinfo",
    "CodeInfo": "veglia.engine.calcjob.calcinfo",
    "ExitCode": "veglia.engine.exit_codes",
    "Parser": "veglia.parsers",
    "load_computer": "veglia.orm.computers",
    "Bool": "veglia.orm.data",
    "Data": "veglia.orm.data",
    "Float": "veglia.orm.data",
    "FolderData": "veglia.orm.data",
    "Int": "veglia.orm.data",
    "List": "veglia.orm.data",
    "SinglefileData": "veglia.orm.data",
    "Str": "veglia.orm.data",
    "to_node": "veglia.orm.data",
    "load_node": "veglia.orm.loading",
    "load_group": "veglia.orm.groups",
    "ProcessNode": "veglia.orm.process_nodes",
    "ATTEMPTS": "veglia.orm.attributes",
    "BLOCKED": "veglia.orm.attributes",
    "COMPUTER": "veglia.orm.attributes",
    "JOB_ID": "veglia.orm.attributes",
    "LAUNCH": "veglia.orm.attributes",
    "MEMORY_AFTER_OOM_KB": "veglia.orm.attributes",
    "MONITORS": "veglia.orm.attributes",
    "OPTIONS": "veglia.orm.attributes",
    "QUEUES": "veglia.orm.attributes",
    "RESTART": "veglia.orm.attributes",
    "SIMILARITY_KEY": "veglia.orm.attributes",
    "SUBMISSION_REJECTED": "veglia.orm.attributes",
    "checked_relative": "veglia.relative_paths",
    "node_hashes": "veglia.engine.calcjob.caching",
    "memory_needed_after_oom": "veglia.engine.calcjob.history",
    "similar_waits": "veglia.engine.calcjob.history",
    "choose_queue": "veglia.engine.calcjob.queues",
    "queues_from_attribute": "veglia.engine.calcjob.queues",
    "ToContext": "veglia.engine.workflow.workchain",
    "WorkChain": "veglia.engine.workflow.workchain",
    "append_": "veglia.engine.workflow.workchain",
    "while_": "veglia.engine.workflow.workchain",
    "ProcessBuilder": "veglia.engine.builder",
    "launch_context": "veglia.engine.process",
    "plain_data": "veglia.engine.process",
    "load_process_class": "veglia.engine.process",
    "parse_steps": "veglia.engine.pipeline_steps",
    "step_builder": "veglia.engine.pipeline_steps",
    "step_element": "veglia.engine.pipeline_steps",
    "steps_problems": "veglia.engine.pipeline_steps",
    "LiveTrace": "veglia.engine.calcjob.live_trace",
    "TraceSample": "veglia.engine.calcjob.live_trace",
    "evenly": "veglia.engine.calcjob.live_trace",
    "parse_series": "veglia.engine.calcjob.live_trace",
    "watch_trace": "veglia.engine.calcjob.live_trace",
    "MAX_TRACE_BYTES": "veglia.engine.calcjob.trace_file",
    "apply_proc_block": "veglia.engine.calcjob.trace_file",
    "parse_trace": "veglia.engine.calcjob.trace_file",
    "read_trace_file": "veglia.engine.calcjob.trace_file",
    "Monitor": "veglia.engine.calcjob.monitors",
    "MonitorOutcome": "veglia.engine.calcjob.monitors",
    "MonitorResult": "veglia.engine.calcjob.monitors",
    "MonitorSpec": "veglia.engine.calcjob.monitors",
    "Regex": "veglia.engine.calcjob.monitors",
    "load_monitor": "veglia.engine.calcjob.monitors",
    "FileSlice": "veglia.engine.calcjob.file_watch",
    "FileWatch": "veglia.engine.calcjob.file_watch",
    "watch_files": "veglia.engine.calcjob.file_watch",
    "Guard": "veglia.engine.calcjob.guards",
    "guard_arguments": "veglia.engine.calcjob.guards",
    "guard_of": "veglia.engine.calcjob.guards",
    "guarded": "veglia.engine.calcjob.guards",
    "positive_kwarg": "veglia.engine.calcjob.guards",
    "DataSource": "veglia.datasources",
    "Element": "veglia.datasources",
    "Known": "veglia.datasources",
    "Listing": "veglia.datasources",
    "Setting": "veglia.datasources",
    "combined_checksum": "veglia.datasources",
    "read_known": "veglia.datasources",
    "PluginMigrations": "veglia.storage.plugin_schema",
    "JsonType": "veglia.storage.tables",
    "NAMING_CONVENTION": "veglia.storage.tables",
    "format_seconds": "veglia.storage.times",
    "utcnow": "veglia.storage.times",
    "Node": "veglia.storage.models",
    "ChangeStamp": "veglia.orm.queries",
    "change_stamp": "veglia.orm.queries",
    "nodes_touched_by": "veglia.orm.queries",
    "recent_writes": "veglia.orm.queries",
    "control_process": "veglia.engine.daemon.control",
    "unblock_process": "veglia.engine.daemon.control",
    "daemon_running": "veglia.engine.daemon.presence",
    "set_aside": "veglia.engine.rerun",
    "submit_again": "veglia.engine.rerun",
    "FileCheck": "veglia.integrity",
    "check_files": "veglia.integrity",
    "nodes_to_check": "veglia.integrity",
    "job_view": "veglia.views.job",
    "DRAWN_NODES": "veglia.views.node",
    "node_view": "veglia.views.node",
    "overview_view": "veglia.views.overview",
    "workers": "veglia.views.overview",
    "pipeline_view": "veglia.views.pipelines",
    "pipelines_view": "veglia.views.pipelines",
    "problem_of": "veglia.views.problems",
    "processes_view": "veglia.views.processes",
    "load_process_node": "veglia.views.workflow",
    "workflow_view": "veglia.views.workflow",
    "CommandOutputTooLarge": "veglia.exceptions",
    "ConfigurationError": "veglia.exceptions",
    "DataSourceError": "veglia.exceptions",
    "HostKeyError": "veglia.exceptions",
    "InvalidOptionError": "veglia.exceptions",
    "MonitorError": "veglia.exceptions",
    "NotExistent": "veglia.exceptions",
    "SchedulerError": "veglia.exceptions",
    "SchedulerSubmitError": "veglia.exceptions",
    "TraceFileUnusable": "veglia.exceptions",
    "TransportConnectionError": "veglia.exceptions",
    "TransportError": "veglia.exceptions",
    "TransportTimeoutError": "veglia.exceptions",
    "UnsafePathError": "veglia.exceptions",
    "VegliaError": "veglia.exceptions",
    "WrongNodeTypeError": "veglia.exceptions",
    "FakeCluster": "veglia.testing",
    "FakeNode": "veglia.testing",
    "FakeScheduler": "veglia.testing",
    "FakeTransport": "veglia.testing",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
