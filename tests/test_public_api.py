"""The public surface, pinned (as httpx's tests/test_exported_members.py pins its own):
``veglia.__all__`` for users, ``veglia.plugin_api.__all__`` for plugin authors and
``veglia.testing.__all__`` for their tests. Changing one of them is a deliberate edit here."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

import veglia
import veglia.plugin_api
import veglia.testing

VEGLIA_ALL = [
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

PLUGIN_API_ALL = [
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

#: Where each name of the plugin API is defined: it is re-exported, never redefined.
HOMES = {
    "veglia.hookspecs": ["hookimpl"],
    "veglia.plugin_types": [
        "CalcJobNodeLike",
        "CalcJobOption",
        "ComputerLike",
        "ComputerProperty",
        "JobScriptWrap",
        "Option",
        "Panel",
        "ProcessNodeLike",
        "ProfileLike",
    ],
    "veglia.engine.calcjob.job_script": ["packaged_shell"],
    "veglia.lazy": ["lazy_exports"],
    "veglia.config.values": ["parse_boolean", "parse_positive_int", "parse_positive_seconds"],
    "veglia.config.config": ["Config", "split_password"],
    "veglia.manage": ["get_profile", "get_storage", "load_profile"],
    "veglia.notifications": ["notify"],
    "veglia.transports": ["AuthOption", "FileStat", "Transport", "shown_command", "shown_output"],
    "veglia.local_transport_base": ["LocalTransportBase"],
    "veglia.file_reads": ["read_requests"],
    "veglia.python_program": ["PythonProgram"],
    "veglia.schedulers": [
        "JobFailure",
        "JobInfo",
        "JobResources",
        "JobState",
        "JobTemplate",
        "QueueInfo",
        "Scheduler",
    ],
    "veglia.engine.calcjob": ["CalcJob"],
    "veglia.engine.calcjob.calcinfo": ["CalcInfo", "CodeInfo"],
    "veglia.engine.exit_codes": ["ExitCode"],
    "veglia.parsers": ["Parser"],
    "veglia.orm.computers": ["load_computer"],
    "veglia.orm.data": [
        "Bool",
        "Data",
        "Float",
        "FolderData",
        "Int",
        "List",
        "SinglefileData",
        "Str",
        "to_node",
    ],
    "veglia.orm.loading": ["load_node"],
    "veglia.orm.groups": ["load_group"],
    "veglia.orm.process_nodes": ["ProcessNode"],
    "veglia.orm.attributes": [
        "ATTEMPTS",
        "BLOCKED",
        "COMPUTER",
        "JOB_ID",
        "LAUNCH",
        "MEMORY_AFTER_OOM_KB",
        "MONITORS",
        "OPTIONS",
        "QUEUES",
        "RESTART",
        "SIMILARITY_KEY",
        "SUBMISSION_REJECTED",
    ],
    "veglia.relative_paths": ["checked_relative"],
    "veglia.engine.calcjob.caching": ["node_hashes"],
    "veglia.engine.calcjob.history": ["memory_needed_after_oom", "similar_waits"],
    "veglia.engine.calcjob.queues": ["choose_queue", "queues_from_attribute"],
    "veglia.engine.workflow.workchain": ["ToContext", "WorkChain", "append_", "while_"],
    "veglia.engine.builder": ["ProcessBuilder"],
    "veglia.engine.process": ["launch_context", "load_process_class", "plain_data"],
    "veglia.engine.pipeline_steps": [
        "parse_steps",
        "step_builder",
        "step_element",
        "steps_problems",
    ],
    "veglia.engine.calcjob.live_trace": [
        "LiveTrace",
        "TraceSample",
        "evenly",
        "parse_series",
        "watch_trace",
    ],
    "veglia.engine.calcjob.trace_file": [
        "MAX_TRACE_BYTES",
        "apply_proc_block",
        "parse_trace",
        "read_trace_file",
    ],
    "veglia.engine.calcjob.monitors": [
        "Monitor",
        "MonitorOutcome",
        "MonitorResult",
        "MonitorSpec",
        "Regex",
        "load_monitor",
    ],
    "veglia.engine.calcjob.file_watch": ["FileSlice", "FileWatch", "watch_files"],
    "veglia.engine.calcjob.guards": [
        "Guard",
        "guard_arguments",
        "guard_of",
        "guarded",
        "positive_kwarg",
    ],
    "veglia.datasources": [
        "DataSource",
        "Element",
        "Known",
        "Listing",
        "Setting",
        "combined_checksum",
        "read_known",
    ],
    "veglia.storage.plugin_schema": ["PluginMigrations"],
    "veglia.storage.tables": ["JsonType", "NAMING_CONVENTION"],
    "veglia.storage.times": ["format_seconds", "utcnow"],
    "veglia.storage.models": ["Node"],
    "veglia.orm.queries": ["ChangeStamp", "change_stamp", "nodes_touched_by", "recent_writes"],
    "veglia.engine.daemon.control": ["control_process", "unblock_process"],
    "veglia.engine.daemon.presence": ["daemon_running"],
    "veglia.engine.rerun": ["set_aside", "submit_again"],
    "veglia.integrity": ["FileCheck", "check_files", "nodes_to_check"],
    "veglia.views.job": ["job_view"],
    "veglia.views.node": ["DRAWN_NODES", "node_view"],
    "veglia.views.overview": ["overview_view", "workers"],
    "veglia.views.pipelines": ["pipeline_view", "pipelines_view"],
    "veglia.views.problems": ["problem_of"],
    "veglia.views.processes": ["processes_view"],
    "veglia.views.workflow": ["load_process_node", "workflow_view"],
    "veglia.exceptions": [
        "CommandOutputTooLarge",
        "ConfigurationError",
        "DataSourceError",
        "HostKeyError",
        "InvalidOptionError",
        "MonitorError",
        "NotExistent",
        "SchedulerError",
        "SchedulerSubmitError",
        "TraceFileUnusable",
        "TransportConnectionError",
        "TransportError",
        "TransportTimeoutError",
        "UnsafePathError",
        "VegliaError",
        "WrongNodeTypeError",
    ],
    "veglia.testing": ["FakeCluster", "FakeNode", "FakeScheduler", "FakeTransport"],
}

TESTING_ALL = ["Call", "FakeCluster", "FakeNode", "FakeScheduler", "FakeTransport"]
CONTRACTS_ALL = ["MonitorContract", "SchedulerContract", "TransportContract"]


def test_veglia_all_is_pinned():
    assert veglia.__all__ == VEGLIA_ALL
    for name in VEGLIA_ALL:
        assert hasattr(veglia, name), name


def test_plugin_api_all_is_pinned():
    assert veglia.plugin_api.__all__ == PLUGIN_API_ALL


def test_testing_all_is_pinned():
    assert veglia.testing.__all__ == TESTING_ALL


def test_contracts_all_is_pinned():
    """Plugin packages subclass these in their tests (docs/plugins.md)."""
    import veglia.testing.contracts

    assert veglia.testing.contracts.__all__ == CONTRACTS_ALL


@pytest.mark.parametrize(
    ("module", "name"), [(module, name) for module, names in HOMES.items() for name in names]
)
def test_plugin_api_reexports_each_name_from_its_home(module, name):
    assert getattr(veglia.plugin_api, name) is getattr(importlib.import_module(module), name)


def test_every_plugin_api_name_has_a_home_and_a_docstring():
    homed = sorted(name for names in HOMES.values() for name in names)
    assert homed == sorted(PLUGIN_API_ALL)
    for name in PLUGIN_API_ALL:
        value = getattr(veglia.plugin_api, name)
        if name == "hookimpl":  # a pluggy marker instance: its docs are veglia.hookspecs'
            assert value.project_name == "veglia"
            continue
        assert inspect.getdoc(value), f"{name} has no docstring"


def test_import_veglia_stays_light():
    """``import veglia`` (every CLI start, every plugin's first import) loads neither the
    engine, the plugin API, the test doubles nor their heavy dependencies."""
    code = (
        "import sys, veglia; "
        "heavy = ['veglia.engine', 'veglia.plugin_api', 'veglia.testing', 'veglia.plugins', "
        "'plumpy', 'sqlalchemy', 'paramiko', 'kiwipy']; "
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""


def test_the_plugin_api_loads_a_name_s_home_only_when_it_is_used():
    """Every ``veglia`` command loads each plugin's hook module, which imports what it needs
    from the plugin API at its top: ``hookimpl`` and an option's parsers load no engine."""
    code = (
        "import sys; "
        "from veglia.plugin_api import Option, hookimpl, parse_boolean; "
        "heavy = ['veglia.engine', 'veglia.orm', 'veglia.storage', 'plumpy', 'sqlalchemy']; "
        "print(','.join(m for m in heavy if m in sys.modules)); "
        "from veglia.plugin_api import CalcJob; "
        "print('veglia.engine' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split("\n")[:2] == ["", "True"]


def test_a_parser_must_implement_parse():
    from veglia.plugin_api import Parser

    with pytest.raises(TypeError, match="parse"):
        Parser(None)

    class Nothing(Parser):
        def parse(self, retrieved, outcome):
            return None

    assert Nothing(calcjob=None).parse(None, {}) is None


LAZY_PACKAGES = [
    "veglia",
    "veglia.orm",
    "veglia.engine",
    "veglia.engine.calcjob",
    "veglia.views",
    "veglia.plugin_api",
]


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_lazily_exported_names_are_listed_before_use_and_unknown_ones_named(name):
    """What a user's editor or ``dir()`` sees of a package whose names load on first use."""
    code = (
        f"import {name} as p; "
        "print(sorted(set(p.__all__) - set(dir(p)))); "
        "print(all(getattr(p, n) is getattr(p, n) for n in p.__all__)); "
        "print(sorted(set(p.__all__) - set(vars(p))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split("\n")[:3] == ["[]", "True", "[]"]  # listed, then kept
    package = importlib.import_module(name)
    with pytest.raises(AttributeError, match=rf"^module '{name}' has no attribute 'nosuch'$"):
        package.nosuch  # noqa: B018
