"""The catalogue of profile options: what each one means, what it accepts, its default.

Each :class:`Option` turns the text a user typed (on the command line, in ``veglia setup``
or in ``veglia config set``) into a value, or raises :class:`InvalidOptionError` with a
message that explains what is allowed. Plugins add options through the
``register_options`` hook.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from veglia.exceptions import InvalidOptionError

__all__ = [
    "Option",
    "get_option",
    "get_options",
    "parse_duration",
    "parse_queues",
    "parse_size_mb",
]

_SIZE_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size_mb(text: str) -> int:
    """``"4G"``, ``"512M"``, ``"512"`` (MB) -> megabytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT])?B?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"{text!r} is not a size: write a number with K, M, G or T (4G, 512M)")
    number, unit = float(match.group(1)), (match.group(2) or "M").upper()
    value = int(number * _SIZE_UNITS[unit])
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return value


def parse_duration(text: str) -> int:
    """``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"``, ``"01:30:00"``, ``"45"`` -> seconds."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(:\d{1,2}){1,2}", text):
        parts = [int(p) for p in text.split(":")]
        while len(parts) < 3:
            parts.insert(0, 0)
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    elif re.fullmatch(r"\d+", text):
        seconds = int(text)
    elif re.fullmatch(r"(\d+[smhd])+", text):
        seconds = sum(int(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+)([smhd])", text))
    else:
        raise ValueError(
            f"{text!r} is not a duration: write seconds (3600), units (90s, 30m, 2h, 1d, 1h30m) "
            "or HH:MM:SS"
        )
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


_QUEUE_HELP = (
    "write one queue per item, in order of preference, separated by ';': "
    "NAME[:mem=SIZE][:time=DURATION][:cpus=N], e.g. 'short:mem=4G:time=1h:cpus=8; long:time=2d'"
)


def parse_queues(text: str | list) -> list[dict[str, Any]]:
    """Parse queue definitions (``"short:mem=4G:time=1h; long:time=2d"``) into dicts."""
    if isinstance(text, list):
        return [_check_queue(dict(q)) for q in text]
    queues: list[dict[str, Any]] = []
    for item in (part.strip() for part in str(text).split(";")):
        if not item:
            continue
        name, *limits = (p.strip() for p in item.split(":"))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"queue name {name!r} is not valid; {_QUEUE_HELP}")
        queue: dict[str, Any] = {"name": name}
        for limit in limits:
            key, sep, value = limit.partition("=")
            if not sep:
                raise ValueError(f"{limit!r} in queue {name!r} is not KEY=VALUE; {_QUEUE_HELP}")
            key = key.strip().lower()
            if key == "mem":
                queue["max_memory_mb"] = parse_size_mb(value)
            elif key == "time":
                queue["max_walltime_seconds"] = parse_duration(value)
            elif key == "cpus":
                queue["max_cpus"] = _positive_int(value)
            else:
                raise ValueError(f"unknown queue limit {key!r} (use mem, time or cpus)")
        queues.append(queue)
    names = [q["name"] for q in queues]
    if len(set(names)) != len(names):
        raise ValueError(f"a queue is named twice in {names}")
    return queues


def _check_queue(queue: dict[str, Any]) -> dict[str, Any]:
    if "name" not in queue:
        raise ValueError(f"queue {queue!r} has no name")
    return queue


def format_queues(queues: list[dict[str, Any]]) -> str:
    """The inverse of :func:`parse_queues`, for showing and for prompts' defaults."""
    items = []
    for queue in queues:
        parts = [queue["name"]]
        if "max_memory_mb" in queue:
            parts.append(f"mem={queue['max_memory_mb']}M")
        if "max_walltime_seconds" in queue:
            parts.append(f"time={queue['max_walltime_seconds']}s")
        if "max_cpus" in queue:
            parts.append(f"cpus={queue['max_cpus']}")
        items.append(":".join(parts))
    return "; ".join(items)


def _positive_int(text: Any) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise ValueError(f"{text!r} must be a whole number greater than 0")
    return value


