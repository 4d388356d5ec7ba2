"""The configuration folder: ``config.json`` with every profile, ``secrets.json`` (mode 0600).

The folder is ``$VEGLIA_HOME`` or, when that is unset, the user's configuration folder as
platformdirs knows it. Each profile also has a data folder ``profiles/<name>/`` for its
SQLite file, file repository and daemon files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import platformdirs

from veglia.config.options import get_option
from veglia.config.private_paths import private_folder, tighten
from veglia.config.profile import Profile
from veglia.exceptions import ConfigurationError, InvalidOptionError, ProfileNotFoundError

__all__ = ["CONFIG_VERSION", "Config", "split_password", "veglia_home"]

CONFIG_VERSION = 1
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def veglia_home() -> Path:
    """The configuration folder in use."""
    env = os.environ.get("VEGLIA_HOME")
    return Path(env).expanduser().resolve() if env else platformdirs.user_config_path("veglia")


def _write_atomic(path: Path, data: dict[str, Any], mode: int) -> None:
    private_folder(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"{path} is not valid JSON ({exc}). Fix it by hand or move it away and run "
            "`veglia presto` again."
        ) from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path} must hold a JSON object.")
    return data


def split_password(url: str) -> tuple[str, str | None]:
    """``url`` without the password written into it, and that password (decoded: it is
    percent-encoded once, when the URL is built again), or None when it has none."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL: nothing to take out
        return url, None
    if password is None:
        return url, None
    netloc = parts.netloc.replace(f":{password}@", "@", 1)
    return urlunsplit(parts._replace(netloc=netloc)), unquote(password)


class Config:
    """The profiles of one configuration folder."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = Path(home) if home else veglia_home()
        self.path = self.home / "config.json"
        self.secrets_path = self.home / "secrets.json"
        data = _read_json(self.path)
        version = data.get("version", CONFIG_VERSION)
        if version > CONFIG_VERSION:
            raise ConfigurationError(
                f"{self.path} was written by a newer veglia (config version {version}); "
                "upgrade veglia."
            )
        self.default_profile: str | None = data.get("default_profile")
        self._profiles: dict[str, dict[str, Any]] = data.get("profiles", {})
        self._secrets: dict[str, dict[str, Any]] = _read_json(self.secrets_path)
        # Made open by an older release, or by hand: tightened at every load (a stat each).
        folders = [self.profile_folder(name) for name in self._profiles]
        for path in (self.home, self.path, self.secrets_path, self.home / "profiles", *folders):
            tighten(path)
        if self._move_url_passwords():
            self.save()

    def _move_url_passwords(self) -> bool:
        """Move passwords that an older release kept inside URL options (``tower.endpoint``)
        to their secret options; True when one was moved. Options are looked up only for a
        value that holds one, so a start pays nothing for it."""
        moved = False
        for name, entry in self._profiles.items():
            options = entry.get("options", {})
            for key, value in list(options.items()):
                if not (isinstance(value, str) and "@" in value):
                    continue
                url, password = split_password(value)
                if password is None:
                    continue
                try:
                    password_key = get_option(key).password_option
                except InvalidOptionError:  # its plugin is gone: left as it is
                    continue
                if password_key:
                    options[key] = url
                    self._secrets.setdefault(name, {})[password_key] = password
                    moved = True
        return moved

    # -- profiles ---------------------------------------------------------------------
    @property
    def profile_names(self) -> list[str]:
        return sorted(self._profiles)

    def profile_folder(self, name: str) -> Path:
        return self.home / "profiles" / name

    def get_profile(self, name: str | None = None) -> Profile:
        """The named profile, or the default one."""
        name = name or os.environ.get("VEGLIA_PROFILE") or self.default_profile
        if not name:
            raise ProfileNotFoundError(
                f"No profile in {self.home}. Create one with `veglia presto` (no questions) "
                "or `veglia setup`."
            )
        if name not in self._profiles:
            known = ", ".join(self.profile_names) or "none"
            raise ProfileNotFoundError(
                f"No profile {name!r} in {self.home} (profiles: {known}). "
                "Create it with `veglia setup --profile-name NAME`."
            )
        return Profile(
            name=name,
            id=self._profiles[name].get("id", name),
            folder=self.profile_folder(name),
            options=dict(self._profiles[name].get("options", {})),
            secrets=dict(self._secrets.get(name, {})),
        )

    def add_profile(self, name: str, options: dict[str, Any] | None = None) -> Profile:
        """Create a profile with the given (unvalidated text or value) options."""
        if not _PROFILE_NAME.fullmatch(name):
            raise ConfigurationError(
                f"Profile name {name!r} is not allowed: use letters, digits, '.', '_' and '-'."
            )
        if name in self._profiles:
            raise ConfigurationError(
                f"Profile {name!r} already exists. Pick another name or delete it with "
                f"`veglia profile delete {name}`."
            )
        values = self.validate_options(options or {})
        # The id keeps broker queues of profiles apart, also of two profiles of one name.
        self._profiles[name] = {"options": {}, "id": uuid.uuid4().hex}
        self._secrets[name] = {}
        for key, value in values.items():
            self._store(name, key, value)
        if self.default_profile is None:
            self.default_profile = name
        private_folder(self.profile_folder(name))
        self.save()
        return self.get_profile(name)

    def delete_profile(self, name: str, *, keep_data: bool = False) -> None:
        self.get_profile(name)
        del self._profiles[name]
        self._secrets.pop(name, None)
        if self.default_profile == name:
            self.default_profile = self.profile_names[0] if self._profiles else None
        self.save()
        if not keep_data:
            shutil.rmtree(self.profile_folder(name), ignore_errors=True)

    def set_default(self, name: str) -> None:
        self.get_profile(name)
        self.default_profile = name
        self.save()

    # -- options ----------------------------------------------------------------------
    @staticmethod
    def validate_options(options: dict[str, Any]) -> dict[str, Any]:
        """Parse every option; a URL's embedded password moves to its password option."""
        values: dict[str, Any] = {}
        for key, raw in options.items():
            values[key] = get_option(key).validate(raw)
        for key, value in list(values.items()):
            password_key = get_option(key).password_option
            if password_key and isinstance(value, str):
                url, password = split_password(value)
                if password is not None:
                    values[key], values[password_key] = url, password
        return values

    def _store(self, profile: str, key: str, value: Any) -> None:
        if get_option(key).secret:
            self._secrets.setdefault(profile, {})[key] = value
        else:
            self._profiles[profile].setdefault("options", {})[key] = value

    def set_option(self, profile: str, key: str, value: Any) -> Any:
        """Validate and store an option; returns the stored value."""
        self.get_profile(profile)
        values = self.validate_options({key: value})
        for name, parsed in values.items():
            self._store(profile, name, parsed)
        self.save()
        return values[key]

    def unset_option(self, profile: str, key: str) -> None:
        option = get_option(key)
        self.get_profile(profile)
        if option.secret:
            store = self._secrets.get(profile, {})
        else:
            store = self._profiles[profile]["options"]
        if key not in store:
            raise InvalidOptionError(f"Option {key!r} is not set for profile {profile!r}.")
        del store[key]
        self.save()

    # -- persistence ------------------------------------------------------------------
    def save(self) -> None:
        data = {
            "version": CONFIG_VERSION,
            "default_profile": self.default_profile,
            "profiles": self._profiles,
        }
        _write_atomic(self.path, data, 0o600)
        _write_atomic(self.secrets_path, self._secrets, 0o600)
