#!/usr/bin/env python3
"""Write docs/hooks.md from the docstrings in veglia.hookspecs (``--check``: only compare).

The docstrings are reST; the page is Markdown: :func:`veglia.docstrings.markdown_doc`
turns one into the other, linking the names of :data:`LINKS` to the page that documents
them (a link to a page or heading that is not there fails the script).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

from veglia import hookspecs
from veglia.docstrings import markdown_doc
from veglia.signatures import signature_text

DOCS = Path(__file__).resolve().parent.parent / "docs"
TARGET = DOCS / "hooks.md"

#: What a role in a hook's docstring names -> the page (and heading) of docs/ that
#: documents it; other names are shown as code.
LINKS = {
    "veglia.plugin_api.Option": "plugins.md#writing-a-plugin-package",
    "veglia.plugin_api.CalcJobOption": "plugins.md#writing-a-plugin-package",
    "veglia.plugin_api.ComputerProperty": "plugins.md#writing-a-plugin-package",
    "veglia.plugin_api.Panel": "plugins.md#writing-a-plugin-package",
    "veglia.plugin_api.PluginMigrations": "plugins.md#tables-of-your-own",
    "veglia.load_profile": "getting-started.md#using-it-from-python",
}

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


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def missing_links() -> list[str]:
    """The :data:`LINKS` whose page or heading is not in docs/."""
    missing = []
    for url in LINKS.values():
        page, _, heading = url.partition("#")
        path = DOCS / page
        headings = re.findall(r"(?m)^#+ (.+)$", path.read_text()) if path.exists() else []
        if not path.exists() or (heading and heading not in map(anchor, headings)):
            missing.append(url)
    return missing


def render() -> str:
    parts = [INTRO]
    for name in hookspecs.hook_names():
        function = getattr(hookspecs, name)
        doc = markdown_doc(inspect.getdoc(function) or "", LINKS)
        parts.append(f"\n## `{name}{signature_text(function)}`\n\n{doc}\n")
    return "".join(parts)


def main() -> int:
    if missing := missing_links():
        print(f"links to what docs/ does not have: {', '.join(missing)}", file=sys.stderr)
        return 1
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
