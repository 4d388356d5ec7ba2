"""Pipeline setups: a process run once per element of a data source, by name and version.

A setup binds a workflow or calc job (``process``, an entry point) to fixed ``inputs``,
``options`` (computer, monitors, the calc job's ``metadata.options``) and a data source; each
element of the source goes to the input ``input_port``. Stored setups never change but for
``enabled``: :func:`edit_pipeline_setup` stores the next version, and work started from an
older version keeps reading that one::

    setup = PipelineSetup.from_dict(tomllib.loads(text)).store()   # version 1, checked
    setup = edit_pipeline_setup("align", {"options": {"queue_name": "long"}})  # version 2
    load_pipeline_setup("align", version=1)

``enabled`` belongs to the name: enabling or disabling sets it on every version, and the
newest version of an enabled setup is the one that new work starts from.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from veglia.exceptions import NotExistent, PipelineSetupError
from veglia.manage import get_storage
from veglia.storage import tables

__all__ = [
    "PipelineSetup",
    "edit_pipeline_setup",
    "list_pipeline_setups",
    "load_pipeline_setup",
    "parse_setup_toml",
    "set_pipeline_enabled",
    "setup_toml",
    "toml_value",
]

#: The keys of a setup as a TOML file or dict gives it, at the top level.
TOP_KEYS = (
    "name",
    "description",
    "process",
    "input_port",
    "enabled",
    "max_active",
    "inputs",
    "options",
    "source",
)
#: The keys of its ``[source]`` table.
SOURCE_KEYS = ("entry_point", "computer", "settings")
#: The built-in workflow a setup of several steps runs (``inputs.steps``), by entry point,
#: and its input that takes the element: the table and the intake need nothing more.
CHAIN_PROCESS = "core.chain"
CHAIN_PORT = "files"


def check_name(name: Any) -> str:
    """A setup name: a non-empty word of at most 255 characters, not a number."""
    if (
        not isinstance(name, str)
        or not name
        or any(c.isspace() for c in name)
        or name.isdigit()
        or len(name) > 255
    ):
        raise PipelineSetupError(
            f"Pipeline setup name {name!r} will not do: give a word without spaces, of at most "
            "255 characters and not a number, e.g. name = 'align-reads'."
        )
    return name


def _table(value: Any, what: str, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PipelineSetupError(
            f"Pipeline setup {name}: {what} must be a table of name = value, not {value!r}."
        )
    return copy.deepcopy(dict(value))


@dataclass(frozen=True)
class PipelineSetup:
    """One version of a pipeline setup (unstored until :meth:`store`)."""

    name: str
    process: str
    input_port: str
    source: str
    source_settings: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    #: The computer the source is read on; None: the setup's computer (``options.computer``).
    source_computer: str | None = None
    #: At most this many of its runs at once; None: no cap of its own.
    max_active: int | None = None
    enabled: bool = False
    description: str = ""
    # Set by storage:
    pk: int | None = None
    version: int | None = None
    created: datetime | None = None
    created_by: str | None = None

    @property
    def is_stored(self) -> bool:
        return self.pk is not None

    @property
    def steps(self) -> list[Mapping[str, Any]]:
        """The steps of a setup that runs several one after another (else none)."""
        steps = self.inputs.get("steps") if self.process == CHAIN_PROCESS else None
        return [step for step in steps if isinstance(step, Mapping)] if steps else []

    @property
    def computer(self) -> str | None:
        """The computer the process runs on."""
        return self.options.get("computer")

    def __repr__(self) -> str:
        version = f"v{self.version}" if self.version else "unstored"
        return f"<PipelineSetup {self.name!r} {version}: {self.process} per {self.source}>"

    # -- the TOML/dict form --------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PipelineSetup:
        """A setup from its TOML form (see docs/pipelines.md); unknown keys are refused."""
        if not isinstance(data, Mapping):
            raise PipelineSetupError(f"A pipeline setup is a table of name = value, not {data!r}.")
        name = check_name(data.get("name"))
        unknown = sorted(set(data) - set(TOP_KEYS))
        if unknown:
            raise PipelineSetupError(
                f"Pipeline setup {name}: unknown key {unknown[0]!r}; the keys are: "
                f"{', '.join(TOP_KEYS)}."
            )
        source = _table(data.get("source"), "source", name)
        unknown = sorted(set(source) - set(SOURCE_KEYS))
        if unknown:
            raise PipelineSetupError(
                f"Pipeline setup {name}: unknown key {unknown[0]!r} in the source table; its keys "
                f"are: {', '.join(SOURCE_KEYS)} (the source's own settings go in source.settings)."
            )
        for key, where in (
            ("process", data),
            ("input_port", data),
            ("entry_point", source),
        ):
            value = where.get(key)
            if not isinstance(value, str) or not value:
                shown = key if where is data else f"source.{key}"
                raise PipelineSetupError(
                    f"Pipeline setup {name}: {shown} is missing or not a string; add it, "
                    f"e.g. {_EXAMPLES[key]}."
                )
        max_active = data.get("max_active")
        if max_active is not None and (
            isinstance(max_active, bool) or not isinstance(max_active, int) or max_active < 1
        ):
            raise PipelineSetupError(
                f"Pipeline setup {name}: max_active = {max_active!r} will not do; give a whole "
                "number of runs >= 1, or leave it out for no cap."
            )
        enabled = data.get("enabled", False)
        if not isinstance(enabled, bool):
            raise PipelineSetupError(
                f"Pipeline setup {name}: enabled = {enabled!r} will not do; give true or false."
            )
        computer = source.get("computer")
        if computer is not None and not isinstance(computer, str):
            raise PipelineSetupError(
                f"Pipeline setup {name}: source.computer = {computer!r} will not do; give a "
                "computer label."
            )
        return cls(
            name=name,
            process=data["process"],
            input_port=data["input_port"],
            source=source["entry_point"],
            source_settings=_table(source.get("settings"), "source.settings", name),
            inputs=_table(data.get("inputs"), "inputs", name),
            options=_table(data.get("options"), "options", name),
            source_computer=computer,
            max_active=max_active,
            enabled=enabled,
            description=str(data.get("description") or ""),
        )

    def to_dict(self) -> dict[str, Any]:
        """The TOML form: :meth:`from_dict` of it gives this setup back (unstored)."""
        data: dict[str, Any] = {"name": self.name}
        if self.description:
            data["description"] = self.description
        data.update(process=self.process, input_port=self.input_port, enabled=self.enabled)
        if self.max_active is not None:
            data["max_active"] = self.max_active
        data["inputs"] = copy.deepcopy(self.inputs)
        data["options"] = copy.deepcopy(self.options)
        source: dict[str, Any] = {"entry_point": self.source}
        if self.source_computer is not None:
            source["computer"] = self.source_computer
        source["settings"] = copy.deepcopy(self.source_settings)
        data["source"] = source
        return data

    # -- storage -------------------------------------------------------------------------
    def store(self) -> PipelineSetup:
        """Check the setup and store it as version 1 of its name; returns the stored one."""
        # Lazy: the check loads the process and source plugins, which listing setups needs
        # neither of.
        from veglia.engine.pipeline_setup_check import checked_setup

        with get_storage().connection() as connection:
            newest = _newest_version(connection, self.name)
        if newest is not None:
            raise PipelineSetupError(
                f"A pipeline setup named {self.name!r} exists already (version {newest}); pick "
                f"another name, or change it with `veglia pipeline edit {self.name} ...`."
            )
        return _insert(checked_setup(self), 1)

    @classmethod
    def _from_row(cls, row: Any, email: str | None) -> PipelineSetup:
        return cls(
            name=row.name,
            process=row.process,
            input_port=row.input_port,
            source=row.source,
            source_settings=dict(row.source_settings or {}),
            inputs=dict(row.inputs or {}),
            options=dict(row.options or {}),
            source_computer=row.source_computer,
            max_active=row.max_active,
            enabled=bool(row.enabled),
            description=row.description,
            pk=row.id,
            version=row.version,
            created=row.created,
            created_by=email,
        )


_EXAMPLES = {
    "process": "process = 'core.shell'",
    "input_port": "input_port = 'files'",
    "entry_point": "entry_point = 'core.folder' in the source table",
}


def _newest_version(connection: Any, name: str) -> int | None:
    table = tables.pipeline_setups
    result: int | None = connection.scalar(
        sa.select(sa.func.max(table.c.version)).where(table.c.name == name)
    )
    return result


def _insert(setup: PipelineSetup, version: int) -> PipelineSetup:
    # Lazy: the user is looked up through SQLAlchemy's ORM, which list and show never load.
    from veglia.orm.users import get_default_user

    table = tables.pipeline_setups
    values = {
        "name": setup.name,
        "version": version,
        "enabled": setup.enabled,
        "process": setup.process,
        "inputs": setup.inputs,
        "options": setup.options,
        "input_port": setup.input_port,
        "source": setup.source,
        "source_settings": setup.source_settings,
        "source_computer": setup.source_computer,
        "max_active": setup.max_active,
        "description": setup.description,
        "user_id": get_default_user().pk,
    }
    storage = get_storage()
    # The unique (name, version) key settles two edits at once: the second inserts nothing.
    insert = (
        storage.insert(table)
        .values(**values)
        .on_conflict_do_nothing()
        .returning(table.c.id, table.c.created)
    )
    with storage.connection() as connection:
        row = connection.execute(insert).first()
    if row is None:
        raise PipelineSetupError(
            f"Pipeline setup {setup.name!r} version {version} was stored by someone else "
            f"meanwhile; see it with `veglia pipeline show {setup.name}` and try again."
        )
    return replace(
        setup, pk=row.id, version=version, created=row.created, created_by=get_default_user().email
    )


def _select() -> Any:
    table = tables.pipeline_setups
    users = tables.users
    return sa.select(table, users.c.email).outerjoin(users, users.c.id == table.c.user_id)


def _unknown(name: str, connection: Any) -> NotExistent:
    table = tables.pipeline_setups
    names = list(connection.scalars(sa.select(table.c.name).distinct().order_by(table.c.name)))
    known = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") if names else "none"
    return NotExistent(
        f"No pipeline setup {name!r} (setups: {known}). Create one with `veglia pipeline create`."
    )


def load_pipeline_setup(name: str, version: int | None = None) -> PipelineSetup:
    """A setup by name: its newest version, or ``version``."""
    table = tables.pipeline_setups
    with get_storage().connection() as connection:
        query = _select().where(table.c.name == name)
        if version is None:
            query = query.order_by(table.c.version.desc()).limit(1)
        else:
            query = query.where(table.c.version == version)
        row = connection.execute(query).first()
        if row is not None:
            return PipelineSetup._from_row(row, row.email)
        newest = _newest_version(connection, name)
        if newest is None:
            raise _unknown(name, connection)
    raise NotExistent(
        f"Pipeline setup {name!r} has no version {version}: its versions are 1 to {newest}."
    )


def list_pipeline_setups(all_versions: bool = False) -> list[PipelineSetup]:
    """Every setup's newest version (or every version), by name then version."""
    table = tables.pipeline_setups
    query = _select().order_by(table.c.name, table.c.version)
    if not all_versions:
        newest = (
            sa.select(table.c.name, sa.func.max(table.c.version).label("newest"))
            .group_by(table.c.name)
            .subquery()
        )
        query = query.join(
            newest, (newest.c.name == table.c.name) & (newest.c.newest == table.c.version)
        )
    with get_storage().connection() as connection:
        return [PipelineSetup._from_row(row, row.email) for row in connection.execute(query)]


