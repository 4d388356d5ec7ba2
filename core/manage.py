"""The active profile of this Python process and its storage, as AiiDA's ``load_profile``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.config.config import Config
from veglia.config.profile import Profile
from veglia.exceptions import ProfileNotFoundError

if TYPE_CHECKING:
    # Lazy: the plugin manager imports config; it is loaded with the first profile.
    from veglia.storage.backend import StorageBackend

__all__ = ["active_profile", "get_profile", "get_storage", "load_profile", "unload_profile"]

_profile: Profile | None = None
_storage: StorageBackend | None = None


def load_profile(name: str | None = None, *, allow_switch: bool = True) -> Profile:
    """Make a profile the active one (the default profile when ``name`` is None)."""
    global _profile
    # Lazy: `import veglia` stays light; profiles load these on first use.
    from veglia.config.private_paths import tighten
    from veglia.plugin_manager import get_plugin_manager

    profile = Config().get_profile(name)
    if _profile is not None and _profile.name != profile.name and not allow_switch:
        raise ProfileNotFoundError(
            f"Profile {_profile.name!r} is already loaded; cannot switch to {profile.name!r}."
        )
    unload_profile()
    tighten(profile.folder)  # made by an older release, perhaps 0755
    get_plugin_manager().hook.profile_loaded(profile=profile)
    _profile = profile
    return profile


def active_profile() -> Profile | None:
    """The loaded profile, or None when none is loaded yet."""
    return _profile


def get_profile() -> Profile:
    """The active profile; loads the default one when none is loaded yet."""
    return _profile if _profile is not None else load_profile()


def get_storage() -> StorageBackend:
    """The storage of the active profile, opened once and checked against the schema."""
    global _storage
    # Lazy: SQLAlchemy only when storage is first used (CLI start-up).
    from veglia.storage.backend import StorageBackend

    if _storage is None:
        storage = StorageBackend.from_profile(get_profile())
        storage.check_schema()
        _storage = storage
    return _storage


def unload_profile() -> None:
    """Forget the active profile and close its storage."""
    global _profile, _storage
    if _storage is not None:
        _storage.close()
    _profile = _storage = None
