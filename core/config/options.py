"""The catalogue of profile options: what each one means, what it accepts, its default.

Each :class:`Option` turns the text a user typed (on the command line, in ``veglia setup``
or in ``veglia config set``) into a value, or raises :class:`InvalidOptionError` with a
message that explains what is allowed. Plugins add options through the
``register_options`` hook.
"""

from __future__ import annotations

from collections.abc import Callable

from veglia.config.values import (
    QUEUE_HELP,
    format_queues,
    parse_boolean,
    parse_duration,
    parse_email,
    parse_email_list,
    parse_log_level,
    parse_non_negative_float,
    parse_positive_int,
    parse_positive_seconds,
    parse_queues,
    parse_size_mb,
    url_with_schemes,
)
from veglia.exceptions import InvalidOptionError
from veglia.plugin_types import Option
from veglia.workdir_root import parse_root_template

__all__ = [
    "Option",
    "get_option",
    "get_options",
    "parse_duration",
    "parse_queues",
    "parse_size_mb",
]


def _installed(group: str) -> Callable[[], tuple[str, ...]]:
    def names() -> tuple[str, ...]:
        # Lazy: entry points are scanned only when an option names them.
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
        parse=url_with_schemes("sqlite", "postgresql", allow_empty=True),
        setup=True,
        hint="empty for SQLite in the profile, or postgresql://user@host:port/db",
        needs_restart=True,
        password_option="storage.password",
    ),
    Option(
        "storage.password",
        "Password of the database user, kept in the secrets file.",
        default="",
        secret=True,
        setup=True,
        hint="empty when the database needs none",
        needs_restart=True,
    ),
    Option(
        "storage.repository",
        "Where file contents are kept: 'folder' (the profile's repository folder) or "
        "'database' (in the database, for daemons on several hosts that share the database "
        "but not a folder). Blobs written before a switch to 'database' are still read from "
        "the folder.",
        default="folder",
        choices=("folder", "database"),
        needs_restart=True,
    ),
    Option(
        "broker.url",
        "RabbitMQ URL for multi-worker daemons, amqp://user@host:5672/vhost. Empty: no "
        "broker; jobs still run, with a single-process daemon.",
        default="",
        parse=url_with_schemes("amqp", "amqps", allow_empty=True),
        setup=True,
        hint="amqp://guest@127.0.0.1:5672/ or empty for no broker",
        needs_restart=True,
        password_option="broker.password",
    ),
    Option(
        "broker.password",
        "Password of the broker user, kept in the secrets file.",
        default="",
        secret=True,
        setup=True,
        hint="empty when the URL's user needs none",
        needs_restart=True,
    ),
    Option(
        "user.email",
        "E-mail address that identifies you as the owner of the jobs you run.",
        default="",
        parse=parse_email,
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
        hint=QUEUE_HELP,
    ),
    Option(
        "workdir.root",
        "Root folder of job working directories on computers: '{home}' is replaced by the "
        "remote home folder and '{username}' by the remote user name. It must belong to "
        "you and be writable by nobody else (veglia checks).",
        default="{home}/veglia-work",
        parse=parse_root_template,
        setup=True,
        hint="an absolute path or {home}/...; checked as the first job would check it",
    ),
    Option(
        "jobs.max_per_user",
        "Most jobs one user may have queued or running across all queues of a computer.",
        default=1000,
        parse=parse_positive_int,
        setup=True,
        hint="a whole number > 0",
    ),
    Option(
        "notify.email",
        "E-mail addresses, separated by commas, told about finished pipelines and errors "
        "needing a person. Empty: no e-mail.",
        default="",
        parse=parse_email_list,
        setup=True,
        hint="name@example.org, several separated by commas, or empty",
    ),
    Option(
        "archive.max_data_size",
        "Largest rows (data.json) `veglia archive import` unpacks, in MB (or with K, M, G, "
        "T): they are read a row at a time, so this bounds the import's time, not its memory.",
        default=256,
        parse=parse_size_mb,
        hint="a size such as 256M or 1G",
    ),
    Option(
        "archive.max_row_size",
        "Largest row of data.json (a node with its attributes, a log message), and longest "
        "text in it, `veglia archive import` takes, in MB (or with K, M, G): an import holds "
        "a few rows at a time, so this bounds its memory.",
        default=16,
        parse=parse_size_mb,
        hint="a size such as 16M or 64M",
    ),
    Option(
        "archive.max_size",
        "Most `veglia archive import` unpacks from one archive in all (rows and files), in "
        "MB (or with K, M, G, T).",
        default=64 * 1024,
        parse=parse_size_mb,
        hint="a size such as 64G",
    ),
    Option(
        "archive.max_ratio",
        "Most times its compressed size an archive entry past 1 MiB may unpack to; past "
        "it, `veglia archive import` refuses the archive as a zip bomb.",
        default=100,
        parse=parse_positive_int,
        hint="a whole number > 0",
    ),
    Option(
        "logging.level",
        "Lowest level of messages written to the daemon log and node logs.",
        default="REPORT",
        parse=parse_log_level,
    ),
    Option(
        "transport.safe_interval",
        "Minimum seconds between two connection opens to the same computer.",
        default=1.0,
        parse=parse_non_negative_float,
    ),
    Option(
        "transport.retry_initial_interval",
        "Seconds before the first retry of a failed transport task; doubles each retry.",
        default=20.0,
        parse=parse_non_negative_float,
    ),
    Option(
        "transport.retry_attempts",
        "Attempts of a transport task before its process is paused with the reason.",
        default=5,
        parse=parse_positive_int,
    ),
    Option(
        "transport.max_command_output",
        "The most veglia reads of a command's stdout, and of its stderr, on a computer "
        "(scheduler listings such as squeue, qstat and sacct, submissions, copies), in MB: a "
        "command that prints more is stopped, and the task fails saying so, rather than "
        "hold its output in the daemon's memory.",
        default=64,
        parse=parse_size_mb,
        hint="a size: 64M, 1G",
        needs_restart=True,
    ),
    Option(
        "engine.poll_interval",
        "Seconds between two scheduler queries for one computer.",
        default=5.0,
        parse=parse_non_negative_float,
    ),
    Option(
        "pipeline.poll_interval",
        "Seconds between two looks at the data source of each enabled pipeline setup (by the "
        "daemon), for new or changed elements to start runs for.",
        default=60.0,
        parse=parse_positive_seconds,
    ),
    Option(
        "daemon.worker_prefetch",
        "Process tasks one daemon worker takes from the broker before earlier ones have "
        "ended or gone to wait dehydrated (its broker prefetch). Not a cap on the processes "
        "a worker holds: those waiting on a scheduler or on their children are dehydrated "
        "and do not count.",
        default=1000,
        parse=parse_positive_int,
        needs_restart=True,
    ),
    Option(
        "daemon.dehydrate",
        "Keep waiting processes (a job waiting on its scheduler, a workflow waiting on its "
        "children, a paused process) in the database rather than in a worker's memory, waking "
        "them when something happens to them. Off: every process a worker holds stays in its "
        "memory.",
        default=True,
        parse=parse_boolean,
        needs_restart=True,
    ),
    Option(
        "daemon.lease_timeout",
        "Seconds after which a worker that stopped renewing its lease on a process (killed, "
        "cut off, frozen) loses it, and another worker may take the process over.",
        default=30.0,
        parse=parse_non_negative_float,
        needs_restart=True,
    ),
    Option(
        "monitors.allow_import_path",
        "Accept monitors given as 'package.module:function' rather than an entry point "
        "(handy in a notebook; the module's source hash is recorded on the job).",
        default=False,
        parse=parse_boolean,
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
        parse=parse_positive_int,
        hint="a whole number > 0",
    ),
    Option(
        "caching.enabled",
        "Reuse the outputs of an identical finished job instead of running it again.",
        default=False,
        parse=parse_boolean,
    ),
)


