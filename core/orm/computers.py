"""Computers, how to reach them (authinfo), and the codes installed on them."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, fields
from typing import Any, cast

import sqlalchemy as sa

from veglia.entry_points import CalculationFactory, SchedulerFactory, TransportFactory
from veglia.exceptions import ConfigurationError, NotExistent
from veglia.exceptions import ConfigurationError as _Error
from veglia.manage import get_profile, get_storage
from veglia.orm.users import User, get_default_user
from veglia.plugin_manager import gather_named, get_plugin_manager
from veglia.plugin_types import ComputerProperty
from veglia.row_ids import pk_of
from veglia.storage import models
from veglia.workdir_root import expand_root

__all__ = [
    "Code",
    "Computer",
    "ComputerProperty",
    "load_code",
    "load_computer",
    "plugin_computer_properties",
    "property_defaults",
]

#: The built-in computer properties and their defaults (plugins add theirs through the
#: ``computer_properties`` hook: see :func:`property_defaults`).
COMPUTER_PROPERTIES: dict[str, Any] = {
    # Under the home: a folder in a shared /tmp can be made by another user first. The
    # workdir.root option's default: property_defaults() gives the profile's value.
    "workdir": "{home}/veglia-work",
    "safe_interval": 1.0,
    "minimum_poll_interval": 5.0,
    "mpirun_command": "mpirun -np {tot_num_mpiprocs}",
    "default_mpiprocs_per_machine": 1,
    "prepend_text": "",
    "append_text": "",
    # Queues with their limits, as the scheduler.queues option writes them; empty: ask the
    # scheduler (sinfo), which is what the restart policy uses to move jobs.
    "queues": "",
    # Move a job whose similar jobs took longer than its queue allows to a longer queue.
    "move_jobs": True,
}


_plugin_properties: tuple[object, dict[str, ComputerProperty], dict[str, Any]] | None = None


def _collected() -> tuple[dict[str, ComputerProperty], dict[str, Any]]:
    """The plugins' properties and every default, collected once per plugin manager."""
    global _plugin_properties

    manager = get_plugin_manager()
    if _plugin_properties is None or _plugin_properties[0] is not manager:
        added = _collect_plugin_properties()
        defaults = {**COMPUTER_PROPERTIES, **{name: p.default for name, p in added.items()}}
        _plugin_properties = (manager, added, defaults)
    return _plugin_properties[1], _plugin_properties[2]


def _collect_plugin_properties() -> dict[str, ComputerProperty]:
    # A computer's own fields (and setup's names for them) are not properties either.
    reserved = {f.name for f in fields(Computer)} | {"transport", "scheduler"}
    added: dict[str, ComputerProperty] = {}
    # In pluggy's order (the last registered first): the order `computer setup` asks them in.
    for plugin, prop in gather_named(
        "computer_properties",
        ComputerProperty,
        "Computer property",
        COMPUTER_PROPERTIES,
        first_registered_first=False,
    ):
        if prop.name in reserved:
            raise ConfigurationError(
                f"Computer property {prop.name!r} of plugin {plugin!r} is a field of every "
                "computer; rename it."
            )
        added[prop.name] = prop
    return added


def plugin_computer_properties() -> dict[str, ComputerProperty]:
    """The properties the loaded plugins add, by name, in pluggy's order (the last
    registered first)."""
    return _collected()[0]


def property_defaults() -> dict[str, Any]:
    """Every computer property and its default: the built-in ones, then the plugins'. The
    workdir's is the active profile's ``workdir.root``: where jobs go on a computer that names
    no workdir of its own."""
    return {**_collected()[1], "workdir": get_profile().get_option("workdir.root")}


#: How many changes this Python process made to computers and their authinfos: a cache of
#: stored computers (the runner's, see ``engine.computer_settings``) reads them again after
#: one, so this process's own changes are seen at once (other processes' within its TTL).
_changes = 0


def local_changes() -> int:
    """How many times this Python process changed a computer or how it is reached."""
    return _changes


def _changed() -> None:
    global _changes
    _changes += 1


