"""Every exception veglia raises on purpose, in one tree.

Callers catch :class:`VegliaError` to handle anything veglia reports; the CLI shows such an
error as one line (its ``str``) and exits with its ``exit_code``, so each message says what
went wrong and what to do about it. :class:`CliExit` lists every exit code of the CLI
(docs/cli.md shows the same table; a test keeps them equal).

    VegliaError
    ├── ConfigurationError          a config file or option is wrong
    │   ├── InvalidOptionError      an option name or value is not allowed
    │   └── ProfileNotFoundError    no profile of that name (or none at all)
    ├── StorageError                the database or the file repository failed
    │   ├── StorageUnavailable      the database does not answer (it is down or unreachable)
    │   ├── SchemaOutdatedError     the database schema is older than this release
    │   ├── SchemaNewerError        the database was migrated by a newer release
    │   ├── NotExistent             no row/node/blob for the given identifier
    │   │   └── WrongNodeTypeError  the node is not of the kind asked for (not a process)
    │   ├── ModificationNotAllowed  a stored node's content cannot change
    │   └── RepositoryIntegrityError a stored blob does not match its recorded hash
    ├── InputValidationError        an input does not fit its port
    ├── DataSourceError             a data source's settings are wrong, or it cannot be listed
    ├── PipelineSetupError          a pipeline setup does not fit its process, source or computer
    ├── MonitorError                a monitor attached to a job is wrong
    │   └── MonitorTimeout          an async monitor's call was cancelled at its timeout
    ├── ControlError                a kill, pause or play request could not be carried out
    ├── ProcessActiveError          a process must end first (deleting it, cleaning its work dir)
    ├── ArchiveError                an archive file cannot be written or read (corrupt, unknown)
    │   └── ArchiveRowTooBig        a row of its data.json is past the size allowed
    ├── ScriptError                 a script for `veglia run` cannot be read
    ├── InvalidLinkError            a link the provenance rules forbid (its ends' kinds)
    ├── InvalidKeyError             an attribute or extra name the database cannot hold
    ├── DaemonError                 the daemon could not be started or stopped
    ├── WatchTimeout                `process watch --timeout` ran out
    ├── VerdiFormError              a verdi form veglia writes otherwise (wrong usage)
    ├── SchedulerError              a scheduler command failed or printed garbage
    │   └── SchedulerSubmitError    the batch system refused a submission
    ├── TransportTaskFailed         a job's transport task failed on every attempt
    ├── TraceFileUnusable           a job's trace file is missing, a link, too big or malformed
    ├── PluginError                 entry points and plugins
    │   ├── MissingEntryPointError  no plugin of that name in a group
    │   ├── EntryPointLoadError     the plugin is registered but fails to import
    │   ├── InvalidPluginError      it imports but is not the kind of object expected
    │   └── ProcessClassError       a process's class cannot be loaded where it must run
    ├── UnsafePathError             a file name or pattern would reach outside its folder
    ├── UnsafeWorkdirError          another user controls a computer's work dir
    ├── BrokerError                 the message broker is unreachable or refused us
    └── TransportError              a transport operation failed
        ├── TransportConnectionError could not open or keep a connection
        ├── TransportTimeoutError   a remote command ran past its timeout
        ├── CommandOutputTooLarge   a command printed more than veglia reads of it
        └── HostKeyError            the remote host key is unknown or has changed

    StepAbandoned (a BaseException)  the database went away during a process step
    ProcessDehydrated (a BaseException) a waiting process leaves memory until something happens
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ArchiveError",
    "ArchiveRowTooBig",
    "BrokerError",
    "CliExit",
    "CommandOutputTooLarge",
    "ConfigurationError",
    "ControlError",
    "DaemonError",
    "DataSourceError",
    "EntryPointLoadError",
    "HostKeyError",
    "InputValidationError",
    "InvalidKeyError",
    "InvalidOptionError",
    "InvalidPluginError",
    "MissingEntryPointError",
    "ModificationNotAllowed",
    "MonitorError",
    "MonitorTimeout",
    "NotExistent",
    "PipelineSetupError",
    "PluginError",
    "ProcessActiveError",
    "ProcessClassError",
    "ProcessDehydrated",
    "ProfileNotFoundError",
    "RepositoryIntegrityError",
    "SchedulerError",
    "SchedulerSubmitError",
    "SchemaNewerError",
    "SchemaOutdatedError",
    "ScriptError",
    "StepAbandoned",
    "StorageError",
    "StorageUnavailable",
    "TraceFileUnusable",
    "TransportConnectionError",
    "TransportError",
    "TransportTaskFailed",
    "TransportTimeoutError",
    "UnsafePathError",
    "UnsafeWorkdirError",
    "VegliaError",
    "VerdiFormError",
    "WatchTimeout",
    "WrongNodeTypeError",
]


class CliExit(IntEnum):
    """The exit codes of the ``veglia`` command, one per kind of outcome."""

    #: It did what was asked.
    OK = 0
    #: A check failed (``status``, ``verify``, a kill that did not happen), or an
    #: unexpected error.
    FAILED = 1
    #: Wrong usage: an unknown option, a missing argument, a value of the wrong type.
    USAGE = 2
    #: The configuration, a profile or an option is wrong.
    CONFIGURATION = 3
    #: Storage: no such node (or not one of the kind asked for: not a process, not a calc
    #: job), group, computer or code; the database or the file repository failed.
    STORAGE = 4
    #: A plugin is missing or broken.
    PLUGIN = 5
    #: The message broker cannot be reached.
    BROKER = 6
    #: A transport (SSH, local) operation failed.
    TRANSPORT = 7
    #: A scheduler command failed.
    SCHEDULER = 8
    #: Invalid input (a port, a monitor, a damaged archive).
    INVALID_INPUT = 9
    #: The daemon could not be started or stopped.
    DAEMON = 10
    #: ``process watch --timeout`` ran out.
    TIMEOUT = 124
    #: Interrupted (Ctrl-C).
    INTERRUPTED = 130


class VegliaError(Exception):
    """Base class of every error veglia raises on purpose."""

    #: The process exit code the CLI uses when this error ends a command.
    exit_code: int = CliExit.FAILED


class ConfigurationError(VegliaError):
    """The configuration folder, a profile or an option is wrong."""

    exit_code = CliExit.CONFIGURATION


class InvalidOptionError(ConfigurationError):
    """An option name is unknown or its value is not allowed."""


class ProfileNotFoundError(ConfigurationError):
    """There is no profile with the requested name, or no profile at all."""


class StorageError(VegliaError):
    """The database or the file repository failed."""

    exit_code = CliExit.STORAGE


class StorageUnavailable(StorageError):
    """The database does not answer: it is down, restarting, or unreachable from here."""


class SchemaOutdatedError(StorageError):
    """The database schema is older than the one this release of veglia needs."""


class SchemaNewerError(StorageError):
    """The database was migrated by a newer release of veglia than this one."""


class NotExistent(StorageError):
    """No row, node or blob exists for the identifier that was asked for."""


class WrongNodeTypeError(NotExistent):
    """The node exists, but is not of the kind the command works on (a process, a calc
    job): to that command there is no such process, and it exits as for a missing node."""


class ModificationNotAllowed(StorageError):
    """A stored node's content cannot change: it is part of the provenance."""


