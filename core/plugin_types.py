"""What a plugin hands to veglia through a hook, and what it is handed: the small types
``veglia.hookspecs`` names.

They sit at the bottom of the import graph, beside :mod:`veglia.exceptions`, so the hook
catalogue names them without importing the configuration, the engine or the ORM (each of
which asks plugins for their contributions through :mod:`veglia.plugin_manager`, which
loads the catalogue). Plugins import them from :mod:`veglia.plugin_api`; their old homes
(``veglia.config.options.Option``, ``veglia.orm.computers.ComputerProperty``, ...) still
export them.

The contributions (:class:`Option`, :class:`CalcJobOption`, :class:`ComputerProperty`,
:class:`JobScriptWrap`, :class:`Panel`) are frozen dataclasses that check themselves as
they are made. What a hook is handed that lives higher up (a profile, a process node, a
computer) is described by a :class:`~typing.Protocol` of what a plugin may rely on:
:class:`ProfileLike`, :class:`ProcessNodeLike`, :class:`CalcJobNodeLike`,
:class:`ComputerLike`; the engine passes the real objects
(:class:`veglia.config.profile.Profile`, :class:`veglia.orm.process_nodes.CalcJobNode`,
:class:`veglia.orm.computers.Computer`), which have them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from veglia.exceptions import InvalidOptionError, PluginError

__all__ = [
    "CalcJobNodeLike",
    "CalcJobOption",
    "ComputerLike",
    "ComputerProperty",
    "JobScriptWrap",
    "Option",
    "Panel",
    "ProcessNodeLike",
    "ProfileLike",
    "parse_text",
]


def parse_text(text: Any) -> str:
    """An option's value as typed, without the spaces around it (the default ``parse``)."""
    return str(text).strip()


@dataclass(frozen=True)
class Option:
    """One profile option.

    ``parse`` turns user text into the stored value and raises ``ValueError`` with an
    explanation when it is not allowed; ``choices``, when given, is checked after parsing
    and listed in prompts. ``secret`` options live in the 0600 secrets file and are masked.
    """

    name: str
    description: str
    default: Any = None
    parse: Callable[[Any], Any] = parse_text
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    secret: bool = False
    #: Asked by ``veglia setup`` (site-wide options), in catalogue order.
    setup: bool = False
    #: Shown in prompts to explain the accepted syntax.
    hint: str = ""
    #: Read once by a daemon worker at start: a change waits for `veglia daemon restart`.
    needs_restart: bool = False
    #: Of a URL option: the secret option a password written into the URL is moved to (the
    #: URL keeps its user), so it never lands in ``config.json`` or on screen.
    password_option: str = ""
    format: Callable[[Any], str] = field(default=lambda value: "" if value is None else str(value))

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+", self.name):
            raise ValueError(
                f"Option name {self.name!r} must be dotted lower-case words, "
                "like 'myplugin.endpoint'"
            )
        if not self.description:
            raise ValueError(f"Option {self.name!r} needs a description")

    def allowed_choices(self) -> tuple[str, ...] | None:
        return self.choices() if callable(self.choices) else self.choices

    def validate(self, value: Any) -> Any:
        """Parse and check ``value``; raise :class:`InvalidOptionError` explaining why not."""
        try:
            parsed = self.parse(value)
        except ValueError as exc:
            raise InvalidOptionError(f"Invalid value for {self.name}: {exc}.") from None
        choices = self.allowed_choices()
        if choices is not None and parsed not in choices:
            raise InvalidOptionError(
                f"Invalid value for {self.name}: {parsed!r} is not one of {', '.join(choices)}."
            )
        return parsed


