"""The pluggy plugin manager: hook implementations found through ``veglia.plugins``.

Two environment variables help people debug plugins:

``VEGLIA_PLUGINS``
    A comma-separated list of ``veglia.plugins`` entry-point names; only those load. Set it
    to an empty string to load none (handy to bisect a broken plugin).
``VEGLIA_TRACE_PLUGINS``
    When set to ``1``, every hook call is written to stderr with its arguments and result.

The engine asks plugins for what they contribute (options, computer properties, job-script
wraps, trace fields, panels, ...) through :func:`gather` and its stricter forms, and tells
them of events through :func:`call_each`: both call one plugin at a time through pluggy, so
that tracing sees each call and one broken plugin does not silence the others.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

import pluggy

from veglia import hookspecs
from veglia.entry_points import GROUPS, clear_cache, get_entry_points
from veglia.exceptions import ConfigurationError, EntryPointLoadError, PluginError, VegliaError

__all__ = [
    "build_plugin_manager",
    "call_each",
    "gather",
    "gather_named",
    "gather_strict",
    "get_plugin_manager",
    "has_implementations",
    "load_states",
    "reset_plugin_manager",
]

_manager: pluggy.PluginManager | None = None


def _wanted_names() -> set[str] | None:
    value = os.environ.get("VEGLIA_PLUGINS")
    if value is None:
        return None
    return {name.strip() for name in value.split(",") if name.strip()}


def build_plugin_manager(only: Iterable[str] | None = None) -> pluggy.PluginManager:
    """Build a plugin manager with every ``veglia.plugins`` entry point registered.

    ``only`` (or ``VEGLIA_PLUGINS``) restricts loading to the named entry points.
    """
    manager = pluggy.PluginManager("veglia")
    manager.add_hookspecs(hookspecs)
    wanted = set(only) if only is not None else _wanted_names()
    for entry_point in get_entry_points(GROUPS["plugins"]):
        if wanted is not None and entry_point.name not in wanted:
            continue
        try:
            plugin = entry_point.load()
        except Exception as exc:
            raise EntryPointLoadError(
                f"Plugin {entry_point.name!r} ({entry_point.value}) failed to import: "
                f"{type(exc).__name__}: {exc}. Fix or uninstall it, or leave it out with "
                "VEGLIA_PLUGINS=<names to load>."
            ) from exc
        manager.register(plugin, name=entry_point.name)
    manager.check_pending()
    if os.environ.get("VEGLIA_TRACE_PLUGINS") == "1":
        manager.trace.root.setwriter(sys.stderr.write)
        manager.enable_tracing()
    return manager


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, built on first use."""
    global _manager
    if _manager is None:
        _manager = build_plugin_manager()
    return _manager


def load_states() -> dict[str, str]:
    """Whether each ``veglia.plugins`` entry point is registered with the plugin manager:
    ``{name: "registered"}``, or in one line why not (left out by ``VEGLIA_PLUGINS``, failed
    to import and why, or not registered because another failed: then none is)."""
    problem = ""
    try:
        manager: pluggy.PluginManager | None = get_plugin_manager()
    except Exception as exc:  # an import, or pluggy refusing a hook implementation
        manager, problem = None, " ".join(str(exc).split())
    wanted = _wanted_names()
    states: dict[str, str] = {}
    failed = ""
    for entry_point in get_entry_points(GROUPS["plugins"]):
        if wanted is not None and entry_point.name not in wanted:
            states[entry_point.name] = "not loaded: VEGLIA_PLUGINS leaves it out"
        elif manager is not None and manager.get_plugin(entry_point.name) is not None:
            states[entry_point.name] = "registered"
        else:
            try:
                entry_point.load()
            except Exception as exc:
                why = " ".join(f"{type(exc).__name__}: {exc}".split())
                states[entry_point.name] = f"failed to import: {why}"
                failed = failed or entry_point.name
            else:
                states[entry_point.name] = ""
    for name, state in states.items():
        if not state and failed:
            states[name] = f"not registered: plugin {failed!r} failed to import, so none is"
        elif not state:
            states[name] = f"not registered: {problem}"
    return states


def reset_plugin_manager() -> None:
    """Forget the process-wide manager so the next call rebuilds it (after a pip install)."""
    global _manager
    _manager = None
    clear_cache()


def has_implementations(hook_name: str) -> bool:
    """Whether any loaded plugin implements the hook (to skip building its arguments)."""
    return bool(getattr(get_plugin_manager().hook, hook_name).get_hookimpls())


def call_each(hook_name: str, **kwargs: Any) -> list[tuple[str, BaseException]]:
    """Call every implementation of a hook, each shielded from the others' exceptions.

    For hooks where one broken plugin must not keep the others (or the engine) from their
    work; returns (plugin name, exception) for those that raised.
    """
    return gather(hook_name, **kwargs)[1]


