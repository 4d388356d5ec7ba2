"""Users: who owns a node, who logs in to a computer."""

from __future__ import annotations

import functools
import getpass
from dataclasses import dataclass

import sqlalchemy as sa

from veglia.manage import get_profile, get_storage
from veglia.storage import models

__all__ = ["User", "get_default_user"]


@dataclass(frozen=True)
class User:
    pk: int
    email: str


_default: tuple[str, User] | None = None

# A daemon started without LOGNAME or USER looks the name up in the password database each
# time; every node stored asks for it.
_login_name = functools.cache(getpass.getuser)


def get_default_user() -> User:
    """The profile's user (``user.email``), created on first use."""
    global _default
    profile = get_profile()
    email = profile.get_option("user.email") or f"{_login_name()}@localhost"
    if _default is not None and _default[0] == f"{profile.name}:{email}":
        return _default[1]
    with get_storage().session() as session:
        row = session.scalar(sa.select(models.User).where(models.User.email == email))
        if row is None:
            row = models.User(email=email)
            session.add(row)
            session.flush()
        user = User(row.id, row.email)
    _default = (f"{profile.name}:{email}", user)
    return user