def set_pipeline_enabled(name: str, enabled: bool) -> PipelineSetup:
    """Enable or disable the setup ``name`` (every version); returns its newest version."""
    table = tables.pipeline_setups
    with get_storage().connection() as connection:
        result = connection.execute(
            sa.update(table).where(table.c.name == name).values(enabled=enabled)
        )
        if not result.rowcount:
            raise _unknown(name, connection)
    return load_pipeline_setup(name)


def edit_pipeline_setup(
    name: str, changes: Mapping[str, Any], *, whole: bool = False
) -> PipelineSetup:
    """Store the next version of ``name``, checked as a new setup is, and return it.

    ``changes`` is in the TOML form. By default it is merged into the newest version (a
    table key by key, a key set to None removed); with ``whole`` it is the whole new setup
    (a file from ``pipeline show --toml``, edited). The name stays: create a new setup for
    another. ``enabled``, when given, applies to every version, as
    :func:`set_pipeline_enabled`; when not, the new version is as enabled as the setup was.
    """
    # Lazy: see PipelineSetup.store.
    from veglia.engine.pipeline_setup_check import checked_setup

    current = load_pipeline_setup(name)
    if changes.get("name", name) != name:
        raise PipelineSetupError(
            f"Pipeline setup {name}: an edit keeps the name; create a setup named "
            f"{changes['name']!r} with `veglia pipeline create` instead."
        )
    data = dict(changes) if whole else _merged(current.to_dict(), changes)
    data["name"] = name
    data.setdefault("enabled", current.enabled)
    checked = checked_setup(PipelineSetup.from_dict(data))
    # Compared once defaults are filled in: a file that leaves a default out changes nothing.
    if checked == replace(current, pk=None, version=None, created=None, created_by=None):
        raise PipelineSetupError(
            f"Pipeline setup {name}: the edit changes nothing, so no version "
            f"{(current.version or 0) + 1} was made; give a new value."
        )
    stored = _insert(checked, (current.version or 0) + 1)
    if stored.enabled != current.enabled:
        set_pipeline_enabled(name, stored.enabled)
    return stored