@dataclass
class Computer:
    """A machine jobs run on: a transport to reach it and a scheduler to run jobs."""

    label: str
    hostname: str
    transport_type: str
    scheduler_type: str
    description: str = ""
    properties: dict[str, Any] = field(default_factory=dict)
    pk: int | None = None
    uuid: str | None = None

    def __post_init__(self) -> None:
        allowed = _collected()[1]  # the names only: no profile needed
        unknown = set(self.properties) - set(allowed)
        if unknown:
            raise ConfigurationError(
                f"Unknown computer properties {', '.join(sorted(unknown))}; allowed: "
                f"{', '.join(allowed)}."
            )

    def get_property(self, name: str) -> Any:
        if name in self.properties:
            return self.properties[name]
        return property_defaults()[name]

    def store(self) -> Computer:
        TransportFactory(self.transport_type)
        SchedulerFactory(self.scheduler_type)
        with get_storage().session() as session:
            if session.scalar(
                sa.select(models.Computer).where(models.Computer.label == self.label)
            ):
                raise ConfigurationError(
                    f"A computer labelled {self.label!r} exists already; pick another label."
                )
            row = models.Computer(
                label=self.label,
                hostname=self.hostname,
                description=self.description,
                transport_type=self.transport_type,
                scheduler_type=self.scheduler_type,
                properties=self.properties,
            )
            session.add(row)
            session.flush()
            self.pk, self.uuid = row.id, row.uuid
        _changed()
        if self.needs_no_configuration:
            self.configure()  # core.local: there is nothing to ask
        return self

    def save(self) -> Computer:
        """Write a stored computer's fields back (`veglia computer set`, `relabel`).

        A new transport drops every user's connection options (they were the old
        transport's); a running daemon reads the new settings within ``computer_settings.TTL``.
        """
        TransportFactory(self.transport_type)
        SchedulerFactory(self.scheduler_type)
        with get_storage().session() as session:
            row = session.get(models.Computer, self.pk)
            if row is None:
                raise NotExistent(f"Computer {self.label!r} (pk {self.pk}) was deleted.")
            taken = session.scalar(
                sa.select(models.Computer.id).where(
                    models.Computer.label == self.label, models.Computer.id != self.pk
                )
            )
            if taken is not None:
                raise ConfigurationError(
                    f"A computer labelled {self.label!r} exists already; pick another label."
                )
            new_transport = row.transport_type != self.transport_type
            row.label, row.hostname, row.description = self.label, self.hostname, self.description
            row.transport_type, row.scheduler_type = self.transport_type, self.scheduler_type
            row.properties = dict(self.properties)
            if new_transport:
                session.execute(
                    sa.delete(models.AuthInfo).where(models.AuthInfo.computer_id == self.pk)
                )
        _changed()
        if new_transport and self.needs_no_configuration:
            self.configure()
        return self

    def delete(self) -> int:
        """Delete the computer with its codes and connection options; how many codes went.

        Refused while a node still points at it (delete those first: `veglia computer
        delete` shows them and does both)."""
        with get_storage().session() as session:
            used = session.scalar(
                sa.select(sa.func.count(models.Node.id)).where(models.Node.computer_id == self.pk)
            )
            if used:
                raise ConfigurationError(
                    f"Computer {self.label!r} is used by {used} nodes; delete them first "
                    f"(`veglia computer delete {self.label}` shows and deletes them)."
                )
            # A DML statement's result is a CursorResult (Session.execute says Result).
            deleted = cast(
                "sa.CursorResult[Any]",
                session.execute(sa.delete(models.Code).where(models.Code.computer_id == self.pk)),
            )
            codes = deleted.rowcount
            session.execute(
                sa.delete(models.AuthInfo).where(models.AuthInfo.computer_id == self.pk)
            )
            session.execute(sa.delete(models.Computer).where(models.Computer.id == self.pk))
        _changed()
        return int(codes or 0)

    @classmethod
    def _from_row(cls, row: models.Computer) -> Computer:
        computer = cls(
            label=row.label,
            hostname=row.hostname,
            transport_type=row.transport_type,
            scheduler_type=row.scheduler_type,
            description=row.description,
            pk=row.id,
            uuid=row.uuid,
        )
        # Stored, so once allowed: a property of a plugin no longer loaded is kept, unused.
        computer.properties = dict(row.properties or {})
        return computer

    @classmethod
    def list(cls) -> list[Computer]:
        with get_storage().session() as session:
            rows = session.scalars(sa.select(models.Computer).order_by(models.Computer.id))
            return [cls._from_row(row) for row in rows]

    # -- authinfo ------------------------------------------------------------------------
    def _authinfo(self, session: Any, user_pk: int) -> models.AuthInfo | None:
        found: models.AuthInfo | None = session.scalar(
            sa.select(models.AuthInfo).where(
                models.AuthInfo.user_id == user_pk, models.AuthInfo.computer_id == self.pk
            )
        )
        return found

    def configure(self, **auth_params: Any) -> None:
        """Store how the default user connects (validated against the transport's options)."""
        TransportFactory(self.transport_type)(self.hostname, **auth_params)
        user = get_default_user()
        with get_storage().session() as session:
            row = self._authinfo(session, user.pk)
            if row is None:
                session.add(
                    models.AuthInfo(user_id=user.pk, computer_id=self.pk, auth_params=auth_params)
                )
            else:
                row.auth_params = auth_params
        _changed()

    @property
    def needs_no_configuration(self) -> bool:
        """Its transport takes no connection options (``core.local``): configured when
        stored, and when first used if it was stored before that rule."""
        return not TransportFactory(self.transport_type).auth_options

    def is_configured(self) -> bool:
        """Whether the default user configured it (`veglia computer configure`)."""
        user = get_default_user()
        with get_storage().session() as session:
            return self._authinfo(session, user.pk) is not None

    def is_enabled(self, user: User | None = None) -> bool:
        """Whether ``user`` (default: the profile's) may submit jobs to it: `veglia computer
        disable` stops that. Not configured for the user counts as enabled (configuring is
        asked for first)."""
        user = user or get_default_user()
        with get_storage().session() as session:
            row = self._authinfo(session, user.pk)
            return row is None or bool(row.enabled)

    def set_enabled(self, enabled: bool, user: User | None = None) -> None:
        """Let ``user`` (default: the profile's) submit jobs to it, or stop that; jobs
        already submitted go on. Refused when the user has not configured it."""
        user = user or get_default_user()
        default = user.pk == get_default_user().pk
        if default and self.needs_no_configuration and not self.is_configured():
            self.configure()  # core.local, stored before it was configured when stored
        with get_storage().session() as session:
            row = self._authinfo(session, user.pk)
            if row is None:
                raise ConfigurationError(
                    f"Computer {self.label!r} is not configured for {user.email}, so there is "
                    f"nothing to {'enable' if enabled else 'disable'}: that user runs "
                    f"`veglia computer configure {self.label}` first."
                )
            row.enabled = enabled
        _changed()

    def get_auth_params(self) -> dict[str, Any]:
        user = get_default_user()
        with get_storage().session() as session:
            row = self._authinfo(session, user.pk)
        if row is None:
            raise ConfigurationError(
                f"Computer {self.label!r} is not configured for {user.email}. Run "
                f"`veglia computer configure {self.label}`."
            )
        return dict(row.auth_params or {})

    def get_transport(self) -> Any:
        """A new (closed) transport to this computer with the user's parameters, reading no
        more of a command's output than the profile's ``transport.max_command_output``."""
        transport = TransportFactory(self.transport_type)(self.hostname, **self.get_auth_params())
        transport.max_output = int(get_profile().get_option("transport.max_command_output")) << 20
        return transport

    def get_scheduler(self) -> Any:
        return SchedulerFactory(self.scheduler_type)()

    def get_workdir(self, username: str, home: str = "") -> str:
        """The root of this computer's job folders for that user (``{username}`` and
        ``{home}`` replaced)."""

        return expand_root(self.get_property("workdir"), username, home)

    def job_workdir(self, root: str, uuid: str) -> str:
        """Where a job's files go under ``root``: sharded by UUID so no folder gets huge."""
        return posixpath.join(root, uuid[:2], uuid[2:4], uuid[4:])

    def job_workdir_parts(self, workdir: str) -> tuple[str, str]:
        """The root of a job's folder made by :meth:`job_workdir`, and the part below the
        root veglia made (``ab/cd/efgh...``), which the job could replace."""
        root, *made = posixpath.normpath(workdir).rsplit("/", 3)
        return root or "/", "/".join(made)


