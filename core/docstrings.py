"""The reST of a docstring, read once and written two ways: as plain text for a terminal
(``veglia monitor show``, ``veglia plugin show``) and as Markdown for a docs page
(``scripts/gen_hooks_doc.py`` writes docs/hooks.md from the hookspecs).

What docstrings commonly hold is read: paragraphs with inline markup (````code````, roles
such as ``:class:`~a.b.C```, ``*emphasis*``, ``**strong**``, ```text <url>`_`` links and
```name`_`` references to a ``.. _name: url`` target); field lists (``:param x:``,
``:returns:``, ``:raises E:``; ``:type x:`` and ``:rtype:`` repeat the signature and are
dropped); bullet and numbered lists; ``::`` literal blocks, ``.. code-block::`` and doctest
(``>>>``) blocks; admonitions (``.. note::``, ``.. warning::``, ...);
``.. versionadded::``, ``.. versionchanged::``, ``.. deprecated::``; section titles and
block quotes. Comments and link targets are dropped; any other directive leaves its
argument and content as paragraphs.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["markdown_doc", "plain_doc"]

# -- reading -------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r"^\.\.\s+([\w:.-]+)::(?:\s+(.*))?$")
_TARGET = re.compile(r"^\.\.\s+_(`[^`]+`|[^:`]+):\s*(\S*)\s*$")
_COMMENT = re.compile(r"^\.\.(?:\s|$)")
#: ``- item``, ``* item``, ``1. item``, ``#. item``, ``(a) item``
_BULLET = re.compile(r"^([-*+•]|\d+[.)]|[a-zA-Z#][.)]|\(\w+\))\s+(?=\S)")
#: ``:param x: ...``: a name, then whitespace or the line's end (``:class:`X``` is a role).
_FIELD = re.compile(r"^:([^:\s`][^:`]*):(?:\s+|$)")
_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.<>_])\1{2,}\s*$")
#: Directive options (``:linenos:``) open a directive's content.
_OPTION = re.compile(r"^:[\w-]+:(?:\s.*)?$")

ADMONITIONS = {
    "note": "Note",
    "warning": "Warning",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
    "todo": "To do",
}
VERSIONS = {
    "versionadded": "Added in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
CODE_DIRECTIVES = {"code-block", "code", "sourcecode"}


@dataclass
class Block:
    """A block of a docstring: ``kind`` is paragraph, literal (with ``label`` its language,
    empty for a ``::`` block), doctest, heading, note (an admonition or a version note,
    ``label`` its title), item (``label`` its bullet), field (``label`` its name) or quote
    (``indent`` its depth); ``text`` holds the text of the first five, ``children`` the
    blocks inside the others."""

    kind: str
    text: str = ""
    label: str = ""
    indent: int = 0
    children: list[Block] = field(default_factory=list)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _dedent(lines: list[str], strip: bool = True) -> list[str]:
    """``lines`` without their common indentation (nor, with ``strip``, blank lines around)."""
    text = textwrap.dedent("\n".join(lines))
    text = text.strip("\n") if strip else text.rstrip("\n")
    return text.split("\n") if text else []


def _indented(lines: list[str], start: int, deeper_than: int = 0) -> int:
    """Where the lines indented past ``deeper_than`` from ``start`` end (blank lines
    between them belong to them; trailing ones do not)."""
    end = index = start
    while index < len(lines):
        line = lines[index]
        if line.strip():
            if _indent(line) <= deeper_than:
                break
            end = index + 1
        index += 1
    return end


def _starts_block(line: str) -> bool:
    return bool(_FIELD.match(line) or _DIRECTIVE.match(line) or _BULLET.match(line))


def read(doc: str) -> tuple[list[Block], dict[str, str]]:
    """A docstring's blocks, and the URL of each ``.. _name: url`` target, by name."""
    targets: dict[str, str] = {}
    return _blocks(inspect.cleandoc(doc).split("\n"), targets), targets


