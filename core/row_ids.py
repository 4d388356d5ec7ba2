"""The numbers a database row's id or integer column can hold, checked before a query.

A number past them sent to the database is an overflow error of the driver, not a row that
is missing; commands check first and say what a user can act on.
"""

from __future__ import annotations

__all__ = ["MAX_INTEGER", "MAX_PK", "pk_of"]

#: The largest integer a query can carry: SQLite's are 64-bit signed (PostgreSQL compares a
#: larger one with its columns, SQLite's driver cannot send it).
MAX_INTEGER = 2**63 - 1

#: The largest pk a row can have (ids are such integers).
MAX_PK = MAX_INTEGER


def pk_of(identifier: int | str) -> int | None:
    """``identifier`` as a pk to look up: an int, or all digits, up to :data:`MAX_PK`; None
    for anything else (a label, a UUID prefix, a number no row can have)."""
    text = str(identifier)
    if not (isinstance(identifier, int) or text.isdigit()):
        return None
    number = int(text)
    return number if 0 <= number <= MAX_PK else None
