"""The pluggy plugin manager: hook implementations found through ``veglia.plugins``.

Two environment variables help people debug plugins:

``VEGLIA_PLUGINS``
    A comma-separated list of ``veglia.plugins`` entry-point names; only those load. Set it
    to an empty string to load none (handy to bisect a broken plugin).
``VEGLIA_TRACE_PLUGINS``
    When set to ``1``, every hook call is written to stderr with its arguments and result.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

import pluggy

from veglia import hookspecs
from veglia.entry_points import GROUPS, clear_cache, get_entry_points
from veglia.exceptions import EntryPointLoadError

__all__ = [
    "build_plugin_manager",
    "call_each",
    "get_plugin_manager",
    "has_implementations",
    "reset_plugin_manager",
    "results_of_each",
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


def reset_plugin_manager() -> None:
    """Forget the process-wide manager so the next call rebuilds it (after a pip install)."""
    global _manager
    _manager = None
    clear_cache()


def has_implementations(hook_name: str) -> bool:
    """Whether any loaded plugin implements the hook (to skip building its arguments)."""
    return bool(getattr(get_plugin_manager().hook, hook_name).get_hookimpls())


def call_each(hook_name: str, **kwargs: object) -> list[tuple[str, BaseException]]:
    """Call every implementation of a hook, each shielded from the others' exceptions.

    For hooks where one broken plugin must not keep the others (or the engine) from their
    work; returns (plugin name, exception) for those that raised.
    """
    return results_of_each(hook_name, **kwargs)[1]


def results_of_each(
    hook_name: str, **kwargs: object
) -> tuple[list[tuple[str, object]], list[tuple[str, BaseException]]]:
    """As :func:`call_each`, with what each implementation returned: (plugin name, result)
    for those that returned something other than None, then the errors."""
    results: list[tuple[str, object]] = []
    errors: list[tuple[str, BaseException]] = []
    for name, caller in _single_callers(get_plugin_manager(), hook_name):
        try:
            returned = caller(**kwargs)
        except Exception as exc:
            errors.append((name, exc))
            continue
        results += [(name, result) for result in returned]
    return results, errors


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
