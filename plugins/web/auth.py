"""Who may see and do what: named users with a role, the printed token, the CSRF token.

Users live in the profile's secrets file (mode 0600), under the secret option
``web.users``: ``{name: {"role": "read"|"operate", "hash": "scrypt$..."}}``. Only salted
scrypt hashes are kept; no page or API answer ever holds one.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from veglia.plugin_api import Config, InvalidOptionError, Option

__all__ = [
    "ROLES",
    "USERS_OPTION",
    "User",
    "add_user",
    "check_password",
    "hash_password",
    "list_users",
    "new_csrf_token",
    "remove_user",
    "tokens_match",
]

ROLES = ("read", "operate")
TOKEN_USER = "token"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
# scrypt at n=2**14, r=8: 16 MiB and some tens of milliseconds per check, as OWASP suggests.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


@dataclass(frozen=True)
class User:
    """Someone logged in: a named user, or whoever holds the printed token (``token``)."""

    name: str
    role: str

    @property
    def can_operate(self) -> bool:
        return self.role == "operate"


def _parse_users(value: Any) -> dict[str, dict[str, str]]:
    if not isinstance(value, dict) or not all(
        isinstance(entry, dict) and entry.get("role") in ROLES and "hash" in entry
        for entry in value.values()
    ):
        raise ValueError("manage web users with `veglia web user add/remove`, not by hand")
    return value


USERS_OPTION = Option(
    "web.users",
    "Users of `veglia web` with their role and password hash; set with `veglia web user add`.",
    default={},
    parse=_parse_users,
    secret=True,
    format=lambda value: ", ".join(sorted(value or {})),
)


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    encoded = [base64.b64encode(part).decode() for part in (salt, digest)]
    return "$".join(["scrypt", str(_SCRYPT["n"]), str(_SCRYPT["r"]), str(_SCRYPT["p"]), *encoded])


def check_password(password: str, stored: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        expected = base64.b64decode(digest)
        found = hashlib.scrypt(
            password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p)
        )
    except ValueError:
        return False
    return kind == "scrypt" and hmac.compare_digest(found, expected)


@functools.cache
def _stand_in_hash() -> str:
    """A hash to check an unknown user's password against: made once, so that checking it
    costs one scrypt, as a known user's check does."""
    return hash_password(secrets.token_urlsafe(16))


def tokens_match(given: str | None, expected: str | None) -> bool:
    """Compared in constant time, so the answer's timing tells nothing of the token."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def _users(config: Config, profile: str) -> dict[str, dict[str, str]]:
    return dict(config.get_profile(profile).get_option(USERS_OPTION.name) or {})


def list_users(profile: str) -> list[User]:
    """Every named user of the profile (names and roles, never hashes), by name."""
    users = _users(Config(), profile)
    return [User(name, entry["role"]) for name, entry in sorted(users.items())]


def find_user(profile: str, name: str, password: str | None = None) -> User | None:
    """The user ``name``, when it exists (and ``password`` is its password, when given)."""
    entry = _users(Config(), profile).get(name)
    if entry is None:
        if password is not None:  # as slow as a wrong password: no hint that the name exists
            check_password(password, _stand_in_hash())
        return None
    if password is not None and not check_password(password, entry["hash"]):
        return None
    return User(name, entry["role"])


def add_user(profile: str, name: str, role: str, password: str) -> None:
    """Add the user, or give an existing one a new role and password."""
    if not _NAME.fullmatch(name) or name == TOKEN_USER:
        raise InvalidOptionError(
            f"User name {name!r} is not allowed: use up to 64 letters, digits, '.', '_', '@' "
            f"and '-' (and not {TOKEN_USER!r})."
        )
    if role not in ROLES:
        raise InvalidOptionError(f"Role {role!r} is not one of {', '.join(ROLES)}.")
    if not password:
        raise InvalidOptionError("The password is empty; give one.")
    config = Config()
    users = _users(config, profile)
    users[name] = {"role": role, "hash": hash_password(password)}
    config.set_option(profile, USERS_OPTION.name, users)


def remove_user(profile: str, name: str) -> None:
    config = Config()
    users = _users(config, profile)
    if name not in users:
        known = ", ".join(sorted(users)) or "none"
        raise InvalidOptionError(f"No web user {name!r} in profile {profile!r} (users: {known}).")
    del users[name]
    config.set_option(profile, USERS_OPTION.name, users)
