"""Users: who owns a node, who logs in to a computer."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from veglia.exceptions import NotExistent
from veglia.manage import get_profile, get_storage
from veglia.storage.tables import users

__all__ = ["User", "get_default_user", "list_users", "load_user"]


@dataclass(frozen=True)
class User:
    pk: int
    email: str
    first_name: str = ""
    last_name: str = ""
    institution: str = ""

    @classmethod
    def _from_row(cls, row: Any) -> User:
        return cls(row.id, row.email, row.first_name, row.last_name, row.institution)


_default: tuple[tuple[str, Any], User] | None = None


def get_default_user() -> User:
    """The profile's user (``user.email``), created on first use."""
    global _default
    profile = get_profile()
    option = profile.get_option("user.email")
    # Keyed by the option as set, not the email it gives: without one, the login name is
    # looked up (a passwd read) only when the profile or the option changed. Every node
    # stored asks for the user.
    key = (profile.name, option)
    if _default is not None and _default[0] == key:
        return _default[1]
    email = option or f"{getpass.getuser()}@localhost"
    with get_storage().connection() as connection:
        pk = connection.scalar(sa.select(users.c.id).where(users.c.email == email))
        if pk is None:
            pk = connection.scalar(users.insert().values(email=email).returning(users.c.id))
        user = User(pk, email)
    _default = (key, user)
    return user


def list_users() -> list[User]:
    """The users of the profile's database, by email."""
    with get_storage().connection() as connection:
        rows = connection.execute(sa.select(users).order_by(users.c.email))
        return [User._from_row(row) for row in rows]


def load_user(email: str) -> User:
    """The user of this email; :class:`~veglia.exceptions.NotExistent`, naming the users
    there are, if none."""
    with get_storage().connection() as connection:
        row = connection.execute(sa.select(users).where(users.c.email == email)).first()
        if row is not None:
            return User._from_row(row)
    known = ", ".join(user.email for user in list_users()) or "none"
    raise NotExistent(f"No user {email!r} in this profile (users: {known}).")