_catalogue: tuple[object, dict[str, Option]] | None = None


def get_options() -> dict[str, Option]:
    """Every option, built-in and from plugins, by name (collected once per plugin manager)."""
    global _catalogue
    # Lazy: config sits below the plugin manager (which reads options).
    from veglia.plugin_manager import gather_named, get_plugin_manager

    manager = get_plugin_manager()
    if _catalogue is None or _catalogue[0] is not manager:
        options = {option.name: option for option in BUILTIN_OPTIONS}
        for _, option in gather_named("register_options", Option, "Option", options):
            options[option.name] = option
        _catalogue = (manager, options)
    return _catalogue[1]


#: Options of earlier releases (and of aiida-core), with what replaced them.
GONE_OPTIONS = {
    "daemon.worker_process_slots": (
        "a worker no longer caps the processes it holds (waiting ones are dehydrated); "
        "its broker prefetch is `daemon.worker_prefetch`."
    ),
}


def get_option(name: str) -> Option:
    """The option called ``name``; the error suggests close names."""
    import difflib

    options = get_options()
    if name in GONE_OPTIONS:
        raise InvalidOptionError(f"Option {name!r} is gone: {GONE_OPTIONS[name]}")
    if name not in options:
        close = difflib.get_close_matches(name, options, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else " See `veglia config list`."
        raise InvalidOptionError(f"Unknown option {name!r}.{hint}")
    return options[name]