def gather(
    hook_name: str, /, *, first_registered_first: bool = False, **kwargs: object
) -> tuple[list[tuple[str, Any]], list[tuple[str, BaseException]]]:
    """What every plugin contributes to a hook: (plugin name, contribution), then (plugin
    name, exception) for those that raised; a plugin that raises costs only its own part.

    The one way veglia asks plugins for anything: each implementation is called through
    pluggy (a caller that leaves the others out), so ``VEGLIA_TRACE_PLUGINS`` and pluggy's
    hook-call monitoring see every call. Contributions come in pluggy's order (the last
    registered first, ``tryfirst`` ones before), or the entry points' order with
    ``first_registered_first``; a hook declared to return a list has its lists flattened
    into one contribution each, and None (nothing) is left out.
    """
    callers = _single_callers(get_plugin_manager(), hook_name)
    if first_registered_first:
        callers = callers[::-1]
    flatten = _returns_list(hook_name)
    contributions: list[tuple[str, Any]] = []
    errors: list[tuple[str, BaseException]] = []
    for name, caller in callers:
        try:
            # A list of one result, or none: pluggy leaves out None.
            returned = caller(**kwargs)
        except Exception as exc:
            errors.append((name, exc))
            continue
        for result in returned:
            if not flatten:
                contributions.append((name, result))
            elif isinstance(result, str | bytes) or not isinstance(result, Iterable):
                # The plugin's mistake, costing its part as an exception would.
                message = f"{hook_name} must return a list, not {type(result).__name__}"
                errors.append((name, PluginError(message)))
            else:
                contributions += [(name, item) for item in result]
    return contributions, errors


def gather_strict(
    hook_name: str,
    /,
    *,
    error: type[VegliaError] = PluginError,
    first_registered_first: bool = False,
    **kwargs: object,
) -> list[tuple[str, Any]]:
    """As :func:`gather`, for hooks whose every contribution is needed (a catalogue, a job
    script): the first plugin that raised is raised as ``error``, naming it."""
    contributions, errors = gather(
        hook_name, first_registered_first=first_registered_first, **kwargs
    )
    if errors:
        plugin, exc = errors[0]
        raise error(f"Plugin {plugin!r} failed in {hook_name}: {exc}") from exc
    return contributions


def gather_named(
    hook_name: str,
    kind: type[Any],
    what: str,
    builtin: Iterable[str] = (),
    *,
    first_registered_first: bool = True,
) -> list[tuple[str, Any]]:
    """As :func:`gather_strict`, for catalogue hooks (options, properties): each
    contribution must be a ``kind`` with a ``name`` no built-in (``builtin``) nor other
    plugin has; otherwise a :class:`ConfigurationError` names the plugins (what is
    ``what``, the one seen first keeps the name). In the entry points' order unless
    ``first_registered_first`` is False."""
    origin = dict.fromkeys(builtin, "veglia")
    contributions = gather_strict(
        hook_name, error=ConfigurationError, first_registered_first=first_registered_first
    )
    for plugin, item in contributions:
        if not isinstance(item, kind):
            raise ConfigurationError(
                f"Plugin {plugin!r} returned {item!r} from {hook_name}; it must return "
                f"{kind.__module__}.{kind.__qualname__} objects."
            )
        if item.name in origin:
            raise ConfigurationError(
                f"{what} {item.name!r} of plugin {plugin!r} clashes with the one of "
                f"{origin[item.name]!r}; one of them must rename it."
            )
        origin[item.name] = plugin
    return contributions


def _returns_list(hook_name: str) -> bool:
    # The hookspec's return annotation (a string: hookspecs postpones annotations) says
    # whether a plugin hands in several contributions at once; declared once, there.
    return str(getattr(hookspecs, hook_name).__annotations__.get("return")).startswith("list[")


#: hook name -> (the manager and implementations they were built for, the callers)
_callers: dict[str, tuple[tuple[object, ...], list[tuple[str, Any]]]] = {}


def _single_callers(manager: pluggy.PluginManager, hook_name: str) -> list[tuple[str, Any]]:
    """One caller per implementation, each through pluggy (a caller that leaves out the
    others, so tracing sees every call), in pluggy's order (the last registered first).
    Built once per hook and set of plugins: a job calls several such hooks."""
    impls = getattr(manager.hook, hook_name).get_hookimpls()
    key = (manager, *impls)
    cached = _callers.get(hook_name)
    if cached is not None and cached[0] == key:
        return cached[1]
    callers = []
    for impl in reversed(impls):
        others = [other.plugin for other in impls if other is not impl]
        callers.append(
            (impl.plugin_name, manager.subset_hook_caller(hook_name, remove_plugins=others))
        )
    _callers[hook_name] = (key, callers)
    return callers