def _blocks(lines: list[str], targets: dict[str, str]) -> list[Block]:
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        if _indent(line):  # a block quote (or a definition under the paragraph above)
            end = _indented(lines, index)
            children = _blocks(_dedent(lines[index:end]), targets)
            blocks.append(Block("quote", indent=_indent(line), children=children))
            index = end
        elif target := _TARGET.match(line):
            targets[target[1].strip("`").lower()] = target[2]
            index = _indented(lines, index + 1)
        elif directive := _DIRECTIVE.match(line):
            end = _indented(lines, index + 1)
            blocks.extend(
                _directive(
                    directive[1].lower(), directive[2] or "", lines[index + 1 : end], targets
                )
            )
            index = end
        elif _COMMENT.match(line):
            index = _indented(lines, index + 1)
        elif (bullet := _BULLET.match(line)) or (known := _FIELD.match(line)):
            match = bullet or known
            assert match is not None
            end = index + 1
            while end < len(lines) and lines[end].strip() and not _indent(lines[end]):
                if _starts_block(lines[end]):
                    break
                end += 1  # a line not indented under its item: its continuation still
            end = max(end, _indented(lines, end))
            body = [line[match.end() :], *_dedent(lines[index + 1 : end], strip=False)]
            kind, label = ("item", match[1]) if bullet else ("field", match[1].strip())
            blocks.append(Block(kind, label=label, children=_blocks(body, targets)))
            index = end
        elif line.startswith(">>>"):
            end = index
            while end < len(lines) and lines[end].strip():
                end += 1
            blocks.append(Block("doctest", text="\n".join(lines[index:end])))
            index = end
        elif (
            index + 1 < len(lines)
            and _UNDERLINE.match(lines[index + 1])
            and len(lines[index + 1].strip()) >= len(line.strip())
        ):
            blocks.append(Block("heading", text=line.strip(), label=lines[index + 1][0]))
            index += 2
        else:
            end = index + 1
            while end < len(lines) and lines[end].strip() and not _indent(lines[end]):
                if _starts_block(lines[end]):
                    break
                end += 1
            text = "\n".join(lines[index:end])
            blocks.append(Block("paragraph", text=text))
            index = end
            if text.endswith("::"):
                start = index
                while start < len(lines) and not lines[start].strip():
                    start += 1
                if start < len(lines) and _indent(lines[start]):
                    end = _indented(lines, start)
                    blocks.append(Block("literal", text="\n".join(_dedent(lines[start:end]))))
                    index = end
    return blocks


def _directive(name: str, argument: str, body: list[str], targets: dict[str, str]) -> list[Block]:
    content = _dedent(body)
    if name in CODE_DIRECTIVES:
        while content and (_OPTION.match(content[0]) or not content[0].strip()):
            content.pop(0)
        return [Block("literal", text="\n".join(content), label=argument.strip())]
    if name in ADMONITIONS:
        return [
            Block("note", label=ADMONITIONS[name], children=_blocks([argument, *content], targets))
        ]
    if name == "admonition":
        return [Block("note", label=argument.strip(), children=_blocks(content, targets))]
    if name in VERSIONS:
        version, _, rest = argument.strip().partition(" ")
        children = _blocks([rest.strip(), *content], targets)
        return [Block("note", label=f"{VERSIONS[name]} {version}".strip(), children=children)]
    return _blocks([argument, "", *content], targets)


# -- inline markup -------------------------------------------------------------------------

_INLINE = re.compile(
    r"(?P<literal>``(?P<code>\S|\S[\s\S]*?\S)``)"
    r"|:(?P<role>[A-Za-z][\w+.-]*(?::[A-Za-z][\w+.-]*)?):`(?P<content>[^`]+)`"
    r"|`(?P<text>[^`<]*?)\s*<(?P<url>[^<>`\s]+)>`__?"
    r"|`(?P<reference>[^`]+)`__?(?!\w)"
    r"|(?<![\w*\\])\*\*(?P<strong>\S|\S[\s\S]*?\S)\*\*(?![\w*])"
    r"|(?<![\w*\\])\*(?P<emphasis>[^\s*]|[^\s*][\s\S]*?[^\s\\*])\*(?![\w*])"
    r"|`(?P<interpreted>[^`]+)`"
)
#: Roles of Python objects (``:py:class:`` too), whose target is a dotted name.
OBJECT_ROLES = {"class", "func", "meth", "attr", "data", "exc", "obj", "mod", "const", "type"}
#: Other roles whose text is code: a file, a command, an environment variable...
CODE_ROLES = {"file", "command", "program", "envvar", "option", "samp", "kbd", "code"}


@dataclass
class Role:
    """``:name:`content```: ``shown`` is what a reader sees, ``target`` what it names."""

    name: str
    shown: str
    target: str
    titled: bool  # ``:ref:`text <label>```: the text is the author's


def _role(name: str, content: str) -> Role:
    name = name.rsplit(":", 1)[-1]
    titled = re.fullmatch(r"([\s\S]*?)\s*<([^<>]+)>", content.strip())
    if titled:
        return Role(name, titled[1], titled[2], True)
    target = content.strip().lstrip("!")
    if target.startswith("~"):
        target = target[1:]
        return Role(name, target.rsplit(".", 1)[-1], target, False)
    return Role(name, target, target, False)


