"""Which package may import which: the map in docs/development.md, kept honest.

Every import is checked, those inside functions too (a lazy import crosses a boundary as
surely as one at the top).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"core": "veglia", "monitors": "veglia.monitors", "plugins": "veglia.plugins"}

#: (importing package prefix, forbidden imported prefix, why)
RULES = [
    ("veglia", "veglia.plugins", "the core reaches plugins only through hooks and entry points"),
    ("veglia", "veglia.monitors", "monitors are plugins: entry points, not imports"),
    ("veglia.orm", "veglia.engine", "nodes are data; the engine uses them, not the reverse"),
    ("veglia.storage", "veglia.engine", "storage knows nothing of processes"),
    ("veglia.storage", "veglia.orm", "storage is below the ORM"),
    ("veglia.cli", "veglia.storage.models", "the CLI asks the ORM, not the tables"),
]
#: Modules that still cross a boundary, each to be moved behind the ORM (none since issue 13
#: moved the CLI's queries to veglia.orm.queries); the set may only shrink: a module that no
#: longer needs its entry fails the test until removed.
KNOWN: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    folder = path.relative_to(ROOT).parts[0]
    parts = path.relative_to(ROOT / folder).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGES[folder], *parts])


def imported(source: str, module: str) -> set[str]:
    """Every module ``source`` imports (``from veglia.storage import models`` counts as
    ``veglia.storage.models``)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = module.rsplit(".", node.level)[0]
                base = f"{package}.{base}" if base else package
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def crossings(module: str, source: str) -> set[tuple[str, str, str]]:
    found = set()
    for name in imported(source, module):
        for importer, forbidden, why in RULES:
            inside = module == importer or module.startswith(importer + ".")
            # The core package "veglia" contains the others by name: not a crossing.
            if importer == "veglia" and module.startswith(("veglia.plugins", "veglia.monitors")):
                inside = False
            if inside and (name == forbidden or name.startswith(forbidden + ".")):
                found.add((module, forbidden, why))
    return found


def _all_crossings() -> set[tuple[str, str, str]]:
    found = set()
    for folder in PACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            found |= crossings(module_name(path), path.read_text())
    return found


def test_no_import_crosses_a_boundary():
    found = _all_crossings()
    new = sorted((m, f, why) for m, f, why in found if (m, f) not in KNOWN)
    assert not new, "\n".join(f"{m} imports {f}: {why}" for m, f, why in new)
    stale = KNOWN - {(m, f) for m, f, _ in found}
    assert not stale, f"no longer crossing, remove from KNOWN: {sorted(stale)}"


def test_the_check_catches_a_forbidden_import_even_inside_a_function():
    source = "def f():\n    from veglia.plugins.tower import sender\n"
    assert crossings("veglia.engine.daemon", source) == {
        ("veglia.engine.daemon", "veglia.plugins", RULES[0][2])
    }
    assert crossings("veglia.orm.nodes", "import veglia.engine.calcjob\n")
    assert crossings("veglia.cli.cmd_new", "from veglia.storage import models\n")
    assert not crossings("veglia.plugins.tower.hooks", "from veglia.engine.calcjob import trace\n")


def _module_paths() -> dict[str, Path]:
    return {
        module_name(path): path for folder in PACKAGES for path in (ROOT / folder).rglob("*.py")
    }


def import_edges(
    source: str, module: str, modules: Collection[str], is_package: bool = False
) -> set[str]:
    """The modules of ``modules`` that ``source`` (the module ``module``) imports: at the top,
    inside functions and under ``TYPE_CHECKING`` alike (a circle a type checker or a lazy
    import walks is still a circle to a reader).

    ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
    ``pkg``. An import of ``veglia.x.y`` is an edge to ``veglia.x.y`` only, not to the
    packages Python runs on the way: a package's ``__init__`` is a node of its own, whose
    edges are its own imports (the submodules it re-exports from).
    """
    edges = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: in a package's __init__, level 1 is the package
                up = node.level - is_package
                package = module.rsplit(".", up)[0] if up else module
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    edges.add(f"{base}.{alias.name}")
                elif base in modules:
                    edges.add(base)
    return edges