def _non_negative_float(text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if value < 0:
        raise ValueError(f"{text!r} must not be negative")
    return value


_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off"}


def _boolean(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{text!r} is not yes or no (true/false, 1/0, on/off)")


def _email(text: Any) -> str:
    value = str(text).strip()
    if value and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", value):
        raise ValueError(f"{value!r} is not an e-mail address like name@example.org")
    return value


def _url_with_schemes(*schemes: str, allow_empty: bool = False) -> Callable[[Any], str]:
    def parse(text: Any) -> str:
        value = str(text).strip()
        if not value and allow_empty:
            return ""
        scheme = urlsplit(value).scheme.split("+")[0]
        if scheme == "postgres" and "postgresql" in schemes:  # libpq's short form
            value, scheme = "postgresql" + value[len("postgres") :], "postgresql"
        if scheme not in schemes:
            from veglia.config.profile import mask_url

            allowed = ", ".join(f"{s}://..." for s in schemes)
            extra = " (or empty for none)" if allow_empty else ""
            # Masked: a password in a mistyped URL must not end up on screen or in a log.
            raise ValueError(f"{mask_url(value)!r} is not a URL of the form {allowed}{extra}")
        return value

    return parse


def _text(text: Any) -> str:
    return str(text).strip()


def _log_level(text: Any) -> str:
    value = str(text).strip().upper()
    levels = ("DEBUG", "INFO", "REPORT", "WARNING", "ERROR", "CRITICAL")
    if value not in levels:
        raise ValueError(f"{text!r} is not a log level; use one of {', '.join(levels)}")
    return value


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
    parse: Callable[[Any], Any] = _text
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    secret: bool = False
    #: Asked by ``veglia setup`` (site-wide options), in catalogue order.
    setup: bool = False
    #: Shown in prompts to explain the accepted syntax.
    hint: str = ""
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


def _installed(group: str) -> Callable[[], tuple[str, ...]]:
    def names() -> tuple[str, ...]:
        from veglia.entry_points import get_entry_points

        return tuple(ep.name for ep in get_entry_points(group))

    return names


BUILTIN_OPTIONS: tuple[Option, ...] = (
    Option(
        "storage.url",
        "Database URL. Empty means an SQLite file inside the profile folder; "
        "PostgreSQL as postgresql://user@host:5432/dbname (the password goes in "
        "storage.password).",
        default="",
        parse=_url_with_schemes("sqlite", "postgresql", allow_empty=True),
        setup=True,
        hint="empty for SQLite in the profile, or postgresql://user@host:port/db",
    ),
    Option(
        "storage.password",
        "Password of the database user, kept in the secrets file.",
        default="",
        secret=True,
        setup=True,
        hint="empty when the database needs none",
    ),
    Option(
        "storage.repository",
        "Where file contents are kept: 'folder' (the profile's repository folder) or "
        "'database' (in the database, for daemons on several hosts that share the database "
        "but not a folder). Blobs written before a switch to 'database' are still read from "
        "the folder.",
        default="folder",
        choices=("folder", "database"),
    ),
    Option(
        "broker.url",
        "RabbitMQ URL for multi-worker daemons, amqp://user@host:5672/vhost. Empty: no "
        "broker; jobs still run, with a single-process daemon.",
        default="",
        parse=_url_with_schemes("amqp", "amqps", allow_empty=True),
        setup=True,
        hint="amqp://guest@127.0.0.1:5672/ or empty for no broker",
    ),
    Option(
        "broker.password",
        "Password of the broker user, kept in the secrets file.",
        default="",
        secret=True,
        setup=True,
        hint="empty when the URL's user needs none",
    ),
    Option(
        "user.email",
        "E-mail address that identifies you as the owner of the jobs you run.",
        default="",
        parse=_email,
        setup=True,
        hint="name@example.org; empty means <login>@localhost",
    ),
    Option(
        "computer.default",
        "Label of the computer jobs run on when none is given.",
        default="localhost",
        setup=True,
    ),
    Option(
        "scheduler.default",
        "Scheduler plugin of new computers when none is given.",
        default="core.direct",
        choices=_installed("veglia.schedulers"),
        setup=True,
    ),
    Option(
        "scheduler.queues",
        "Queues of the default scheduler in order of preference, with their limits; "
        "used to choose and change queues when a job needs more.",
        default=[],
        parse=parse_queues,
        format=format_queues,
        setup=True,
        hint=_QUEUE_HELP,
    ),
    Option(
        "workdir.root",
        "Root folder of job working directories on computers: '{home}' is replaced by the "
        "remote home folder and '{username}' by the remote user name. It must belong to "
        "you and be writable by nobody else (veglia checks).",
        default="{home}/veglia-work",
        setup=True,
    ),
    Option(
        "jobs.max_per_user",
        "Most jobs one user may have queued or running across all queues of a computer.",
        default=1000,
        parse=_positive_int,
        setup=True,
        hint="a whole number > 0",
    ),
    Option(
        "notify.email",
        "E-mail address told about finished pipelines and errors needing a person. Empty: "
        "no e-mail.",
        default="",
        parse=_email,
        setup=True,
        hint="name@example.org or empty",
    ),
    Option(
        "logging.level",
        "Lowest level of messages written to the daemon log and node logs.",
        default="REPORT",
        parse=_log_level,
    ),
    Option(
        "transport.safe_interval",
        "Minimum seconds between two connection opens to the same computer.",
        default=1.0,
        parse=_non_negative_float,
    ),
    Option(
        "transport.retry_initial_interval",
        "Seconds before the first retry of a failed transport task; doubles each retry.",
        default=20.0,
        parse=_non_negative_float,
    ),
    Option(
        "transport.retry_attempts",
        "Attempts of a transport task before its process is paused with the reason.",
        default=5,
        parse=_positive_int,
    ),
    Option(
        "engine.poll_interval",
        "Seconds between two scheduler queries for one computer.",
        default=5.0,
        parse=_non_negative_float,
    ),
    Option(
        "daemon.worker_process_slots",
        "Most processes one daemon worker runs at once (its broker prefetch).",
        default=1000,
        parse=_positive_int,
    ),
    Option(
        "daemon.lease_timeout",
        "Seconds after which a worker that stopped renewing its lease on a process (killed, "
        "cut off, frozen) loses it, and another worker may take the process over.",
        default=30.0,
        parse=_non_negative_float,
    ),
    Option(
        "monitors.allow_import_path",
        "Accept monitors given as 'package.module:function' rather than an entry point "
        "(handy in a notebook; the module's source hash is recorded on the job).",
        default=False,
        parse=_boolean,
    ),
    Option(
        "resources.right_size",
        "What to do with a job's memory and wall-time requests given the history of similar "
        "jobs (mean + 1 SD of what they used): 'off'; 'warn' when a request is over twice "
        "that; 'lower' such requests to it; 'apply' it to every job.",
        default="warn",
        choices=("off", "warn", "lower", "apply"),
    ),
    Option(
        "restart.max_attempts",
        "Most attempts the restart policy makes at one job before it gives up.",
        default=5,
        parse=_positive_int,
        hint="a whole number > 0",
    ),
    Option(
        "caching.enabled",
        "Reuse the outputs of an identical finished job instead of running it again.",
        default=False,
        parse=_boolean,
    ),
)


_catalogue: tuple[object, dict[str, Option]] | None = None


def get_options() -> dict[str, Option]:
    """Every option, built-in and from plugins, by name (collected once per plugin manager)."""
    global _catalogue
    from veglia.plugin_manager import get_plugin_manager

    manager = get_plugin_manager()
    if _catalogue is None or _catalogue[0] is not manager:
        _catalogue = (manager, _collect_options(manager))
    return _catalogue[1]


def _collect_options(manager: Any) -> dict[str, Option]:
    from veglia.exceptions import ConfigurationError

    options = {option.name: option for option in BUILTIN_OPTIONS}
    origin = dict.fromkeys(options, "veglia")
    for impl in manager.hook.register_options.get_hookimpls():
        for option in impl.function() or []:
            if not isinstance(option, Option):
                raise ConfigurationError(
                    f"Plugin {impl.plugin_name!r} returned {option!r} from register_options; "
                    "it must return veglia.config.options.Option objects."
                )
            if option.name in options:
                raise ConfigurationError(
                    f"Option {option.name!r} of plugin {impl.plugin_name!r} clashes with the "
                    f"one of {origin[option.name]!r}; one of them must rename it."
                )
            options[option.name] = option
            origin[option.name] = impl.plugin_name
    return options


def get_option(name: str) -> Option:
    """The option called ``name``; the error suggests close names."""
    import difflib

    options = get_options()
    if name not in options:
        close = difflib.get_close_matches(name, options, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else " See `veglia config list`."
        raise InvalidOptionError(f"Unknown option {name!r}.{hint}")
    return options[name]
