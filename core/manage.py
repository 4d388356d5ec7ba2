"""The active profile of this Python process and its storage, as AiiDA's ``load_profile``."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from veglia.config.config import Config, veglia_home
from veglia.config.profile import Profile
from veglia.exceptions import ProfileNotFoundError

if TYPE_CHECKING:
    # Lazy: the plugin manager imports config; it is loaded with the first profile.
    from veglia.storage.backend import StorageBackend

__all__ = [
    "active_profile",
    "close_storage",
    "get_profile",
    "get_storage",
    "load_profile",
    "refresh_profile",
    "unload_profile",
]

LOGGER = logging.getLogger("veglia.config")
_profile: Profile | None = None
_storage: StorageBackend | None = None
#: What the configuration files looked like when the active profile was read.
_stamp: tuple[object, ...] | None = None


def _config_stamp() -> tuple[object, ...]:
    """One stat of each configuration file: a change rewrites it (``os.replace``)."""
    home = veglia_home()
    stamp: list[object] = []
    for name in ("config.json", "secrets.json"):
        try:
            info = os.stat(home / name)
        except OSError:
            stamp.append(None)
        else:
            stamp.append((info.st_ino, info.st_mtime_ns, info.st_size))
    return tuple(stamp)


def load_profile(name: str | None = None, *, allow_switch: bool = True) -> Profile:
    """Make a profile the active one (the default profile when ``name`` is None)."""
    global _profile, _stamp
    # Lazy: `import veglia` stays light; profiles load these on first use.
    from veglia.plugin_manager import get_plugin_manager

    stamp = _config_stamp()
    profile = Config().get_profile(name)
    if _profile is not None and _profile.name != profile.name and not allow_switch:
        raise ProfileNotFoundError(
            f"Profile {_profile.name!r} is already loaded; cannot switch to {profile.name!r}."
        )
    unload_profile()
    get_plugin_manager().hook.profile_loaded(profile=profile)
    _profile, _stamp = profile, stamp
    return profile


def refresh_profile() -> list[str]:
    """Read the active profile's options again when its configuration files changed (one
    stat each when they did not): the daemon calls this as it runs, so `veglia config set`
    needs no restart. The profile object is updated in place, so whoever holds it sees the
    new values. Returns the names of the options that changed."""
    global _stamp
    if _profile is None:
        return []
    stamp = _config_stamp()
    if stamp == _stamp:
        return []
    try:
        fresh = Config().get_profile(_profile.name)
    except Exception as exc:  # a file edited by hand and broken, or the profile deleted
        LOGGER.error("cannot read profile %s again; keeping its options: %s", _profile.name, exc)
        _stamp = stamp
        return []
    _stamp = stamp
    changed = sorted(
        name
        for old, new in ((_profile.options, fresh.options), (_profile.secrets, fresh.secrets))
        for name in set(old) | set(new)
        if old.get(name) != new.get(name)
    )
    _profile.options.clear()
    _profile.options.update(fresh.options)
    _profile.secrets.clear()
    _profile.secrets.update(fresh.secrets)
    return changed


def active_profile() -> Profile | None:
    """The loaded profile, or None when none is loaded yet."""
    return _profile


def get_profile() -> Profile:
    """The active profile; loads the default one when none is loaded yet."""
    return _profile if _profile is not None else load_profile()


def get_storage() -> StorageBackend:
    """The storage of the active profile, opened once and checked against the schema."""
    global _storage
    if _storage is None:
        # Lazy: SQLAlchemy only when storage is first used (CLI start-up). Here, not above:
        # an import statement costs a lock, and the engine asks for the storage at every
        # read and write.
        from veglia.storage.backend import StorageBackend

        storage = StorageBackend.from_profile(get_profile())
        storage.check_schema()
        _storage = storage
    return _storage


def close_storage() -> None:
    """Close the database connections of the active profile's storage, if it was opened
    (used again, it opens new ones)."""
    if _storage is not None:
        _storage.close()


def unload_profile() -> None:
    """Forget the active profile and close its storage."""
    global _profile, _storage, _stamp
    if _storage is not None:
        _storage.close()
    _profile = _storage = _stamp = None
