"""A callable's signature as its author wrote it, for people to read (its docstring:
:mod:`veglia.docstrings`).

Under ``from __future__ import annotations`` every annotation is a string, and
``str(inspect.signature(f))`` quotes each one (``path: 'str'``); veglia's pages and
``veglia plugin show`` print them as they stand in the source (``path: str``).
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["signature_text"]


class _Written:
    """An annotation shown as written (``int``, not ``'int'``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _written(annotation: Any) -> Any:
    return _Written(annotation) if isinstance(annotation, str) else annotation


def signature_text(obj: Any) -> str:
    """``(node: ProcessNode, path: str = 'out.log') -> str | None`` for a function (a class:
    its ``__init__``); empty when it has no signature to read."""
    try:
        target = obj.__init__ if inspect.isclass(obj) else obj
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return ""
    parameters = [
        parameter.replace(annotation=_written(parameter.annotation))
        for parameter in signature.parameters.values()
    ]
    shown = signature.replace(
        parameters=parameters, return_annotation=_written(signature.return_annotation)
    )
    return str(shown)