class RepositoryIntegrityError(StorageError):
    """A blob in the file repository does not match the hash recorded for it."""


class PluginError(VegliaError):
    """An entry point or a pluggy plugin could not be used."""

    exit_code = CliExit.PLUGIN


class MissingEntryPointError(PluginError):
    """No plugin of the requested name is registered in an entry-point group."""


class EntryPointLoadError(PluginError):
    """A plugin is registered but importing it failed."""


class InvalidPluginError(PluginError):
    """A plugin imports, but is not the kind of object its group expects."""


class ProcessClassError(PluginError):
    """A class a checkpoint names cannot be loaded where the process must run (not
    importable there, or no process class): a class defined in a script's ``__main__``,
    a module only the submitter's folder holds, a package not installed for the daemon."""


class InputValidationError(VegliaError):
    """An input does not fit the port it is given to."""

    exit_code = CliExit.INVALID_INPUT


class DataSourceError(VegliaError):
    """A data source (``veglia.datasources``) cannot be used: a setting is missing or wrong,
    or what it lists cannot be read (no such folder, a CSV without its path column)."""

    exit_code = CliExit.INVALID_INPUT


class PipelineSetupError(VegliaError):
    """A pipeline setup cannot be stored as given: its process, a fixed input, an option, its
    data source or the input that takes each element does not fit (the message says which)."""

    exit_code = CliExit.INVALID_INPUT


class MonitorError(VegliaError):
    """A monitor attached to a job is wrong (unknown, wrong arguments, bad interval)."""

    exit_code = CliExit.INVALID_INPUT


class MonitorTimeout(MonitorError):
    """An ``async def`` monitor's call was cancelled at its timeout (a fault of the monitor,
    counted on the job)."""


class ControlError(VegliaError):
    """A kill, pause or play request could not be carried out."""


class ProcessActiveError(VegliaError):
    """The process has not ended, and what was asked needs it to (deleting it or what it
    used, cleaning its work dir, putting it in an archive)."""


class ArchiveError(VegliaError):
    """An archive file cannot be written, or is not a veglia archive, or is damaged."""

    exit_code = CliExit.INVALID_INPUT