def load_computer(label: str | int) -> Computer:
    """The computer of this label (or pk); :class:`~veglia.exceptions.NotExistent`, naming
    the computers there are, if none."""
    with get_storage().session() as session:
        if isinstance(label, int) or str(label).isdigit():
            pk = pk_of(label)
            row = None if pk is None else session.get(models.Computer, pk)
        else:
            row = session.scalar(sa.select(models.Computer).where(models.Computer.label == label))
    if row is None:
        known = ", ".join(c.label for c in Computer.list()) or "none"
        raise NotExistent(
            f"No computer {label!r} (computers: {known}). Create one with `veglia computer setup`."
        )
    return Computer._from_row(row)


@dataclass
class Code:
    """An executable on a computer."""

    label: str
    computer: Computer
    executable: str
    default_calc_job_plugin: str | None = None
    description: str = ""
    prepend_text: str = ""
    append_text: str = ""
    #: Left out of `veglia code list` unless asked (`veglia code hide`), as AiiDA's.
    hidden: bool = False
    pk: int | None = None
    uuid: str | None = None

    @property
    def full_label(self) -> str:
        return f"{self.label}@{self.computer.label}"

    def store(self) -> Code:
        with get_storage().session() as session:
            exists = session.scalar(
                sa.select(models.Code).where(
                    models.Code.label == self.label, models.Code.computer_id == self.computer.pk
                )
            )
            if exists:
                raise ConfigurationError(f"Code {self.full_label!r} exists already.")
            row = models.Code(
                label=self.label,
                computer_id=self.computer.pk,
                executable=self.executable,
                default_calc_job_plugin=self.default_calc_job_plugin,
                description=self.description,
                prepend_text=self.prepend_text,
                append_text=self.append_text,
                hidden=self.hidden,
            )
            session.add(row)
            session.flush()
            self.pk, self.uuid = row.id, row.uuid
        return self

    def set_hidden(self, hidden: bool) -> None:
        """Hide the stored code from `veglia code list` (or show it again); it still runs."""
        with get_storage().session() as session:
            row = session.get(models.Code, self.pk)
            if row is None:
                raise NotExistent(f"Code {self.full_label!r} (pk {self.pk}) was deleted.")
            row.hidden = hidden
        self.hidden = hidden

    def delete(self) -> None:
        """Delete the stored code. Jobs that ran with it keep their record of it (label,
        executable); `veglia code delete` first refuses while one has not ended."""
        with get_storage().session() as session:
            session.execute(sa.delete(models.Code).where(models.Code.id == self.pk))

    @classmethod
    def _from_row(cls, row: models.Code, computer: Computer) -> Code:
        return cls(
            label=row.label,
            computer=computer,
            executable=row.executable,
            default_calc_job_plugin=row.default_calc_job_plugin,
            description=row.description,
            prepend_text=row.prepend_text,
            append_text=row.append_text,
            hidden=row.hidden,
            pk=row.id,
            uuid=row.uuid,
        )

    @classmethod
    def list(cls) -> list[Code]:
        computers = {c.pk: c for c in Computer.list()}
        with get_storage().session() as session:
            rows = session.scalars(sa.select(models.Code).order_by(models.Code.id))
            return [cls._from_row(row, computers[row.computer_id]) for row in rows]

    def get_builder(self) -> Any:
        """A builder of the code's default calculation with ``code`` already set."""

        if not self.default_calc_job_plugin:
            raise _Error(f"Code {self.full_label!r} has no default calculation plugin.")
        builder = CalculationFactory(self.default_calc_job_plugin).get_builder()
        builder.code = self
        return builder


def load_code(identifier: str | int) -> Code:
    """A code by pk, or by ``label@computer`` (``label`` alone when it is unique)."""
    codes = Code.list()
    if isinstance(identifier, int) or str(identifier).isdigit():
        matches = [c for c in codes if c.pk == int(identifier)]
    elif "@" in str(identifier):
        matches = [c for c in codes if c.full_label == identifier]
    else:
        matches = [c for c in codes if c.label == identifier]
    if len(matches) != 1:
        known = ", ".join(c.full_label for c in codes) or "none"
        what = "More than one code is" if matches else "No code is"
        raise NotExistent(f"{what} called {identifier!r} (codes: {known}).")
    return matches[0]