def _inline(
    text: str, write: Callable[[str, re.Match[str]], str], plain: Callable[[str], str]
) -> str:
    """``text`` with each piece of inline markup replaced by ``write(kind, match)`` and the
    text between by ``plain(text)``."""
    out = []
    position = 0
    for match in _INLINE.finditer(text):
        out.append(plain(text[position : match.start()]))
        kind = next(
            k
            for k in ("literal", "role", "url", "reference", "strong", "emphasis", "interpreted")
            if match[k] is not None
        )
        out.append(write(kind, match))
        position = match.end()
    out.append(plain(text[position:]))
    return "".join(out)


def _paragraph_end(text: str) -> str:
    """A paragraph's ``::`` (a literal block follows) as it reads: ``Example::`` is
    ``Example:``, ``Example ::`` and a lone ``::`` vanish."""
    if not text.endswith("::"):
        return text
    if text.strip() == "::":
        return ""
    return text[:-3].rstrip() if text[-3].isspace() else text[:-1]


def _fields_name(label: str) -> tuple[str, str]:
    """A field's kind and subject: ``param x`` -> (param, x), ``raises E`` -> (raises, E),
    ``returns`` -> (returns, "")."""
    words = label.split()
    kind = words[0].lower()
    subject = words[-1] if len(words) > 1 else ""
    if kind in {"param", "parameter", "arg", "argument", "key", "keyword", "kwarg", "ivar", "var"}:
        return "param", subject
    if kind in {"raises", "raise", "except", "exception"}:
        return "raises", subject
    if kind in {"returns", "return"}:
        return "returns", ""
    if kind in {"yields", "yield"}:
        return "yields", ""
    if kind in {"type", "vartype", "rtype", "ytype"}:
        return "type", subject
    return label, ""


def _list_kind(block: Block) -> str:
    """Which list a block is an item of (a bullet's character, or numbered), if any."""
    if block.kind == "field":
        return "field"
    if block.kind == "item":
        return block.label if block.label in "-*+•" else "numbered"
    return ""


class _Writer:
    """Writes blocks as text; the plain-text and Markdown writers differ in the pieces."""

    list_marker_widths = True

    def __init__(self, targets: Mapping[str, str]) -> None:
        self.targets = targets

    def blocks(self, blocks: list[Block]) -> str:
        parts: list[str] = []
        previous = ""
        for block in blocks:
            text = self.block(block)
            if not text:
                continue
            # The items of one list, the fields of one field list: a line apart.
            kind = _list_kind(block)
            parts.append(("\n" if kind and kind == previous else "\n\n") + text if parts else text)
            previous = kind
        return "".join(parts)

    def block(self, block: Block) -> str:
        return str(getattr(self, block.kind)(block))

    def text(self, text: str) -> str:
        return _inline(text, self.piece, self.escape)

    def paragraph(self, block: Block) -> str:
        return self.text(_paragraph_end(block.text))

    def escape(self, text: str) -> str:
        return text

    def piece(self, kind: str, match: re.Match[str]) -> str:
        raise NotImplementedError

    @staticmethod
    def hanging(first: str, body: str, width: int) -> str:
        """``body`` after ``first``, its further lines indented by ``width``."""
        lines = body.split("\n")
        rest = [f"{' ' * width}{line}" if line.strip() else "" for line in lines[1:]]
        return "\n".join([f"{first}{lines[0]}".rstrip(), *rest])


class _Plain(_Writer):
    def piece(self, kind: str, match: re.Match[str]) -> str:
        if kind == "literal":
            return match["code"]
        if kind == "role":
            return _role(match["role"], match["content"]).shown
        if kind == "url":
            text, url = match["text"], match["url"]
            return f"{text} ({url})" if text and text != url else url
        if kind == "reference":
            name = match["reference"]
            url = self.targets.get(name.lower())
            return f"{name} ({url})" if url else name
        return match[kind]  # strong, emphasis, interpreted: their text

    def literal(self, block: Block) -> str:
        return textwrap.indent(block.text, "    ")

    def doctest(self, block: Block) -> str:
        return block.text

    def heading(self, block: Block) -> str:
        title = self.text(block.text)
        return f"{title}\n{block.label * len(title)}"

    def note(self, block: Block) -> str:
        body = self.blocks(block.children)
        return f"{block.label}: {body}" if body else f"{block.label}."

    def item(self, block: Block) -> str:
        return self.hanging(f"{block.label} ", self.blocks(block.children), len(block.label) + 1)

    def field(self, block: Block) -> str:
        kind, subject = _fields_name(block.label)
        if kind == "type":
            return ""
        name = {"param": subject, "raises": f"raises {subject}"}.get(kind, kind)
        return self.hanging(f"{name}: ", self.blocks(block.children), 4)

    def quote(self, block: Block) -> str:
        return textwrap.indent(self.blocks(block.children), " " * block.indent)