class ArchiveRowTooBig(ArchiveError):
    """A row of an archive's ``data.json`` (or a text in it) is past the size allowed; the
    reader says which archive and which option raises the limit."""

    def __init__(self, section: str, number: int, limit: int) -> None:
        super().__init__(f"row {number} of {section} in data.json is past {limit} bytes")
        self.section, self.number, self.limit = section, number, limit


class ScriptError(VegliaError):
    """A Python script given to ``veglia run`` is missing or cannot be read (what it raises
    once it runs is the script's own: shown with its traceback)."""

    exit_code = CliExit.INVALID_INPUT


class InvalidKeyError(VegliaError, ValueError):
    """An attribute or extra name the database cannot hold (empty, or with quotes or
    backslashes)."""

    exit_code = CliExit.INVALID_INPUT


class InvalidLinkError(VegliaError, ValueError):
    """A link that AiiDA's link rules forbid (its ends' kinds, a second creator or caller)."""

    exit_code = CliExit.INVALID_INPUT


class DaemonError(VegliaError):
    """The daemon could not be started or stopped."""

    exit_code = CliExit.DAEMON


class WatchTimeout(VegliaError):
    """``veglia process watch --timeout`` ran out before the process ended."""

    exit_code = CliExit.TIMEOUT


class VerdiFormError(VegliaError):
    """A command written as AiiDA's ``verdi`` writes it, where veglia's form differs: the
    message is the one line "veglia writes this as: veglia ...". Wrong usage, as click's own."""

    exit_code = CliExit.USAGE


class SchedulerError(VegliaError):
    """A scheduler command failed or printed what we cannot parse."""

    exit_code = CliExit.SCHEDULER


class SchedulerSubmitError(SchedulerError):
    """The batch system refused a submission.

    ``permanent`` is True when submitting the same script again cannot work (an unknown
    queue or account, a request the queue does not allow): the engine then fails the job
    at once instead of retrying.
    """

    def __init__(self, message: str, *, permanent: bool, resource_request: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent
        #: The queue cannot give what the job asks for (time, memory, nodes): another queue
        #: or a smaller request may work, which a restart policy can choose.
        self.resource_request = resource_request


class TransportTaskFailed(VegliaError):
    """A job's transport task (upload, submit, update, retrieve) failed on every attempt:
    the engine pauses the job for the outage rather than ending it."""


class UnsafePathError(VegliaError, ValueError):
    """A file name or pattern from a job or its inputs is absolute or climbs out (``..``)."""


class UnsafeWorkdirError(VegliaError):
    """Another user owns, or may write to, a computer's work dir or a folder above it."""


class BrokerError(VegliaError):
    """The message broker cannot be reached or refused the connection."""

    exit_code = CliExit.BROKER


class TraceFileUnusable(VegliaError):
    """A job's trace file (a plugin's, the sampler's) is missing or cannot be used: a link, over
    the size cap, not JSON; the message says which. Readers log it and go on."""


class TransportError(VegliaError):
    """A transport operation (file copy, remote command, connection) failed."""

    exit_code = CliExit.TRANSPORT


class TransportConnectionError(TransportError):
    """A connection to the computer could not be opened or was lost."""


class TransportTimeoutError(TransportError):
    """A command run through the transport did not finish within its timeout."""


class CommandOutputTooLarge(TransportError):
    """A command run through the transport printed more than ``transport.max_command_output``
    on its stdout or stderr: veglia stopped it rather than hold its output in memory."""


class HostKeyError(TransportConnectionError):
    """The remote host's key is unknown or does not match the known one."""


class StepAbandoned(BaseException):
    """The database did not answer during a step of a process.

    Not an error of the process, so it must not end it: plumpy turns every ``Exception`` a
    step raises into the EXCEPTED state, and this is a ``BaseException`` to pass by that.
    The daemon worker drops the process as it stands and continues it from its last
    checkpoint once the database answers, as if its worker had been killed.
    """

    def __init__(self, pk: int | None) -> None:
        super().__init__(
            f"The database did not answer during a step of process {pk}; it goes on from its "
            "last checkpoint once the database answers."
        )
        self.pk = pk


class ProcessDehydrated(BaseException):
    """A waiting process leaves its worker's memory until something happens to it.

    Not an error: a calc job waiting on its scheduler, or a workflow waiting on its
    children, raises it between two polls so that the daemon worker keeps only ``sleep``
    (what the batched poll needs, a few hundred bytes) and the process's checkpoint stays
    its state. Like :class:`StepAbandoned` it is a ``BaseException`` so that plumpy does not
    turn it into the EXCEPTED state. See ``veglia.engine.dehydration``.
    """

    def __init__(self, sleep: object) -> None:
        super().__init__("the process waits dehydrated")
        self.sleep = sleep