@dataclass(frozen=True)
class CalcJobOption:
    """One calc-job option a plugin adds.

    ``validator(value, port)`` returns ``None`` when the value is fine and a message
    otherwise (as the built-in options' validators). ``default``, when not ``None``, is set
    on every job that does not give the option (and so stored on its node); leave it
    ``None`` to tell "not given" apart.
    """

    name: str
    valid_type: type | tuple[type, ...]
    help: str
    validator: Callable[[Any, Any], str | None] | None = None
    default: Any = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(
                f"Calc-job option name {self.name!r} must be a lower-case word, like "
                "'myplugin_run' (underscores allowed)"
            )
        if not self.help:
            raise ValueError(f"Calc-job option {self.name!r} needs a help text")


@dataclass(frozen=True)
class ComputerProperty:
    """A computer property a plugin adds (the ``computer_properties`` hook).

    ``parse`` turns what a user typed (a ``veglia computer setup`` flag or answer) into the
    stored value and raises ``ValueError`` explaining what is allowed; without it, a
    property whose default is a bool takes yes/no, any other takes the text as given.
    """

    name: str
    default: Any
    help: str
    parse: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(
                f"Computer property name {self.name!r} must be a lower-case word, like "
                "'myplugin_enabled' (underscores allowed)"
            )
        if not self.help:
            raise ValueError(f"Computer property {self.name!r} needs a help text")


