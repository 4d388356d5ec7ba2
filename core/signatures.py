"""A callable's signature as its author wrote it, and its docstring without reST markup,
for people to read.

Under ``from __future__ import annotations`` every annotation is a string, and
``str(inspect.signature(f))`` quotes each one (``path: 'str'``); veglia's pages and
``veglia plugin show`` print them as they stand in the source (``path: str``), except one
with marks that say what they are (``Regex``: ``pattern: str (regular expression)``).
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

__all__ = ["annotation_marks", "annotation_text", "plain_doc", "signature_text"]

#: ``:param x:`` / ``:param int x:``, ``:returns:``, ``:raises E:`` at the start of a line.
_FIELD = re.compile(r"^(\s*):(param|parameter|arg|keyword|kwarg)\s+(?:\S+\s+)?(\w+):\s?", re.M)
_RETURNS = re.compile(r"^(\s*):(returns?|rtype):\s?", re.M)
_RAISES = re.compile(r"^(\s*):raises?\s+([\w.]+):\s?", re.M)
#: ``:type x: ...`` lines repeat the annotation the signature shows.
_TYPE_LINE = re.compile(r"^\s*:(type|vartype)\s+\w+:.*\n?", re.M)
#: ``:class:`~a.b.C``` (the last name), ``:func:`text <target>``` (the text), ``:mod:`a.b```.
_ROLE = re.compile(r":[\w:]+:`(~?)([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``")


def _role(match: re.Match[str]) -> str:
    text = match.group(2).strip()
    return text.rsplit(".", 1)[-1] if match.group(1) else text


def plain_doc(doc: str) -> str:
    """A docstring as plain text: ``:param x: what`` becomes ``x: what``, ``:returns:``
    ``returns:``, ``:class:`~a.C``` ``C``, ````code```` ``code``, a ``::`` ending ``:``."""
    text = _TYPE_LINE.sub("", doc)
    text = _FIELD.sub(lambda m: f"{m.group(1)}{m.group(3)}: ", text)
    text = _RETURNS.sub(lambda m: f"{m.group(1)}returns: ", text)
    text = _RAISES.sub(lambda m: f"{m.group(1)}raises {m.group(2)}: ", text)
    text = _ROLE.sub(_role, text)
    text = _LITERAL.sub(r"\1", text)
    text = re.sub(r"(?m)^\s*::\s*$\n?", "", text)
    return re.sub(r"(\S)::$", r"\1:", text, flags=re.M)


class _Written:
    """An annotation shown as written (``int``, not ``'int'``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _written(annotation: Any) -> Any:
    return _Written(annotation) if isinstance(annotation, str) else annotation


def annotation_marks(annotation: Any) -> list[str]:
    """What the marks of an ``Annotated`` annotation (also inside ``X | None``) say they are:
    a mark's ``description`` (``["regular expression"]`` for ``Regex``)."""
    if typing.get_origin(annotation) is typing.Annotated:
        said = (getattr(mark, "description", None) for mark in annotation.__metadata__)
        return [text for text in said if isinstance(text, str)]
    return [text for member in typing.get_args(annotation) for text in annotation_marks(member)]


def annotation_text(annotation: Any) -> str:
    """An annotation as a person reads it: ``float``, ``str | None``, ``list[str]``, and
    ``str (regular expression)`` for ``Regex``."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if isinstance(annotation, str):
        return annotation
    if origin is typing.Annotated:
        marks = annotation_marks(annotation)
        base = annotation_text(arguments[0])
        return f"{base} ({', '.join(marks)})" if marks else base
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(annotation_text(argument) for argument in arguments)
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and origin is None:
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


def _hints(target: Any) -> dict[str, Any]:
    """The resolved annotations with their marks; empty when they do not resolve."""
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:  # a name only its module's TYPE_CHECKING block knows
        return {}


def signature_text(obj: Any) -> str:
    """``(node: ProcessNode, path: str = 'out.log') -> str | None`` for a function (a class:
    its ``__init__``); empty when it has no signature to read."""
    try:
        target = obj.__init__ if inspect.isclass(obj) else obj
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return ""
    hints = _hints(target)
    parameters = [
        parameter.replace(
            annotation=_Written(annotation_text(hints[parameter.name]))
            if annotation_marks(hints.get(parameter.name))
            else _written(parameter.annotation)
        )
        for parameter in signature.parameters.values()
    ]
    shown = signature.replace(
        parameters=parameters, return_annotation=_written(signature.return_annotation)
    )
    return str(shown)
