"""Each node attribute the engine writes is named once, in ``veglia.orm.attributes``.

The core reads and writes them through that module's names (or the node's properties); a
bare ``"job_id"`` handed to ``get_attribute``, ``set_attribute(s)``, ``delete_attribute``,
or used to index or ``.get`` from an ``attributes`` mapping, fails this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

from veglia.orm.attributes import ALL_KEYS

CORE = Path(__file__).resolve().parent.parent / "core"
DEFINED_IN = CORE / "orm" / "attributes.py"
#: Modules still using bare keys, to be switched to the names (issue 13); the set may only
#: shrink: a module that no longer uses a bare key fails the test until removed.
NOT_YET: set[str] = set()
_METHODS = {"get_attribute", "set_attribute", "delete_attribute"}
_MAPPINGS = {"attributes", "_attributes", "attrs"}


def _is_mapping(node: ast.expr) -> bool:
    """``attributes``, ``row.attributes``, ``Node.attributes``, ``attrs``, ..."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    return name in _MAPPINGS


def _key(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and node.value in ALL_KEYS:
        return node.value
    return None


def bare_keys(source: str) -> list[tuple[int, str]]:
    """(line, key) of every attribute key written as a string literal where a node's
    attributes are read, written or queried."""
    found = []
    for node in ast.walk(ast.parse(source)):
        candidates: list[ast.expr | None] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, args = node.func.attr, node.args
            if method in _METHODS and args:
                candidates.append(args[0])
            elif method == "set_attributes" and args and isinstance(args[0], ast.Dict):
                candidates.extend(args[0].keys)
            elif method == "get" and args and _is_mapping(node.func.value):
                candidates.append(args[0])
        elif isinstance(node, ast.Subscript) and _is_mapping(node.value):
            candidates.append(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_mapping(c) for c in node.comparators):
            candidates.append(node.left)  # "job_id" in attributes
        found += [(node.lineno, key) for key in map(_key, candidates) if key]
    return found


def test_no_bare_attribute_key_in_the_core():
    found: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(CORE.rglob("*.py")):
        if path == DEFINED_IN:
            continue
        keys = bare_keys(path.read_text())
        if keys:
            found[path.relative_to(CORE).as_posix()] = keys
    new = [
        f"core/{path}:{line}: {key!r}"
        for path, keys in found.items()
        if path not in NOT_YET
        for line, key in sorted(keys)
    ]
    assert not new, "use the names in veglia.orm.attributes (or the node's properties):\n" + (
        "\n".join(new)
    )
    stale = NOT_YET - set(found)
    assert not stale, f"no bare keys left, remove from NOT_YET: {sorted(stale)}"


def test_the_check_finds_bare_keys_where_attributes_are_used():
    source = """
node.get_attribute("job_id")
node.set_attribute("blocked", {})
node.delete_attribute("unreachable")
node.set_attributes({"paused": True, "paused_reason": ""})
sa.select(Node.attributes["daemon"])
row.attributes.get("scheduler_state")
attrs["waiting_for"]
"usage" in attributes
"""
    assert sorted(bare_keys(source)) == [
        (2, "job_id"),
        (3, "blocked"),
        (4, "unreachable"),
        (5, "paused"),
        (5, "paused_reason"),
        (6, "daemon"),
        (7, "scheduler_state"),
        (8, "waiting_for"),
        (9, "usage"),
    ]
    # The same words elsewhere are not attribute keys.
    assert not bare_keys('click.group("daemon")\noptions.get("code")\nnode.get_attribute(JOB_ID)')


def test_every_name_is_a_distinct_key():
    from veglia.orm import attributes

    names = {n: v for n, v in vars(attributes).items() if n.isupper() and isinstance(v, str)}
    assert len(set(names.values())) == len(names) == len(ALL_KEYS)