def import_graph() -> dict[str, set[str]]:
    """Every module of ``veglia`` (core, plugins and monitors) -> the modules it imports."""
    paths = _module_paths()
    return {
        module: import_edges(path.read_text(), module, paths, path.name == "__init__.py")
        for module, path in paths.items()
    }


def _components(graph: Mapping[str, Collection[str]]) -> Iterator[list[str]]:
    """Strongly connected components (Tarjan's, without recursion: the graph is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(graph):  # sorted: the same circles, in the same order, every run
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    yield sorted(component)


def circles(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """The import circles of ``graph``, largest first: components of more than one module,
    and modules that import themselves."""
    found = [
        component
        for component in _components(graph)
        if len(component) > 1 or component[0] in graph.get(component[0], ())
    ]
    return sorted(found, key=lambda component: (-len(component), component))


def test_no_import_circle():
    """The modules stand on floors: each imports only modules below it, so any one can be
    read, tested and moved knowing only what is under it."""
    found = circles(import_graph())
    # None is allowed (the last three were untied for issue #34, item 8).
    assert not found, "import circles:\n" + "\n".join(
        f"{len(circle)}: {', '.join(circle)}" for circle in found
    )


def test_the_circle_finder_catches_a_made_up_circle():
    modules = {"veglia.a", "veglia.b", "veglia.c", "veglia.d", "veglia.pkg", "veglia.pkg.e"}
    sources = {
        "veglia.a": "from veglia.b import thing\n",
        # Under TYPE_CHECKING and inside a function count as much as at the top.
        "veglia.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import veglia.c\n",
        "veglia.c": "def f():\n    # Lazy: a cycle.\n    from veglia import a\n",
        "veglia.d": "from veglia.a import thing\nfrom veglia.d import other\n",
        "veglia.pkg": "from veglia.pkg.e import name\n",
        "veglia.pkg.e": "import os\n",
    }
    graph = {
        module: import_edges(source, module, modules, module == "veglia.pkg")
        for module, source in sources.items()
    }
    assert graph["veglia.c"] == {"veglia.a"}
    assert circles(graph) == [["veglia.a", "veglia.b", "veglia.c"], ["veglia.d"]]
    # A package that re-exports a submodule's names is not in a circle with it.
    assert graph["veglia.pkg"] == {"veglia.pkg.e"}
    assert circles({m: e for m, e in graph.items() if m != "veglia.c"}) == [["veglia.d"]]
    # Relative imports resolve as Python does, in a package's __init__ too.
    assert import_edges("from . import e\n", "veglia.pkg", modules, is_package=True) == {
        "veglia.pkg.e"
    }
    assert import_edges("from .. import a\n", "veglia.pkg.e", modules) == {"veglia.a"}


def _unexplained_lazy_imports(source: str) -> list[int]:
    """Lines of imports of veglia inside functions with no comment on them or just above."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            is_import = isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith(
                "veglia"
            )
            if not is_import:
                continue
            here, above = lines[inner.lineno - 1], lines[inner.lineno - 2].strip()
            # A block of lazy imports shares the comment above its first line.
            first = inner.lineno - 1
            while first > 0 and lines[first - 1].strip().startswith("from veglia"):
                first -= 1
            if (
                "#" not in here
                and not above.startswith("#")
                and not (first > 0 and lines[first - 1].strip().startswith("#"))
            ):
                found.append(inner.lineno)
    return sorted(set(found))


def test_imports_are_at_module_top_unless_a_comment_says_why():
    """A lazy import hides the dependency graph; one that a cycle or start-up time needs
    says so (``# Lazy: ...``)."""
    unexplained = []
    for folder in PACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for line in _unexplained_lazy_imports(path.read_text()):
                unexplained.append(f"{path.relative_to(ROOT)}:{line}")
    assert not unexplained, "import at the top, or say why not:\n" + "\n".join(unexplained)


