"""The reST of a docstring, read by docutils and written as plain text for a terminal
(``veglia monitor show``, ``veglia plugin show``) or as Markdown for a docs page
(``scripts/gen_hooks_doc.py`` writes docs/hooks.md from the hookspecs).

While a docstring is read (only then) docutils knows what Sphinx adds: the roles of Python
objects (``:class:`~a.b.C```, ``:py:func:``...) and of code (``:file:``...), and the
directives of :data:`NOTES` and ``code-block``; an unknown role is its text, an unknown
directive its argument and content. ``:type x:`` and ``:rtype:`` fields repeat the
signature and are dropped. docutils is imported with the first docstring read.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import threading
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

__all__ = ["markdown_doc", "plain_doc"]

#: Roles of Python objects (``:py:class:`` too): code, naming a dotted target.
OBJECT_ROLES = {"class", "func", "meth", "attr", "data", "exc", "obj", "mod", "const", "type"}
#: Other roles whose text is code: a file, a command, an environment variable...
CODE_ROLES = {"file", "command", "program", "envvar", "option", "samp", "kbd"}
#: Sphinx's notes, by their titles (a version follows the last four's).
NOTES = {
    "seealso": "See also",
    "todo": "To do",
    "versionadded": "Added in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
#: A field's kind, by the names it is written with (``:arg x:`` is a ``param``).
FIELDS = {
    "param": "param parameter arg argument key keyword kwarg var ivar cvar",
    "raises": "raises raise except exception",
    "returns": "returns return",
    "yields": "yields yield",
    "type": "type vartype rtype ytype",
}
_LOCK = threading.Lock()  # docutils knows Sphinx's directives while one docstring is read


@cache
def _reader() -> Callable[[str], Any]:
    """docutils, set up to read a docstring: a function from its text to its doctree."""
    from docutils import frontend, nodes
    from docutils.core import publish_doctree
    from docutils.parsers import rst
    from docutils.parsers.rst import Directive, directives, roles, states
    from docutils.readers import standalone
    from docutils.statemachine import StringList

    inliner = states.Inliner()  # (a subclass's patterns would not be compiled)
    docutils_role = inliner.interpreted

    def interpreted(rawsource: str, text: str, role: str, lineno: int) -> Any:
        name = role.lower().rsplit(":", 1)[-1]
        known = name in OBJECT_ROLES | CODE_ROLES
        if not known and roles.role(role, inliner.language, lineno, inliner.reporter)[0]:
            return docutils_role(rawsource, text, role, lineno)
        titled = re.fullmatch(r"([\s\S]*?)\s*<([^<>]+)>", text.strip())
        shown, target = titled.groups() if titled else (text.strip().lstrip("!"),) * 2
        if target.startswith("~") and not titled:
            target = target[1:]
            shown = target.rsplit(".", 1)[-1]
        node = nodes.literal if known else nodes.inline  # :ref:, :doc:...: text
        attributes = {"role": name, "target": target, "titled": bool(titled)}
        return [node(rawsource, shown, **({} if name in CODE_ROLES else attributes))], []

    inliner.interpreted = interpreted

    class Options(dict[str, Any]):  # any option (Sphinx's :linenos:, :caption:...): ignored
        def __missing__(self, key: str) -> Any:
            return directives.unchanged

    class Block(Directive):  # type: ignore[misc]
        """Code (``title`` None), a note under its title, else the argument and content."""

        optional_arguments = 1
        has_content = final_argument_whitespace = True
        option_spec = Options(name=directives.unchanged)
        title: str | None = ""

        def run(self) -> list[Any]:
            if self.title is None:
                text = "\n".join(self.content)
                return [nodes.literal_block(text, text, classes=["code", *self.arguments])]
            argument, title = "".join(self.arguments), self.title
            if title.endswith("version"):
                version, *rest = argument.split(None, 1)
                argument, title = "".join(rest), f"{title} {version}"
            node = nodes.admonition("", nodes.title(title, title)) if title else nodes.Element()
            lines = [*argument.splitlines(), "", *self.content]
            self.state.nested_parse(StringList(lines), self.content_offset, node)
            return [node] if title else list(node.children)

    local = {name: type(name, (Block,), {"title": title}) for name, title in NOTES.items()}
    code = type("code", (Block,), {"title": None})
    local |= dict.fromkeys(("code-block", "sourcecode", "code"), code)
    docutils_directive = directives.directive

    def directive(name: str, *args: Any) -> tuple[Any, list[Any]]:
        if name.lower() in local:
            return local[name.lower()], []
        found, messages = docutils_directive(name, *args)
        return found or Block, messages

    parser = rst.Parser(inliner=inliner)
    settings = frontend.get_default_settings(rst.Parser, standalone.Reader)
    settings.report_level = settings.halt_level = 5  # nothing printed, nothing raised
    for name in ("file_insertion_enabled", "raw_enabled", "doctitle_xform", "docinfo_xform"):
        setattr(settings, name, False)  # (a first title or field list stays in the text)

    def read(doc: str) -> Any:
        with _LOCK:
            directives.directive = directive
            try:
                return publish_doctree(doc, parser=parser, settings=settings)
            finally:
                directives.directive = docutils_directive

    return read


def _hanging(first: str, body: str, width: int) -> str:
    """``body`` after ``first``, its further lines indented by ``width``."""
    lines = body.split("\n")
    rest = [f"{' ' * width}{line}" if line.strip() else "" for line in lines[1:]]
    return "\n".join([f"{first}{lines[0]}".rstrip(), *rest])


class _Plain:
    """Writes a doctree as plain text: a node by the method ``visit_<its tag>``, else as
    its children (inline in a paragraph-like node, else blocks a blank line apart)."""

    apart = "\n"  # the items of a definition list, and each term from its definition

    def write(self, node: Any) -> str:
        from docutils import nodes

        if isinstance(node, nodes.Text):
            return self.text(node.astext())
        if isinstance(node, nodes.Admonition):  # titled by its first child, or its kind
            generic = node.tagname == "admonition"
            title = node[0].astext() if generic else node.tagname.capitalize()
            return self.note(title, self.blocks(node[generic:]))
        if visit := getattr(self, f"visit_{node.tagname}", None):
            return str(visit(node))
        return self.inline(node) if isinstance(node, nodes.TextElement) else self.blocks(node)

    def blocks(self, children: Any, between: str = "\n\n") -> str:
        return between.join(text for child in children if (text := self.write(child)))

    def inline(self, node: Any) -> str:
        return "".join(self.write(child) for child in node.children)

    def text(self, text: str) -> str:
        return text

    def note(self, title: str, body: str) -> str:
        return f"{title}: {body}" if body else f"{title}."

    def visit_comment(self, node: Any) -> str:
        return ""

    def visit_title_reference(self, node: Any) -> str:
        # `name`: reST's default role, which docstrings use for code; kept as written.
        return f"`{self.inline(node)}`"

    visit_target = visit_substitution_definition = visit_system_message = visit_comment

    def visit_bullet_list(self, node: Any) -> str:  # its items a line apart
        return self.blocks(node, "\n")

    visit_enumerated_list = visit_field_list = visit_bullet_list

    def visit_list_item(self, node: Any) -> str:
        marker = self.marker(node.parent, node.parent.index(node))
        return _hanging(f"{marker} ", self.blocks(node), len(marker) + 1)

    def marker(self, parent: Any, index: int) -> str:
        if parent.tagname == "bullet_list":
            return str(parent["bullet"])
        number = index + parent.get("start", 1)
        alpha = parent["enumtype"].endswith("alpha")
        return f"{parent['prefix']}{chr(96 + number) if alpha else number}{parent['suffix']}"

    def visit_field(self, node: Any) -> str:
        name, *words = node[0].astext().split()
        kind = next((kind for kind, names in FIELDS.items() if name in names.split()), "")
        subject = words[-1] if words and kind in ("param", "raises") else ""
        return "" if kind == "type" else self.field(kind or node[0].astext(), subject, node[1])

    def field(self, kind: str, subject: str, body: Any) -> str:
        name = {"param": subject, "raises": f"raises {subject}"}.get(kind, kind)
        return _hanging(f"{name}: ", self.blocks(body), 4)

    def visit_definition_list(self, node: Any) -> str:  # a term, its classifiers after
        return self.apart.join(
            " : ".join(map(self.inline, item[:-1])) + self.apart + self.visit_block_quote(item[-1])
            for item in node
        )

    def visit_block_quote(self, node: Any) -> str:
        return textwrap.indent(self.blocks(node), "    ")

    def visit_literal_block(self, node: Any) -> str:
        return textwrap.indent(node.astext(), "    ")

    def visit_reference(self, node: Any) -> str:
        text, url = self.inline(node), node.get("refuri")
        return f"{text} ({url})" if url and url not in (text, f"mailto:{text}") else text

    def visit_section(self, node: Any) -> str:
        return "\n\n".join(
            filter(None, [self.heading(self.inline(node[0])), self.blocks(node[1:])])
        )

    def heading(self, title: str) -> str:
        return f"{title}\n{'-' * len(title)}"


class _Markdown(_Plain):
    apart = "\n\n"

    def __init__(self, links: Mapping[str, str]) -> None:
        self.links = links

    @staticmethod
    def code(text: str) -> str:
        # A line break inside stays: Markdown reads it as a space, as reST does.
        ticks = "`"
        while ticks in text:
            ticks += "`"
        padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
        return f"{ticks}{padded}{ticks}"

    def text(self, text: str) -> str:
        # What Markdown would read as markup: emphasis at a word's edge, code, links, HTML.
        text = re.sub(r"([\\`\[\]])", r"\\\1", text)
        text = re.sub(r"(?<!\w)([*_])|([*_])(?!\w)", lambda m: "\\" + (m[1] or m[2]), text)
        return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)

    def note(self, title: str, body: str) -> str:
        return self.quoted(f"**{title}:** {body}" if body else f"**{title}.**")

    def field(self, kind: str, subject: str, body: Any) -> str:
        name = {"param": self.code(subject), "raises": f"raises {self.code(subject)}"}
        return _hanging(f"- {name.get(kind, kind)}: ", self.blocks(body), 2)

    def marker(self, parent: Any, index: int) -> str:
        return "-" if parent.tagname == "bullet_list" else super().marker(parent, index)

    def visit_literal(self, node: Any) -> str:  # ``code``, or a role's (with its target)
        shown = node.astext()
        if "target" not in node:
            return self.code(shown)
        if not node["titled"] and node["role"] != "mod":  # the name (a method's class too)
            shown = ".".join(shown.split(".")[-2 if node["role"] in ("meth", "attr") else -1 :])
        url = self.links.get(node["target"])
        return f"[{self.code(shown)}]({url})" if url else self.code(shown)

    visit_title_reference = visit_literal

    def visit_emphasis(self, node: Any) -> str:
        return f"*{self.inline(node)}*"

    def visit_strong(self, node: Any) -> str:
        return f"**{self.inline(node)}**"

    def visit_reference(self, node: Any) -> str:
        text, url = self.inline(node), node.get("refuri")
        if not url or url == f"mailto:{node.astext()}":
            return text
        return f"<{url}>" if node.astext() == url else f"[{text}]({url})"

    def visit_literal_block(self, node: Any) -> str:
        fence, text, classes = "```", node.astext(), node["classes"]
        while fence in text:
            fence += "`"
        language = "".join(classes[1:2]) if classes[:1] == ["code"] else ""
        language = "pycon" if node.tagname == "doctest_block" else language or "text"
        return f"{fence}{language}\n{text}\n{fence}"

    visit_doctest_block = visit_literal_block

    def visit_block_quote(self, node: Any) -> str:
        return self.quoted(self.blocks(node))

    @staticmethod
    def quoted(text: str) -> str:
        return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))

    def heading(self, title: str) -> str:
        return f"**{title}**"


def plain_doc(doc: str) -> str:
    """A docstring as plain text: ``:param x: what`` is ``x: what``, ``:class:`~a.C```
    ``C``, ````code```` ``code``, ```text <url>`_`` ``text (url)``, a note ``Note: ...``;
    literal blocks stay indented, lists as written."""
    return _Plain().blocks(_reader()(inspect.cleandoc(doc)))


def markdown_doc(doc: str, links: Mapping[str, str] | None = None) -> str:
    """A docstring as Markdown: ````code```` and roles are code spans (``:class:`a.b.C```
    is `C`, a link when ``links`` has a URL for ``a.b.C``), a note a blockquote
    ``**Note:** ...``, links Markdown links, literal blocks fenced."""
    return _Markdown(links or {}).blocks(_reader()(inspect.cleandoc(doc)))