class _Markdown(_Writer):
    def __init__(self, targets: Mapping[str, str], links: Mapping[str, str]) -> None:
        super().__init__(targets)
        self.links = links

    @staticmethod
    def code(text: str) -> str:
        # A line break inside stays: Markdown reads it as a space, as reST does.
        ticks = "`"
        while ticks in text:
            ticks += "`"
        padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
        return f"{ticks}{padded}{ticks}"

    def escape(self, text: str) -> str:
        # What Markdown would read as markup: emphasis at a word's edge, code, links, HTML.
        text = re.sub(r"([\\`\[\]])", r"\\\1", text)
        text = re.sub(r"(?<!\w)([*_])|([*_])(?!\w)", lambda m: "\\" + (m[1] or m[2]), text)
        return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)

    def link(self, shown: str, target: str) -> str:
        url = self.links.get(target)
        return f"[{shown}]({url})" if url else shown

    def piece(self, kind: str, match: re.Match[str]) -> str:
        if kind == "literal":
            return self.code(match["code"])
        if kind == "role":
            role = _role(match["role"], match["content"])
            if role.name in OBJECT_ROLES:
                shown = role.shown
                if not role.titled and role.name != "mod":
                    # The name, with its class for a method or attribute.
                    keep = 2 if role.name in ("meth", "attr") else 1
                    shown = ".".join(shown.split(".")[-keep:])
                return self.link(self.code(shown), role.target)
            if role.name in CODE_ROLES:
                return self.code(role.shown)
            return self.link(self.escape(role.shown), role.target)
        if kind == "url":
            text, url = match["text"], match["url"]
            return f"[{self.escape(text)}]({url})" if text else f"<{url}>"
        if kind == "reference":
            name = match["reference"]
            url = self.targets.get(name.lower())
            return f"[{self.escape(name)}]({url})" if url else self.escape(name)
        if kind == "strong":
            return f"**{self.text(match['strong'])}**"
        if kind == "emphasis":
            return f"*{self.text(match['emphasis'])}*"
        return self.code(match["interpreted"])

    def literal(self, block: Block) -> str:
        fence = "```"
        while fence in block.text:
            fence += "`"
        return f"{fence}{block.label or 'text'}\n{block.text}\n{fence}"

    def doctest(self, block: Block) -> str:
        return f"```pycon\n{block.text}\n```"

    def heading(self, block: Block) -> str:
        return f"**{self.text(block.text)}**"

    @staticmethod
    def quoted(text: str) -> str:
        return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))

    def note(self, block: Block) -> str:
        body = self.blocks(block.children)
        return self.quoted(f"**{block.label}:** {body}" if body else f"**{block.label}.**")

    def item(self, block: Block) -> str:
        marker = "-" if block.label in "*+•" else block.label.replace("#", "1")
        return self.hanging(f"{marker} ", self.blocks(block.children), len(marker) + 1)

    def field(self, block: Block) -> str:
        kind, subject = _fields_name(block.label)
        if kind == "type":
            return ""
        name = {"param": self.code(subject), "raises": f"raises {self.code(subject)}"}.get(
            kind, kind
        )
        return self.hanging(f"- {name}: ", self.blocks(block.children), 2)

    def quote(self, block: Block) -> str:
        return self.quoted(self.blocks(block.children))


def plain_doc(doc: str) -> str:
    """A docstring as plain text for a terminal: ``:param x: what`` is ``x: what``,
    ``:class:`~a.C``` ``C``, ````code```` ``code``, ``*word*`` ``word``, ```text <url>`_``
    ``text (url)``, a note ``Note: ...``; literal blocks stay indented, lists as written."""
    blocks, targets = read(doc)
    return _Plain(targets).blocks(blocks)


def markdown_doc(doc: str, links: Mapping[str, str] | None = None) -> str:
    """A docstring as Markdown: ````code```` and roles are code spans (``:class:`a.b.C```
    is `C`, a link when ``links`` has a URL for ``a.b.C``), a note a blockquote
    ``**Note:** ...``, links Markdown links, literal blocks fenced."""
    blocks, targets = read(doc)
    return _Markdown(targets, links or {}).blocks(blocks)
