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

#: Where each name of the plugin API is defined: it is re-exported, never redefined.
HOMES = {
    "veglia.config.options": ["Option"],
    "veglia.engine.calcjob.calcinfo": ["CalcInfo", "CodeInfo"],
    "veglia.engine.calcjob": ["CalcJob"],
    "veglia.engine.exit_codes": ["ExitCode"],
    "veglia.engine.calcjob.monitors": ["Monitor", "MonitorOutcome", "MonitorResult"],
    "veglia.engine.calcjob.file_watch": ["FileSlice", "FileWatch", "watch_files"],
    "veglia.engine.calcjob.live_trace": ["LiveTrace", "TraceSample", "watch_trace"],
    "veglia.engine.calcjob.options": ["CalcJobOption"],
    "veglia.engine.calcjob.job_script": ["JobScriptWrap", "packaged_shell"],
    "veglia.engine.calcjob.guards": ["Guard", "guard_of", "guarded", "positive_kwarg"],
    "veglia.orm.computers": ["ComputerProperty"],
    "veglia.datasources": ["DataSource", "Element", "Listing", "Setting"],
    "veglia.exceptions": [
        "CommandOutputTooLarge",
        "DataSourceError",
        "HostKeyError",
        "MonitorError",
        "SchedulerError",
        "SchedulerSubmitError",
        "TransportConnectionError",
        "TransportError",
        "TransportTimeoutError",
        "VegliaError",
    ],
    "veglia.hookspecs": ["hookimpl"],
    "veglia.parsers": ["Parser"],
    "veglia.schedulers": [
        "JobFailure",
        "JobInfo",
        "JobResources",
        "JobState",
        "JobTemplate",
        "QueueInfo",
        "Scheduler",
    ],
    "veglia.storage.plugin_schema": ["PluginMigrations"],
    "veglia.testing": ["FakeCluster", "FakeNode", "FakeScheduler", "FakeTransport"],
    "veglia.transports": ["AuthOption", "FileStat", "Transport"],
    "veglia.views.panels": ["Panel"],
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


def test_a_parser_must_implement_parse():
    from veglia.plugin_api import Parser

    with pytest.raises(TypeError, match="parse"):
        Parser(None)

    class Nothing(Parser):
        def parse(self, retrieved, outcome):
            return None

    assert Nothing(calcjob=None).parse(None, {}) is None


LAZY_PACKAGES = ["veglia", "veglia.orm", "veglia.engine", "veglia.engine.calcjob", "veglia.views"]


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
