"""A callable's signature as its author wrote it, for people to read (its docstring:
:mod:`veglia.docstrings`).

Under ``from __future__ import annotations`` every annotation is a string, and
``str(inspect.signature(f))`` quotes each one (``path: 'str'``); veglia's pages and
``veglia plugin show`` print them as they stand in the source (``path: str``), except one
with marks that say what they are (``Regex``: ``pattern: str (regular expression)``).
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

__all__ = ["annotation_marks", "annotation_text", "signature_text"]


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