def test_the_lazy_import_check_wants_a_reason():
    bare = "def f():\n    x = 1\n    from veglia.orm import Int\n"
    explained = (
        "def f():\n    # Lazy: a cycle.\n    from veglia.orm import Int\n"
        "    from veglia.orm import Str\n"
    )
    assert _unexplained_lazy_imports(bare) == [3]
    assert _unexplained_lazy_imports(explained) == []


#: What a built-in plugin or monitor may import of veglia besides its own package: the public
#: surface a third-party plugin has (issue #34), so the built-ins prove it is enough.
PLUGIN_SURFACE = "veglia.plugin_api"
#: Plugin or monitor modules that still import the core behind ``veglia.plugin_api``: none,
#: and none may be added (what a built-in needs is added to the plugin API instead).
PLUGIN_API_KNOWN: set[tuple[str, str]] = set()


def own_package(module: str) -> str:
    """The package a plugin or monitor module may import freely: ``veglia.plugins.web`` for
    ``veglia.plugins.web.pages``, the module itself for a one-module plugin
    (``veglia.plugins.email``), ``veglia.monitors`` for every monitor."""
    if module == "veglia.monitors" or module.startswith("veglia.monitors."):
        return "veglia.monitors"
    return ".".join(module.split(".")[:3])


def core_imports(module: str, source: str) -> set[tuple[str, str]]:
    """``(module, imported)`` for each import of veglia by a plugin or monitor module that
    is neither the plugin API nor its own package (``from veglia import orm`` counts)."""
    if not module.startswith(("veglia.plugins", "veglia.monitors")):
        return set()
    own = own_package(module)
    found = set()
    for name in imported(source, module):
        if name != "veglia" and not name.startswith("veglia."):
            continue
        if name == own or name.startswith(own + "."):
            continue
        if name == PLUGIN_SURFACE or name.startswith(PLUGIN_SURFACE + "."):
            continue
        found.add((module, name))
    return found


def test_plugins_and_monitors_import_only_the_plugin_api():
    """The built-ins use the public surface: ``veglia.plugins`` and ``veglia.monitors``
    import of veglia only ``veglia.plugin_api`` and their own package."""
    found = set()
    for folder in ("plugins", "monitors"):
        for path in (ROOT / folder).rglob("*.py"):
            found |= core_imports(module_name(path), path.read_text())
    new = sorted(found - PLUGIN_API_KNOWN)
    assert not new, "import it from veglia.plugin_api (add it there if missing):\n" + "\n".join(
        f"{module} imports {name}" for module, name in new
    )
    stale = {module for module, _ in PLUGIN_API_KNOWN} - {module for module, _ in found}
    assert not stale, f"no longer importing the core, remove from PLUGIN_API_KNOWN: {stale}"


def test_the_plugin_api_check_catches_a_core_import_even_inside_a_function():
    lazy = "def f():\n    # Lazy: start-up.\n    from veglia.orm.nodes import load_node\n"
    assert core_imports("veglia.plugins.web.actions", lazy) == {
        ("veglia.plugins.web.actions", "veglia.orm.nodes"),
        ("veglia.plugins.web.actions", "veglia.orm.nodes.load_node"),
    }
    assert ("veglia.monitors.gpu", "veglia.orm") in core_imports(
        "veglia.monitors.gpu", "from veglia import orm\n"
    )
    # Another plugin's package is not the plugin's own: share through the core instead.
    assert core_imports("veglia.monitors.gpu", "from veglia.plugins.fusion import x\n")
    assert core_imports("veglia.plugins.email", "from veglia.plugins.web import hooks\n")
    allowed = (
        "from veglia.plugin_api import hookimpl\n"
        "from veglia.plugins.web.pages import render\n"
        "from .probe import stamp\n"
    )
    assert core_imports("veglia.plugins.web.hooks", allowed) == set()
    assert core_imports("veglia.monitors.gpu", "from veglia.monitors.basic import k\n") == set()
    assert core_imports("veglia.engine.daemon", "from veglia.orm import Int\n") == set()
