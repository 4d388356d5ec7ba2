"""Discovery of plugins through entry points, and the factories that load them by name.

Every plugin kind has one entry-point group. Built-in plugins are registered in veglia's own
``pyproject.toml`` exactly as a third-party package registers its own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from importlib.metadata import EntryPoint, distributions, entry_points
from typing import Any

from veglia.exceptions import (
    EntryPointLoadError,
    InvalidPluginError,
    MissingEntryPointError,
    PluginError,
)

__all__ = [
    "GROUPS",
    "CalculationFactory",
    "DataFactory",
    "DataSourceFactory",
    "MonitorFactory",
    "ParserFactory",
    "SchedulerFactory",
    "TransportFactory",
    "WorkflowFactory",
    "clear_cache",
    "get_entry_point",
    "get_entry_points",
    "group_name",
    "load_entry_point",
    "loaded_version",
    "plugin_distributions",
]

#: Short name of each plugin kind -> its entry-point group.
GROUPS: dict[str, str] = {
    "calculations": "veglia.calculations",
    "workflows": "veglia.workflows",
    "parsers": "veglia.parsers",
    "schedulers": "veglia.schedulers",
    "transports": "veglia.transports",
    "monitors": "veglia.monitors",
    "data": "veglia.data",
    "datasources": "veglia.datasources",
    "plugins": "veglia.plugins",
}


def group_name(group: str) -> str:
    """Return the full entry-point group for a short (``monitors``) or full name."""
    if group in GROUPS:
        return GROUPS[group]
    if group in GROUPS.values():
        return group
    allowed = ", ".join(GROUPS)
    raise PluginError(f"Unknown plugin group {group!r}: use one of {allowed}.")


def get_entry_points(group: str) -> list[EntryPoint]:
    """All entry points of a group, sorted by name (read once; see :func:`clear_cache`)."""
    return list(_entry_points(group_name(group)))


@functools.cache
def _entry_points(group: str) -> tuple[EntryPoint, ...]:
    # Scanning every installed distribution takes milliseconds; the engine asks per job.
    return tuple(sorted(entry_points(group=group), key=lambda ep: ep.name))


def clear_cache() -> None:
    """Forget the entry points read so far (after installing a plugin in this process)."""
    _entry_points.cache_clear()
    _load_cached.cache_clear()


def plugin_distributions() -> dict[str, str]:
    """``{distribution name: version}`` of each installed package that provides a veglia
    entry point (veglia itself too), read now, not cached: a daemon worker keeps what it
    started with, and the CLI compares it with what is installed (an upgraded plugin)."""
    groups = set(GROUPS.values())
    found: dict[str, str] = {}
    for dist in distributions():
        if any(ep.group in groups for ep in dist.entry_points):
            # The first on sys.path is the one Python imports.
            found.setdefault(dist.metadata["Name"], dist.version)
    return found


def get_entry_point(group: str, name: str) -> EntryPoint:
    """The entry point called ``name`` in ``group``; errors list the installed names."""
    full = group_name(group)
    matches = [ep for ep in get_entry_points(full) if ep.name == name]
    if not matches:
        installed = ", ".join(ep.name for ep in get_entry_points(full)) or "none"
        raise MissingEntryPointError(
            f"No plugin {name!r} in group {full!r}. Installed: {installed}. "
            "Install the package that provides it, or check the spelling."
        )
    distinct = {ep.value for ep in matches}
    if len(distinct) > 1:
        raise PluginError(
            f"Plugin {name!r} in group {full!r} is registered more than once "
            f"({', '.join(sorted(distinct))}). Uninstall one of the packages."
        )
    return matches[0]


def load_entry_point(group: str, name: str) -> Any:
    """Import and return the object behind an entry point."""
    return _load_cached(group_name(group), name)


#: The version of the package each loaded plugin came from, read right after its import:
#: the code this process runs, which a later ``pip install`` of another version does not
#: change (it changes what the installed metadata says).
_LOADED_VERSIONS: dict[tuple[str, str], str | None] = {}


def loaded_version(group: str, name: str) -> str | None:
    """The version of the package whose code this process loaded for plugin ``name`` (None
    before it is loaded, or when its package has no version)."""
    return _LOADED_VERSIONS.get((group_name(group), name))


@functools.cache
def _load_cached(group: str, name: str) -> Any:
    entry_point = get_entry_point(group, name)
    try:
        loaded = entry_point.load()
    except Exception as exc:
        raise EntryPointLoadError(
            f"Plugin {name!r} in {group_name(group)!r} ({entry_point.value}) failed to import: "
            f"{type(exc).__name__}: {exc}. Reinstall or fix the package that provides it."
        ) from exc
    # The metadata of the distribution the entry point was listed from: one file read, no
    # scan of the installed packages. None when it is gone since (a package upgraded before
    # this first import): provenance then reads what is installed, which is what was imported.
    dist = entry_point.dist
    _LOADED_VERSIONS[(group, name)] = dist.version if dist is not None else None
    return loaded


def _factory(
    exported: str, group: str, check: Callable[[Any], bool], kind: str
) -> Callable[[str], Any]:
    """The loader exported as ``exported``; it is named so, as help(), reprs and tracebacks
    then show the name a user imported."""

    def factory(name: str) -> Any:
        plugin = load_entry_point(group, name)
        if not check(plugin):
            raise InvalidPluginError(
                f"Plugin {name!r} in {group_name(group)!r} is {plugin!r}, not {kind}."
            )
        return plugin

    factory.__name__ = factory.__qualname__ = exported
    factory.__doc__ = f"Load the {kind} registered as ``name`` in ``{group_name(group)}``."
    return factory


def _subclass_of(dotted: str) -> Callable[[Any], bool]:
    module_name, _, class_name = dotted.rpartition(".")

    def check(plugin: Any) -> bool:
        import importlib

        base = getattr(importlib.import_module(module_name), class_name)
        return inspect.isclass(plugin) and issubclass(plugin, base)

    return check


TransportFactory = _factory(
    "TransportFactory",
    "transports",
    _subclass_of("veglia.transports.Transport"),
    "a Transport subclass",
)
MonitorFactory = _factory("MonitorFactory", "monitors", callable, "a monitor function")
SchedulerFactory = _factory("SchedulerFactory", "schedulers", inspect.isclass, "a Scheduler class")
CalculationFactory = _factory(
    "CalculationFactory", "calculations", inspect.isclass, "a Calculation class"
)
WorkflowFactory = _factory(
    "WorkflowFactory",
    "workflows",
    _subclass_of("veglia.engine.workflow.workchain.WorkChain"),
    "a WorkChain subclass",
)
ParserFactory = _factory("ParserFactory", "parsers", inspect.isclass, "a Parser class")
DataFactory = _factory("DataFactory", "data", inspect.isclass, "a Data class")
DataSourceFactory = _factory(
    "DataSourceFactory",
    "datasources",
    _subclass_of("veglia.datasources.DataSource"),
    "a DataSource subclass",
)
