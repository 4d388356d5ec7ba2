#!/usr/bin/env python3
"""Write docs/hooks.md from the docstrings in veglia.hookspecs (``--check``: only compare)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from veglia import hookspecs
from veglia.signatures import signature_text

TARGET = Path(__file__).resolve().parent.parent / "docs" / "hooks.md"

INTRO = """\
# Hook reference

Every hook a plugin can implement, generated from `core/hookspecs.py` by
`scripts/gen_hooks_doc.py` (the test suite fails when this page and the docstrings differ).

Implement a hook with the `hookimpl` marker, in a module registered under the
`veglia.plugins` entry-point group:

```python
from veglia.plugin_api import hookimpl

@hookimpl
def register_options():
    ...
```

```toml
[project.entry-points."veglia.plugins"]
my_plugin = "my_package.veglia_plugin"
```

An implementation may accept any subset of a hook's arguments, by name. Debug with
`VEGLIA_TRACE_PLUGINS=1` (every hook call on stderr) and `VEGLIA_PLUGINS=a,b` (load only
those plugins; empty loads none).

The types in the signatures are importable from `veglia.plugin_api`: what a plugin returns
(`Option`, `CalcJobOption`, `ComputerProperty`, `JobScriptWrap`, `Panel`,
`PluginMigrations`), `Transport`, and, for what the engine hands over, Protocols naming what a
plugin may rely on: `ProfileLike` (a `Profile`), `ProcessNodeLike` and `CalcJobNodeLike` (a
process's or a calc job's node), `ComputerLike` (a `Computer`). `TraceRecord` is
`veglia.engine.calcjob.trace.TraceRecord`; `Select` is SQLAlchemy's.
"""


def render() -> str:
    parts = [INTRO]
    for name in hookspecs.hook_names():
        function = getattr(hookspecs, name)
        parts.append(f"\n## `{name}{signature_text(function)}`\n\n{inspect.getdoc(function)}\n")
    return "".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run scripts/gen_hooks_doc.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
