"""The whole plugin surface of veglia: every hook, declared once, documented where it is.

A plugin is a module (or object) with functions marked ``@hookimpl`` whose names match the
hooks below. Register it under the ``veglia.plugins`` entry-point group::

    [project.entry-points."veglia.plugins"]
    my_plugin = "my_package.veglia_plugin"

Hook arguments are passed by keyword; an implementation may accept any subset of them.
``docs/hooks.md`` is checked against these docstrings by the test suite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

# Names for type checkers only: the catalogue stays at the bottom of the import graph
# (veglia.plugin_manager loads it, and the configuration, the ORM and the engine ask plugins
# through that manager). What a hook gets from higher up is a Protocol of veglia.plugin_types;
# the classes named here import no part of veglia that reaches the plugin manager
# (tests/test_boundaries.py fails on a circle).
if TYPE_CHECKING:
    from pathlib import Path

    import click
    from sqlalchemy import Select

    from veglia.engine.calcjob.trace import TraceRecord
    from veglia.plugin_types import (
        CalcJobNodeLike,
        CalcJobOption,
        ComputerLike,
        ComputerProperty,
        JobScriptWrap,
        Option,
        Panel,
        ProcessNodeLike,
        ProfileLike,
    )
    from veglia.storage.plugin_schema import PluginMigrations
    from veglia.transports import Transport

hookspec = pluggy.HookspecMarker("veglia")
hookimpl = pluggy.HookimplMarker("veglia")


@hookspec
def register_options() -> list[Option]:
    """Contribute profile options.

    Called once when the option catalogue is first needed (``veglia config``, ``veglia
    setup``, loading a profile). Return a list of :class:`veglia.plugin_api.Option`.
    Option names should be prefixed with the plugin's own namespace (``myplugin.endpoint``),
    and must not clash with a built-in or another plugin's option: a clash is an error
    that names both plugins. Options marked ``secret=True`` are stored in the profile's
    secrets file (mode 0600) and are never printed. A URL option given
    ``password_option="myplugin.password"`` (a secret option) has a password written into
    the URL moved there; :meth:`veglia.config.profile.Profile.url_with_password` puts it
    back to connect with.
    """


@hookspec
def calcjob_options() -> list[CalcJobOption]:
    """Contribute options to every calc job's ``metadata.options``.

    Called when a calc job's input spec is first built (by a builder, input validation,
    ``veglia process unblock --option``, ...), once per calc-job class. Return a list of
    :class:`veglia.plugin_api.CalcJobOption` (name, type, help, optional validator
    and default); each becomes a ``metadata.options.<name>`` port beside the built-in ones,
    so builders, validation and port help treat it the same. A name must not clash with a
    built-in option or another plugin's: a clash is an error that names both. The value a
    job was given is stored with its other options: read it in your other hooks with
    ``(node.options or {}).get("<name>")``. Without the plugin loaded, the option is
    unknown and a builder refuses it.
    """


@hookspec
def computer_properties() -> list[ComputerProperty]:
    """Contribute computer properties, each with its ``veglia computer setup`` flag.

    Called once, when the computer properties are first needed. Return a list of
    :class:`veglia.plugin_api.ComputerProperty` (name, default, help, optional
    ``parse``); the property is then accepted on a computer, read with
    ``computer.get_property("<name>")`` (its default when not set), shown by ``veglia
    computer show`` and set with ``veglia computer setup --<name>`` (underscores as dashes)
    or its prompt, asked after the built-in ones. A name must not clash with a built-in
    property or another plugin's: a clash is an error that names both. A computer keeps
    the properties of a plugin that is no longer loaded, unused.
    """


@hookspec
def process_show_tables(
    node: ProcessNodeLike,
) -> list[tuple[tuple[str, ...], list[tuple[object, ...]]]]:
    """Add tables to ``veglia process show`` for a process node.

    Called once per process shown, with its node (a ``ProcessNode``; read what your plugin
    stored on it, ``node.get_attribute(...)``). Return a list of ``(headers, rows)`` pairs,
    each a table printed after the process's own properties, in the order the plugins were
    registered; return nothing, or a table without rows, to add none. Keep it to what is
    already stored: no connection to the computer. An exception is shown as a warning and
    does not stop the rest of the output.
    """


@hookspec
def overview_panels() -> list[Panel]:
    """Add panels to the overview (the front page of ``veglia web`` and its ``/api/``).

    Called each time the overview is read (at most once a second, however many people
    watch it; while they watch, when the database changed or every 15 s). Return a list
    of :class:`veglia.plugin_api.Panel` (``title``, ``rows`` of ``(name, value)`` pairs:
    plain text or numbers, shown escaped), or nothing. Keep it to what is stored, read in
    a query or two: no connection to a computer or a service.
    Never put a secret in a panel: whoever may read the overview sees it. An exception
    shows as a panel naming your plugin, and the other panels still show.
    """


@hookspec
def storage_migrations() -> PluginMigrations | list[PluginMigrations]:
    """Own tables in the profile's database, made and changed by Alembic migrations of
    your own.

    Called when a profile's storage is opened, checked or migrated. Return a
    :class:`veglia.plugin_api.PluginMigrations`: a ``name`` for your version table
    (``alembic_version_<name>``), your tables' ``MetaData`` (your tables only; build it
    with ``veglia.storage.tables.NAMING_CONVENTION``), the folder of your migration files
    (plain Alembic revisions: ``revision``, ``down_revision``, ``upgrade()`` with
    ``alembic.op``) and the ``head`` revision they end at. ``veglia storage migrate`` runs
    the core's migrations first, then yours, so a foreign key of yours may refer to a core
    table (``ForeignKey(veglia.storage.tables.nodes.c.id)``). While your tables are
    behind (absent, on a profile made before your plugin was installed), ``veglia status``
    and every command that opens the storage say to run ``veglia storage migrate``. A
    table name that the core or another plugin uses is an error that names both. Test
    that your metadata matches your migrations with
    ``StorageBackend.schema_differences()[<your plugin's entry-point name>] == []``.
    """


@hookspec
def change_stamp_parts() -> list[Select[Any]]:
    """Make the web pages that watch the database notice changes to your tables.

    Called when a page starts watching the database, and once a second while it does.
    Return SQLAlchemy ``select`` statements of one value each on your own tables (the
    newest id, a count of pending rows), cheap to compute: an index or a small table.
    They go into the one statement that stamps the database; when one of their values
    moves, the pages reload what is not node-bound (the overview's panels). An exception
    is logged and leaves your parts out.
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add commands or command groups to the ``veglia`` command line.

    Called once while the CLI is built, with the top-level ``click.Group``. Use
    ``cli.add_command(...)`` or ``@cli.command()``. A plugin must not replace a built-in
    command; adding a sub-command to an existing group is fine.
    """


@hookspec
def profile_loaded(profile: ProfileLike) -> None:
    """React to a profile becoming the active one.

    Called by :func:`veglia.load_profile` after the profile's configuration has been read
    and validated, before any storage is opened. Use it to read the plugin's own options
    (``profile.get_option("myplugin.x")``) and prepare state that depends on them. An
    exception raised here stops the profile from loading and is shown to the user.
    """


@hookspec
def daemon_start_options() -> list[click.Option]:
    """Add options to ``veglia daemon start``, for what a plugin runs beside the daemon.

    Called when ``daemon start`` reads its command line or shows its help. Return a list of
    ``click.Option``, each named after your plugin (``--myplugin-port``) so that no two
    clash. What the user gave (by parameter name; the option's default when not given)
    is kept in the daemon's folder as JSON (so use values JSON can hold), kept by ``daemon
    restart``, and handed to ``daemon_started`` as ``start_options``. Check a value in the
    option's click callback: a wrong one then stops ``daemon start`` with a usage error.
    """


@hookspec
def daemon_started(profile: ProfileLike, start_options: dict[str, Any]) -> None:
    """Start what a plugin runs beside the daemon's workers, once per daemon.

    Called in the daemon's first worker as it starts (the supervisor stays lean and loads
    no plugin code beyond hook modules), and again in the worker that replaces it if it
    dies. ``start_options`` holds the values of the ``daemon_start_options`` the daemon was
    started with (every plugin's, by parameter name; empty for a daemon started before they
    were kept). Start a background thread here (a sender of queued reports, say), as a
    daemon thread; ``daemon_stopping`` is called when the daemon stops. Return at once: the
    worker runs jobs in the same process. An exception is logged and does not stop the
    daemon.
    """


@hookspec
def daemon_status_lines(profile: ProfileLike, start_options: dict[str, Any]) -> list[str]:
    """Add lines to ``veglia daemon status`` (not to its ``--raw`` table).

    Called in the CLI when the daemon runs, after its workers are listed, with the
    ``start_options`` the daemon was started with (as ``daemon_started`` gets them). Return
    lines of text (what your plugin serves beside the daemon, and where, or that it is
    still starting), or nothing. Read what the daemon's worker wrote down for you
    (``profile.daemon_folder`` is private to the user): do not connect anywhere. An
    exception is shown as a warning.
    """


@hookspec
def daemon_stopping(profile: ProfileLike) -> None:
    """Stop what ``daemon_started`` started: the daemon is stopping.

    Called in the daemon's first worker as it stops. Ask your threads to end and return
    quickly: the process exits soon after, and daemon threads with it. An exception is
    logged.
    """


@hookspec
def job_script_wrap(node: CalcJobNodeLike, computer: ComputerLike) -> JobScriptWrap | None:
    """Wrap the commands of a calc job's submit script: start something before them, put a
    program in front of each, stop and summarise after them whatever their exit.

    Called once per job as its script is written, with its node (``node.options`` holds
    its options) and its computer (``computer.get_property(...)`` reads your computer
    properties). Return a :class:`veglia.plugin_api.JobScriptWrap` (``name``, ``before``,
    ``prefix``, ``after``, ``live_trace``), or None to leave this job alone. The first wrap
    (in pluggy's order: ``tryfirst`` puts yours there) is the outermost. ``after`` runs once,
    right after the commands or from a trap when the scheduler signals the job (a cancel, a
    wall-time or memory kill); ``$veglia_exit`` holds the commands' exit status. The text
    runs in the job's own shell on the compute node: use what that shell has (bash builtins,
    coreutils), prefix your functions and variables with your plugin's name, and write your
    files into the work directory (the current directory), named ``_<plugin>...``. The names
    of the wraps applied are kept on the node (attribute ``job_script_wraps``). An exception,
    or a return value of another type, fails the submission with the plugin's name: a job
    half wrapped would not run as asked.
    """


@hookspec
def computer_contacted(computer: ComputerLike, transport: Transport) -> None:
    """Refresh what you keep on a computer for its jobs (the heartbeat that monitors'
    guards read, say): the engine just asked its scheduler about its jobs, or is about to
    submit one there.

    Called once per poll of a computer and user (every ``engine.poll_interval`` seconds or
    more, while jobs run there), not once per job, and before each submission, with the
    ``transport`` open; run one short command at most, and not at every call when less
    often will do. Runs on the connection's thread. An exception is logged and the engine
    goes on.
    """


@hookspec
def job_stopped_beside(node: CalcJobNodeLike, folder: Path) -> dict[str, Any] | None:
    """Say that something beside the job on its computer stopped it (a monitor's guard),
    when no monitor of the engine had.

    Called once per calc job as its retrieved files are parsed, unless a monitor of the
    engine stopped the job; ``folder`` holds those files (a :class:`JobScriptWrap`'s
    ``retrieve`` names files of yours to retrieve). Return ``{"name": the monitor's name,
    "message": why, "time": epoch seconds}`` (and anything else worth keeping) to end the
    process as if that monitor had stopped the job: exit code ``STOPPED_BY_MONITOR``, its
    message, ``process show`` naming it. None otherwise. The first answer wins. An
    exception is logged on the node and the job is judged as if you had said None.
    """


@hookspec
def collect_trace(
    node: CalcJobNodeLike, transport: Transport | None, record: TraceRecord, computer: ComputerLike
) -> None:
    """Add to the trace record of a calc job that has just ended.

    Called once per job, whatever its outcome (finished, failed, killed), after its files
    were retrieved, with ``transport`` open on the job's computer and its ``cwd`` set to the
    job's work directory (``None`` when the job excepted and the computer may not be
    reachable). ``computer`` is the job's computer with its settings as the engine holds
    them (read it rather than loading it again: this runs once per job). Set ``record``'s
    fields (``gpu_metrics``, the measured ``peak_rss``, ``realtime``, ... with
    ``measured_by`` naming your plugin), and put anything else under
    ``record.extras["<your plugin>"]``. Runs on the connection's thread: keep it short, read
    only what you need. An exception is logged on the node and does not stop the job or
    the other plugins.
    """


@hookspec
def trace_updated(node: CalcJobNodeLike, record: TraceRecord) -> None:
    """Receive the trace record of a calc job that is on its way: submitted or running.

    Called when the scheduler took the job (``record.status`` is ``SUBMITTED``) and when a
    poll first sees it running (``RUNNING``, with ``record.start`` set), so reporters can
    show live tasks as Nextflow does. A job that ends between two polls may never be seen
    running; ``trace_ready`` follows in every case. Like ``trace_ready`` it runs in the
    engine's event loop thread: only queue the record here. An exception is logged on the
    node and does not stop the job.
    """


@hookspec
def trace_ready(node: CalcJobNodeLike, record: TraceRecord) -> None:
    """Receive the final trace record of a terminated calc job, to report it.

    Called once when the process reaches a terminal state, with its status, exit and
    times filled in and every ``collect_trace`` contribution on it. Reporters (a plugin that
    sends records to a monitoring service) should only queue the record durably here (it
    runs in the engine's event loop thread, inside the transaction that records the end,
    which on SQLite holds the database's write lock for every worker) and send it
    elsewhere; an exception is logged on the node.
    """


@hookspec
def notify(
    event: str, subject: str, body: str, recipients: list[str], profile: ProfileLike
) -> None:
    """Tell people about something that needs them.

    ``event`` is one of ``process_excepted`` (a process failed in a way no retry fixes),
    ``computer_unreachable`` (a computer could not be reached and its jobs were paused),
    ``computer_back`` (it answers again and those jobs go on), ``workflow_finished`` (a
    pipeline ended), ``pipeline_setup_done`` (a pipeline setup has run every element its
    data source lists), ``restart_gave_up`` (the restart policy stopped resubmitting a job)
    and ``jobs_blocked`` (the scheduler refused jobs for a
    reason no retry fixes); each is sent once per event, not once per poll or per job, and
    new events may be added. ``recipients`` are the addresses of the
    ``notify.email`` option (possibly empty: a channel of your own may not need them).
    Implement it to add a channel (chat, pager); the built-in ``core.email`` plugin sends
    e-mail over SMTP. An exception is logged and does not stop the other channels.
    Called from a running event loop (a daemon worker), the hook runs on a background
    thread, one notification after another, so blocking is allowed but should end: give
    network calls a timeout.
    """


def hook_names() -> list[str]:
    """Names of every hook declared in this module, in declaration order."""
    return [name for name, value in globals().items() if _is_hookspec(value)]


def _is_hookspec(value: Any) -> bool:
    return callable(value) and hasattr(value, "veglia_spec")