def _merged(base: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# -- the TOML form ---------------------------------------------------------------------------
def parse_setup_toml(text: str, where: str = "the setup file") -> dict[str, Any]:
    """The TOML text of a setup as a dict (for :meth:`PipelineSetup.from_dict`)."""
    # Lazy: TOML only for a command that reads a file.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    try:
        result: dict[str, Any] = tomllib.loads(text)
        return result
    except tomllib.TOMLDecodeError as exc:
        raise PipelineSetupError(f"{where} is not valid TOML: {exc}; fix it there.") from None


def parse_toml_value(text: str) -> Any:
    """A value as TOML writes it (``3``, ``true``, ``['a', 'b']``, ``{ n = 1 }``), or else
    the text itself: ``--set queue_name=long`` needs no quotes."""
    try:
        value = parse_setup_toml(f"value = {text}")["value"]
    except PipelineSetupError:
        return text
    # A TOML date is no JSON value: such text stays text.
    return value if isinstance(value, str | int | float | bool | list | dict) else text


def setup_toml(setup: PipelineSetup) -> str:
    """The setup as a TOML file that ``pipeline create --from-file`` (another name) or
    ``pipeline edit NAME --from-file`` reads back."""
    data = setup.to_dict()
    source = data.pop("source")
    tables = {name: data.pop(name) for name in ("inputs", "options")}
    lines = [f"{key} = {_toml_value(value)}" for key, value in data.items()]
    for name, table in tables.items():
        # A list of tables (a chain's steps) reads better as [[inputs.steps]] blocks.
        blocks = {
            key: value
            for key, value in table.items()
            if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value)
        }
        plain = {key: value for key, value in table.items() if key not in blocks}
        if plain or not blocks:
            lines += ["", f"[{name}]", *_toml_table(plain)]
        for key, items in blocks.items():
            for item in items:
                lines += ["", f"[[{name}.{_toml_key(key)}]]", *_toml_table(item)]
    settings = source.pop("settings")
    lines += ["", "[source]", *_toml_table(source), "", "[source.settings]"]
    lines += _toml_table(settings)
    return "\n".join(lines) + "\n"


def _toml_table(table: Mapping[str, Any]) -> list[str]:
    # TOML has no null: a key left out reads back as None (a source's default).
    return [
        f"{_toml_key(key)} = {_toml_value(value)}"
        for key, value in table.items()
        if value is not None
    ]


def _toml_key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "-_") for c in key)
    return key if bare else json.dumps(key)


def toml_value(value: Any) -> str:
    """A plain value as TOML writes it inline (``"wc -l *"``, ``{ n = 1 }``)."""
    return _toml_value(value)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a TOML basic string, escapes included.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        inner = ", ".join(
            f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items() if v is not None
        )
        return f"{{ {inner} }}" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise PipelineSetupError(f"{value!r} cannot be written as TOML; give a plain value.")