_NAME = re.compile(r"[a-z][a-z0-9_.-]*")
_FILE_NAME = re.compile(r"_[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class JobScriptWrap:
    """What one plugin adds around the commands of a job script.

    :param name: the plugin's name (``myplugin.sampler``), shown in the script and recorded on
        the node (attribute ``job_script_wraps``).
    :param before: shell text run before the commands, after the job's ``prepend_text``.
    :param prefix: words put in front of every command line (a wrapper program, a redirection).
    :param after: shell text run after the commands whatever their exit, also when the script
        is signalled (TERM, INT, HUP); ``$veglia_exit`` is the commands' exit status.
    :param live_trace: this wrap writes the live trace files (``_veglia_trace.json`` and
        ``_veglia_trace.series``, see docs/trace.md): the engine reads them at each poll.
    :param sample_interval: seconds between the live trace's samples, once the job has run
        a while: a job waiting dehydrated is woken to read them no more often than this.
    :param files: files to put in the job's work directory beside the script, name -> text
        (say a script ``before`` sources with ``. ./_myplugin.sh``). Names start with ``_``
        and hold no folder. The same text for every job is stored once in the repository,
        where text inside the job script would be stored again with each job.
    :param retrieve: files the wrap writes in the work directory that the engine retrieves
        with the job's own (named as ``files`` are): what the ``job_stopped_beside`` hook
        reads, a summary worth keeping with the job's outputs.
    """

    name: str
    before: str = ""
    prefix: str = ""
    after: str = ""
    live_trace: bool = False
    sample_interval: float | None = None
    files: dict[str, str] = field(default_factory=dict)
    retrieve: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise PluginError(
                f"JobScriptWrap name {self.name!r} must be a lower-case plugin name, like "
                "'myplugin.sampler'"
            )
        for part in ("before", "prefix", "after"):
            if not isinstance(getattr(self, part), str):
                raise PluginError(f"JobScriptWrap {self.name}: {part} must be shell text (a str)")
        for file_name, text in self.files.items():
            if not isinstance(file_name, str) or not _FILE_NAME.fullmatch(file_name):
                raise PluginError(
                    f"JobScriptWrap {self.name}: file name {file_name!r} must start with _ and "
                    "hold letters, digits, '.', '-' or '_' only (no folder)"
                )
            if not isinstance(text, str):
                raise PluginError(f"JobScriptWrap {self.name}: file {file_name} must be text")
        for file_name in self.retrieve:
            if not isinstance(file_name, str) or not _FILE_NAME.fullmatch(file_name):
                raise PluginError(
                    f"JobScriptWrap {self.name}: retrieved file {file_name!r} must be named "
                    "as its files are (start with _, no folder)"
                )
        if "\n" in self.prefix:
            raise PluginError(
                f"JobScriptWrap {self.name}: prefix goes in front of each command line and "
                "cannot hold a newline; put setup in `before`"
            )

    def recorded(self) -> dict[str, Any]:
        """What the node keeps of it: the name, whether it writes a live trace, and how
        often it samples it."""
        recorded: dict[str, Any] = {"name": self.name, "live_trace": self.live_trace}
        if self.sample_interval is not None:
            recorded["sample_interval"] = self.sample_interval
        return recorded


@dataclass(frozen=True)
class Panel:
    """A plugin's panel on the overview: its ``title`` and ``rows`` of (name, value), each
    value a plain text or number (shown escaped)."""

    title: str
    rows: list[tuple[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "rows": [[str(k), v] for k, v in self.rows]}


class ProfileLike(Protocol):
    """The profile a hook is handed (``profile_loaded``, the ``daemon_*`` hooks,
    ``notify``): a :class:`veglia.config.profile.Profile`."""

    name: str
    #: The profile's own folder in the configuration folder.
    folder: Path

    def get_option(self, name: str) -> Any:
        """The value of an option (yours too: ``"myplugin.x"``), set or its default."""
        ...

    @property
    def daemon_folder(self) -> Path:
        """Pid, status and log files of this host's daemon of the profile."""
        ...


class ComputerLike(Protocol):
    """The computer a hook is handed (``job_script_wrap``, ``computer_contacted``,
    ``collect_trace``): a :class:`veglia.orm.computers.Computer`."""

    label: str
    hostname: str
    transport_type: str
    scheduler_type: str

    def get_property(self, name: str) -> Any:
        """A computer property (yours too, from ``computer_properties``), or its default."""
        ...


class ProcessNodeLike(Protocol):
    """The process node a hook is handed (``process_show_tables``): a
    :class:`veglia.orm.process_nodes.ProcessNode`, stored."""

    label: str
    process_type: str

    @property
    def pk(self) -> int: ...

    @property
    def uuid(self) -> str: ...

    @property
    def ctime(self) -> datetime | None: ...

    @property
    def process_state(self) -> str | None: ...

    @property
    def exit_status(self) -> int | None: ...

    @property
    def exit_message(self) -> str | None: ...

    @property
    def is_terminated(self) -> bool: ...

    def get_attribute(self, key: str, default: Any = None) -> Any:
        """What the engine or your plugin stored on the node."""
        ...


class CalcJobNodeLike(ProcessNodeLike, Protocol):
    """The calc job's node a hook is handed (``job_script_wrap``, ``job_stopped_beside``,
    ``collect_trace``, ``trace_updated``, ``trace_ready``): a
    :class:`veglia.orm.process_nodes.CalcJobNode`."""

    @property
    def options(self) -> dict[str, Any]:
        """The job's ``metadata.options``, a plugin's ``calcjob_options`` among them."""
        ...

    @property
    def computer_label(self) -> str | None: ...

    @property
    def remote_workdir(self) -> str | None:
        """The job's work directory on its computer, once uploaded."""
        ...

    @property
    def job_id(self) -> str | None:
        """The scheduler's id of the job, once submitted."""
        ...

    @property
    def scheduler_state(self) -> str | None:
        """The job's state as last polled (a ``JobState`` value: queued, running, done...)."""
        ...

    @property
    def last_job_info(self) -> dict[str, Any] | None:
        """The scheduler's last view of the job (its ``JobInfo`` fields, as a dict)."""
        ...

    @property
    def submitted_at(self) -> float | None:
        """When the job was submitted (epoch seconds)."""
        ...

    @property
    def started_at(self) -> float | None:
        """When a poll first saw the job run (None if none did)."""
        ...

    def set_attribute(self, key: str, value: Any) -> None:
        """Keep something of your plugin's on the node (name it after your plugin)."""
        ...

    def add_log(self, level: str, message: str, **details: Any) -> None:
        """Add a line to the process's log (``veglia process report``)."""
        ...
