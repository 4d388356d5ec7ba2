"""Whether a value given in a builder fits a function's type annotation, so that a monitor
kwarg of the wrong type (``"seconds": "ten"``) is refused when the builder is filled rather
than found by the monitor raising at every poll.

Only what can be told for sure is refused: builtin types, ``X | Y``, ``Optional``,
``Literal``, and ``list``/``tuple``/``dict`` with their item types. An annotation this does
not understand (a class of a library, a protocol, a string that does not resolve) lets any
value through.
"""

from __future__ import annotations

import builtins
import collections.abc
import functools
import inspect
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

from veglia.signatures import annotation_text

__all__ = ["describe", "fits", "parameter_annotations", "problem_of"]

_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable)
_MAPPINGS = (dict, collections.abc.Mapping)


def parameter_annotations(function: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations, resolved where they can be (``from __future__ import
    annotations`` makes them strings); those that cannot are left out."""
    try:  # with extras: an Annotated mark (Regex) carries a check of the value
        return typing.get_type_hints(function, include_extras=True)
    except Exception:  # a name only imported for type checkers: resolve one by one
        pass
    found = {}
    namespace = getattr(function, "__globals__", {})
    for name, parameter in inspect.signature(function).parameters.items():
        annotation = parameter.annotation
        if isinstance(annotation, str):
            annotation = _resolve(annotation, namespace)
        if annotation is not inspect.Parameter.empty:
            found[name] = annotation
    return found


def _resolve(text: str, namespace: dict[str, Any]) -> Any:
    """``"float"``, ``"str | None"``: names of the function's module or builtins, joined by
    ``|`` (nothing is evaluated); anything else is left unknown (``empty``)."""
    resolved = []
    for part in (piece.strip() for piece in text.split("|")):
        if part == "None":
            resolved.append(type(None))
        elif part.isidentifier() and isinstance(namespace.get(part), type):
            resolved.append(namespace[part])
        elif part.isidentifier() and isinstance(getattr(builtins, part, None), type):
            resolved.append(getattr(builtins, part))
        else:
            return inspect.Parameter.empty
    return functools.reduce(operator.or_, resolved)


def fits(value: Any, annotation: Any) -> bool:
    """Whether ``value`` is of the type ``annotation`` says (True when it cannot tell)."""
    if annotation in (Any, object, inspect.Parameter.empty):
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Annotated:
        return fits(value, arguments[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(fits(value, argument) for argument in arguments)
    if origin is typing.Literal:
        return value in arguments
    if annotation is float:  # an int is a float too (PEP 484), a bool is not a number here
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in _SEQUENCES:
        if not isinstance(value, list | tuple | set | frozenset):
            return False
        if origin is tuple and len(arguments) == 2 and arguments[1] is Ellipsis:
            arguments = arguments[:1]
        elif origin is tuple and arguments:
            return len(value) == len(arguments) and all(map(fits, value, arguments))
        return len(arguments) != 1 or all(fits(item, arguments[0]) for item in value)
    if origin in _MAPPINGS:
        if not isinstance(value, dict):
            return False
        if len(arguments) != 2:
            return True
        return all(fits(k, arguments[0]) and fits(v, arguments[1]) for k, v in value.items())
    if annotation in _SEQUENCES:
        return isinstance(value, list | tuple | set | frozenset)
    if annotation in _MAPPINGS:
        return isinstance(value, dict)
    if isinstance(annotation, type) and origin is None:
        return isinstance(value, annotation)
    return True


def problem_of(value: Any, annotation: Any) -> str | None:
    """What the marks of an ``Annotated`` annotation say is wrong with a value that fits its
    type (``"is not a regular expression: ..."``), or None. A mark is any object with a
    ``problem(value) -> str | None`` method (:class:`~veglia.engine.calcjob.monitors.
    RegexCheck`); in ``X | Y`` the first member the value fits is asked."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        member = next((a for a in arguments if fits(value, a)), None)
        return None if member is None else problem_of(value, member)
    if origin is not typing.Annotated:
        return None
    for mark in annotation.__metadata__:
        check = getattr(mark, "problem", None)
        found = check(value) if callable(check) else None
        if found:
            return str(found)
    return None


def describe(annotation: Any) -> str:
    """An annotation as a person reads it: ``float``, ``str | None``, ``list[str]``, ``str
    (regular expression)``."""
    return annotation_text(annotation)
