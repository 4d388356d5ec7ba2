"""One top-level node attribute as text, written so that an index on it is used.

``Node.attributes[key].as_string()`` sends the key as a bound parameter, and SQLite matches
an expression index only against the very same expression, constants included: a lookup by
``cache_hash`` then reads every finished calc job. :func:`attribute_text` writes the key into
the SQL instead, as the indexes of migration 0006 are written
(``json_extract(attributes, '$."key"')`` on SQLite, ``(attributes ->> 'key')`` on
PostgreSQL), so the planner finds them.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["attribute_text"]


def _checked(key: str) -> str:
    if not key or any(c in key for c in "'\"\\"):
        raise ValueError(f"An indexed attribute name may not be empty or hold quotes: {key!r}")
    return key


class attribute_text(FunctionElement[str]):
    """``attribute_text(Node.attributes, KEY)``: the attribute ``KEY`` as text (NULL when
    the node has none); compare it with ``==``."""

    type = sa.String()
    name = "attribute_text"
    inherit_cache = True

    def __init__(self, column: Any, key: str) -> None:
        # The key as a literal: part of the SQL text, and so of the statement cache key.
        super().__init__(column, sa.literal_column(f"'{_checked(key)}'"))


def _parts(element: attribute_text, compiler: Any, **kw: Any) -> tuple[str, str]:
    column, key = list(element.clauses)
    return compiler.process(column, **kw), key.name.strip("'")


@compiles(attribute_text, "sqlite")
def _sqlite(element: attribute_text, compiler: Any, **kw: Any) -> str:
    column, key = _parts(element, compiler, **kw)
    return f"json_extract({column}, '$.\"{key}\"')"


@compiles(attribute_text, "postgresql")
def _postgresql(element: attribute_text, compiler: Any, **kw: Any) -> str:
    column, key = _parts(element, compiler, **kw)
    return f"({column} ->> '{key}')"
