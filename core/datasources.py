"""Data sources: where a self-starting pipeline finds its inputs.

A data source is built from a dict of settings (checked at once: a wrong one raises
:class:`~veglia.exceptions.DataSourceError` saying what to fix) and lists its *elements*:
one unit of input each (a sample's pair of files, a row of a CSV, a node of a group), with a
stable ``identity`` and a ``checksum`` of its content. A pipeline runs once per identity and
checksum; a new checksum for a known identity means its content changed.

Sources are plugins in the ``veglia.datasources`` entry-point group
(:func:`veglia.entry_points.DataSourceFactory`); the built-ins are ``core.folder``,
``core.fofn`` and ``core.group``. A source that reads files on a computer is given an open
:class:`~veglia.transports.Transport`; ``known``, the cache its last listing returned, spares
it reading again the files that did not change::

    source = DataSourceFactory("core.folder")({"path": "/data/runs", "glob": "*.fastq.gz"})
    with TransportFactory("core.local")() as transport:
        listing = source.elements(transport)
        listing = source.elements(transport, known=listing.known)  # hashes nothing new
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from veglia.exceptions import DataSourceError

if TYPE_CHECKING:
    from veglia.transports import Transport

__all__ = [
    "REQUIRED",
    "DataSource",
    "Element",
    "Known",
    "Listing",
    "Setting",
    "combined_checksum",
    "read_known",
]

#: What a source's last listing learned of each file: path -> (size, mtime, sha256). A file
#: whose size and mtime are both unchanged is not read again.
Known = dict[str, tuple[int, float, str]]


@dataclass(frozen=True)
class Element:
    """One unit of input of a data source, run once per ``(identity, checksum)``.

    ``identity`` is the element's stable key within its source (a sample name, a path
    relative to the folder, a node UUID); ``files`` are absolute paths on the computer (node
    UUIDs for a group); ``checksum`` is the hex sha256 of their content (see
    :func:`combined_checksum`); ``metadata`` holds what the source knows besides (CSV
    columns, the named groups of a pattern).
    """

    identity: str
    files: tuple[str, ...]
    checksum: str
    metadata: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Listing:
    """What one listing of a source found.

    ``elements`` are the complete ones, sorted by identity; ``known`` is the cache to give
    the next listing (only files still there and read); ``problems`` says, one line each,
    what was left out and why (a listed file that is missing, a file the pattern does not
    match); ``waiting`` are the identities left out this time because a file is still being
    written; ``hashed`` the files whose content was read this time.
    """

    elements: tuple[Element, ...]
    known: Known = field(default_factory=dict, hash=False)
    problems: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    hashed: tuple[str, ...] = ()

    def __getitem__(self, identity: str) -> Element:
        """The element with this identity (KeyError when it was not listed)."""
        for element in self.elements:
            if element.identity == identity:
                return element
        raise KeyError(identity)

    @property
    def identities(self) -> list[str]:
        return [element.identity for element in self.elements]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a setting that must be given.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Setting:
    """One setting a data source accepts.

    ``parse`` turns the given value into the one kept (plain data: settings are stored as
    JSON or TOML); it raises ValueError or TypeError with what to give instead. A setting
    whose ``default`` is :data:`REQUIRED` must be given.
    """

    name: str
    help: str
    parse: Callable[[Any], Any] = str
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


class DataSource(ABC):
    """A definition of input data: ``DataSource(settings).elements(transport, known)``.

    Subclasses declare :attr:`accepted_settings`, may check them together in
    :meth:`check`, and implement :meth:`elements`. The settings, parsed and with defaults
    filled in, are in :attr:`settings`. Example::

        class Numbers(DataSource):
            \"\"\"One element per number below ``count``.\"\"\"

            name = "mylab.numbers"
            needs_transport = False
            accepted_settings = (Setting("count", "How many.", parse=int),)

            def elements(self, transport=None, known=None):
                return Listing(tuple(
                    Element(str(n), (), hashlib.sha256(str(n).encode()).hexdigest())
                    for n in range(self.settings["count"])
                ))
    """

    #: The entry-point name, as errors show it.
    name: ClassVar[str] = ""
    #: The settings this source accepts.
    accepted_settings: ClassVar[tuple[Setting, ...]] = ()
    #: False for a source that reads no computer (it is given ``transport=None``).
    needs_transport: ClassVar[bool] = True

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = self._read_settings(settings)
        self.check()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.settings!r}>"

    @property
    def label(self) -> str:
        return self.name or type(self).__name__

    def error(self, message: str) -> DataSourceError:
        """A :class:`DataSourceError` naming this source; ``message`` says what to do."""
        return DataSourceError(f"Data source {self.label}: {message}")

    def _read_settings(self, given: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(given, Mapping):
            raise self.error(f"settings must be a table of name = value, not {given!r}.")
        accepted = {setting.name: setting for setting in self.accepted_settings}
        names = ", ".join(accepted) or "none"
        unknown = sorted(set(given) - set(accepted))
        if unknown:
            raise self.error(f"unknown setting {unknown[0]!r}; the settings are: {names}.")
        settings: dict[str, Any] = {}
        for name, setting in accepted.items():
            if name not in given or given[name] is None:
                if setting.required:
                    raise self.error(f"setting {name!r} is missing ({setting.help}); add it.")
                settings[name] = setting.default
                continue
            try:
                settings[name] = setting.parse(given[name])
            except (TypeError, ValueError) as exc:
                raise self.error(f"{name} = {given[name]!r} will not do: {exc}") from None
        return settings

    def check(self) -> None:  # noqa: B027 (a hook: most sources need no check of their own)
        """Check the settings together (each was checked alone already); raise
        :meth:`error` when they do not fit."""

    @abstractmethod
    def elements(
        self, transport: Transport | None, known: Mapping[str, Any] | None = None
    ) -> Listing:
        """List the source's elements now.

        ``transport`` is open on the source's computer (None for a source that needs none);
        ``known`` is the :attr:`Listing.known` of the last listing, if any. Raises
        :class:`DataSourceError` when nothing can be listed (the folder is missing), and
        :class:`~veglia.exceptions.TransportError` when the computer cannot be reached.
        """

    def require_transport(self, transport: Transport | None) -> Transport:
        """``transport``, or a :class:`DataSourceError` when a caller gave none."""
        if transport is None:
            raise self.error("needs a transport open on its computer; none was given.")
        return transport


def combined_checksum(digests: Sequence[str]) -> str:
    """The checksum of an element from its files' hex sha256 digests, in order: one file's
    own digest (what ``sha256sum`` prints), or for several the sha256 of their digests, one
    per line."""
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("".join(f"{d}\n" for d in digests).encode()).hexdigest()


def read_known(known: Mapping[str, Any] | None) -> Known:
    """``known`` as a :data:`Known`: what comes back from JSON (lists) is accepted; entries
    that do not fit are dropped (their files are read again)."""
    cache: Known = {}
    for path, entry in (known or {}).items():
        try:
            size, mtime, sha256 = entry
            cache[str(path)] = (int(size), float(mtime), str(sha256))
        except (TypeError, ValueError):
            continue
    return cache
