"""A profile: one named set of options, one database and one file repository."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from veglia.config.options import get_option
from veglia.config.values import mask_url

__all__ = ["Profile", "mask_url"]


def _with_password(url: str, password: str) -> str:
    if not password:
        return url
    parts = urlsplit(url)
    if parts.password is not None or not parts.username:
        return url
    host = parts.netloc.split("@", 1)[1]
    netloc = f"{parts.username}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass
class Profile:
    """A profile as read from the configuration folder.

    ``options`` holds what was set explicitly; :meth:`get_option` falls back to defaults.
    ``secrets`` holds the values of secret options, read from the 0600 secrets file.
    """

    name: str
    folder: Path
    id: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, Any] = field(default_factory=dict, repr=False)

    def get_option(self, name: str) -> Any:
        """The value of an option for this profile: set explicitly, or its default."""
        option = get_option(name)
        store = self.secrets if option.secret else self.options
        if name in store:
            return store[name]
        return option.default

    def is_set(self, name: str) -> bool:
        return name in self.options or name in self.secrets

    def url_with_password(self, name: str) -> str:
        """URL option ``name`` with the password kept in its secret option put back in
        (when the URL names a user): the URL to connect with, never to print."""
        url: str = self.get_option(name)  # URL options are text, empty when unset
        password_option = get_option(name).password_option
        if not url or not password_option:
            return url
        return _with_password(url, self.get_option(password_option))

    @property
    def daemon_folder(self) -> Path:
        """Pid, status and log files of this host's daemon of the profile: on a home shared
        by several machines each runs its own daemon, all on one database and broker."""
        import socket

        return self.folder / "daemon" / socket.gethostname()

    @property
    def repository_path(self) -> Path:
        """Folder of the content-addressed file repository."""
        return self.folder / "repository"

    @property
    def repository_location(self) -> str:
        """Where file contents are kept, for people: the folder, or the database."""
        if self.get_option("storage.repository") == "database":
            return f"in the database (and, written before, {self.repository_path})"
        return str(self.repository_path)

    @property
    def storage_url(self) -> str:
        """The database URL to connect with, password included: never print it."""
        url = self.url_with_password("storage.url")
        return url or f"sqlite:///{self.folder / 'storage.sqlite'}"

    @property
    def storage_url_masked(self) -> str:
        return mask_url(self.storage_url)

    @property
    def broker_url(self) -> str:
        """The broker URL to connect with, password included, or ``""`` for no broker."""
        return self.url_with_password("broker.url")

    @property
    def broker_url_masked(self) -> str:
        return mask_url(self.broker_url)
