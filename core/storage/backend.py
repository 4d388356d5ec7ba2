"""Opening a profile's storage: the database engine, its schema version, the file repository."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from veglia.config.private_paths import private_file, private_folder
from veglia.config.profile import mask_url
from veglia.exceptions import (
    PluginError,
    SchemaNewerError,
    SchemaOutdatedError,
    StorageError,
    StorageUnavailable,
)
from veglia.storage.repository import FileRepository
from veglia.storage.repository_db import DatabaseRepository
from veglia.storage.tables import repository_files

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from veglia.storage.plugin_schema import PluginMigrations

LOGGER = logging.getLogger("veglia.storage")

__all__ = [
    "SCHEMA_HEAD",
    "HeldTransaction",
    "SchemaStatus",
    "StorageBackend",
    "create_db_engine",
]

_MIGRATIONS = Path(__file__).parent / "migrations"
#: The newest migration of this release (a test checks it against the migrations folder):
#: a database at it is up to date without Alembic, a third of a command's start-up.
SCHEMA_HEAD = "0014"


def _driver_url(url: str) -> str:
    """Pick the psycopg (3) driver for plain ``postgresql://`` URLs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the daemon write while the CLI reads; busy_timeout waits out short locks.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


#: NaN and Infinity are not JSON: SQLite then fails the whole write as "malformed JSON",
#: PostgreSQL refuses it. Refused here, the error names the value. One encoder for every
#: value (``json.dumps`` with an option makes one per call, half the cost of a node's
#: attributes).
_strict_json = json.JSONEncoder(allow_nan=False).encode


def create_db_engine(url: str) -> Engine:
    """An SQLAlchemy engine for a storage URL, with veglia's connection settings."""
    url = _driver_url(url)
    try:
        if url.startswith("sqlite"):
            path = sa.engine.make_url(url).database
            if path and path != ":memory:":
                # 0600 before SQLite opens it: its -wal and -shm files take the same mode.
                private_file(private_folder(Path(path).parent) / Path(path).name)
            engine = sa.create_engine(
                url, connect_args={"timeout": 30}, json_serializer=_strict_json
            )
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = sa.create_engine(url, pool_pre_ping=True, json_serializer=_strict_json)
    except (sa.exc.ArgumentError, ImportError) as exc:
        raise StorageError(f"Cannot use storage URL {mask_url(url)}: {exc}") from None
    return engine


class _Shared:
    """The one transaction of a :meth:`StorageBackend.transaction` block: a Core connection,
    with an ORM session on it made only for the blocks that ask for one (most of the
    engine's writes are Core statements, and a session costs as much as two of them)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.connection = engine.connect()
        self.connection.begin()
        self._session: Session | None = None
        self.thread = threading.get_ident()
        self.open = True
        #: What an inner block raised: the work so far is rolled back, the rest of the
        #: block runs on sessions of its own, and the block raises it at its end.
        self.error: BaseException | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            # Lazy: the ORM only for a block that asks for a session (see _new_session).
            from sqlalchemy.orm import Session

            # It joins the connection's transaction: the block commits, never the session.
            self._session = Session(
                bind=self.connection,
                join_transaction_mode="rollback_only",
                expire_on_commit=False,
            )
        return self._session

    def fail(self, error: BaseException) -> None:
        """An inner block failed: undo the transaction so far, remember why."""
        try:
            if self._session is not None:
                self._session.rollback()
            if self.connection.in_transaction():
                self.connection.rollback()
        finally:
            self.error = error

    def end(self, commit: bool) -> None:
        self.open = False
        try:
            if commit:
                self.connection.commit()
            elif self.connection.in_transaction():
                self.connection.rollback()
        finally:
            if self._session is not None:
                self._session.close()
            self.connection.close()


class HeldTransaction(_Shared):
    """A transaction kept open between blocks (:meth:`StorageBackend.hold`): every block of
    its task in this thread writes in it until a :meth:`StorageBackend.transaction` block
    given it commits it, or :meth:`end` ends it."""

    def __init__(self, engine: Engine, pending: threading.local) -> None:
        super().__init__(engine)
        self.owner = _current_task()
        self._pending = pending
        pending.held = self

    def end(self, commit: bool) -> None:
        if getattr(self._pending, "held", None) is self:
            self._pending.held = None
        if self.open:
            super().end(commit and self.error is None)


def _current_task() -> Any:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no loop runs in this thread
        return None


#: The transaction block this context is in. A task or thread started inside one inherits
#: the variable, not the block: it joins only while the block is open, on its own thread.
_SHARED: contextvars.ContextVar[_Shared | None] = contextvars.ContextVar(
    "veglia_shared_session", default=None
)


class SchemaStatus:
    """Where a database stands against this release's migrations."""

    def __init__(self, current: str | None, head: str, known: set[str]) -> None:
        self.current = current
        self.head = head
        self.known = known

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head

    @property
    def empty(self) -> bool:
        return self.current is None

    @property
    def newer(self) -> bool:
        return self.current is not None and self.current not in self.known


class StorageBackend:
    """The database and file repository of one profile."""

    def __init__(
        self,
        url: str,
        repository_path: Path | str,
        repository: str = "folder",
        plugins: list[tuple[str, PluginMigrations]] | None = None,
    ) -> None:
        self.url = url
        #: The plugins' own tables, as (plugin name, migrations); None: the loaded plugins'.
        self._plugins = plugins
        self.engine = create_db_engine(url)
        #: The transaction held open in each thread (:meth:`hold`).
        self._pending = threading.local()
        self._sessions: sessionmaker[Session] | None = None
        folder = FileRepository(repository_path)
        self.repository: FileRepository | DatabaseRepository = (
            DatabaseRepository(self, fallback=folder) if repository == "database" else folder
        )

    @classmethod
    def from_profile(cls, profile: Any) -> StorageBackend:
        return cls(
            profile.storage_url,
            profile.repository_path,
            profile.get_option("storage.repository"),
        )

    def __repr__(self) -> str:
        return f"StorageBackend({mask_url(self.url)!r})"

    # -- schema -----------------------------------------------------------------------
    # Alembic is imported on use: it is a third of `veglia`'s import time otherwise.
    def _alembic_config(self) -> Any:
        from alembic.config import Config as AlembicConfig

        config = AlembicConfig()
        config.set_main_option("script_location", str(_MIGRATIONS))
        return config

    def schema_status(self) -> SchemaStatus:
        """Where the core schema stands (each plugin's: :meth:`plugin_schema_status`)."""
        return self._status(self._alembic_config(), None)

    def _status(self, config: Any, version_table: str | None) -> SchemaStatus:
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        script = ScriptDirectory.from_config(config)
        head = script.get_current_head()
        known = {rev.revision for rev in script.walk_revisions()}
        opts = {"version_table": version_table} if version_table else {}
        try:
            with self.engine.connect() as connection:
                current = MigrationContext.configure(connection, opts=opts).get_current_revision()
        except sa.exc.OperationalError as exc:
            raise StorageUnavailable(
                f"Cannot reach the database at {mask_url(self.url)}: {exc.orig}. Check that "
                "it runs and that storage.url is right (`veglia config get storage.url`)."
            ) from None
        assert head is not None
        return SchemaStatus(current, head, known)

    def plugins(self) -> list[tuple[str, PluginMigrations]]:
        """The plugins that own tables here, as (plugin name, their migrations)."""
        if self._plugins is None:
            # Lazy: the plugin manager (it imports every plugin's hook module) only when the
            # schema is checked or migrated, not for a test's StorageBackend.
            from veglia.plugin_manager import gather
            from veglia.storage.plugin_schema import plugin_migrations
            from veglia.storage.tables import metadata

            self._plugins = plugin_migrations(metadata, *gather("storage_migrations"))
        return self._plugins

    def plugin_schema_status(self) -> list[tuple[str, PluginMigrations, SchemaStatus]]:
        """Where each plugin's tables stand against its migrations."""
        statuses = []
        for plugin, migrations in self.plugins():
            status = self._status(migrations.alembic_config(), migrations.version_table)
            if status.head != migrations.head:
                raise PluginError(
                    f"Plugin {plugin!r} says its schema head is {migrations.head!r}, but its "
                    f"migrations in {migrations.versions} end at {status.head!r}: make them "
                    "agree (or upgrade the plugin)."
                )
            statuses.append((plugin, migrations, status))
        return statuses

    def _recorded_revisions(self, tables: list[str]) -> list[str | None]:
        """The revision each version table records, read without Alembic; None when
        unknown (no such table: Alembic's path says what is missing)."""
        found: list[str | None] = []
        try:
            with self.engine.connect() as connection:
                for table in tables:
                    try:
                        found.append(
                            connection.execute(sa.text(f"SELECT version_num FROM {table}")).scalar()
                        )
                    except sa.exc.DBAPIError:
                        found.append(None)
                        # PostgreSQL refuses every statement of a failed transaction.
                        connection.rollback()
        except sa.exc.DBAPIError:  # no database: Alembic's path says so
            return [None] * len(tables)
        return found

    def check_schema(self) -> None:
        """Raise unless the core's schema and every plugin's are what this release and the
        installed plugins expect."""
        plugins = self.plugins()
        tables = ["alembic_version"] + [migrations.version_table for _, migrations in plugins]
        heads = [SCHEMA_HEAD] + [migrations.head for _, migrations in plugins]
        if self._recorded_revisions(tables) == heads:
            return
        where = mask_url(self.url)
        _raise_unless_current(
            self.schema_status(),
            f"The database at {where} is",
            ("this release of veglia", "this release"),
            "veglia",
        )
        for plugin, _, status in self.plugin_schema_status():
            _raise_unless_current(
                status,
                f"The tables of plugin {plugin!r} in the database at {where} are",
                ("the installed plugin", "the plugin"),
                "the plugin",
                missing="absent",
            )

    def migrate(self, revision: str = "head", plugins: bool = True) -> tuple[str | None, str]:
        """Bring the core schema to ``revision``, then (at ``head``, unless ``plugins`` is
        false) every plugin's to its head; return the core's ``(before, after)``."""
        status = self.schema_status()
        if status.newer:
            self.check_schema()
        from alembic import command

        config = self._alembic_config()
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
        after = self.schema_status().current or ""
        if plugins and revision == "head":
            self.migrate_plugins()
        return status.current, after

    def migrate_plugins(self) -> list[tuple[str, str | None, str]]:
        """Bring each plugin's tables to its head (the core first: :meth:`migrate`); return
        (plugin name, before, after) for each."""
        from alembic import command

        moved = []
        for plugin, migrations, status in self.plugin_schema_status():
            if status.newer:
                self.check_schema()
            with self.engine.begin() as connection:
                command.upgrade(migrations.alembic_config(connection), "head")
            moved.append((plugin, status.current, status.head))
        return moved

    def drop_tables(self) -> list[str]:
        """Drop the tables veglia made here (the core's, each installed plugin's, and every
        Alembic version table, a removed plugin's too); return their names. Tables veglia
        did not make are left alone, and so is the database itself."""
        # Lazy: the core tables module, as the other storage checks read it.
        from veglia.storage.tables import metadata

        known = set(metadata.tables) | {t for _, m in self.plugins() for t in m.tables}
        try:
            with self.engine.begin() as connection:
                present = sa.inspect(connection).get_table_names()
                ours = [n for n in present if n in known or n.startswith("alembic_version")]
                reflected = sa.MetaData()
                reflected.reflect(connection, only=ours)
                # In the order foreign keys need, whichever plugin's tables refer to which.
                reflected.drop_all(connection)
        except sa.exc.OperationalError as exc:
            raise StorageUnavailable(
                f"Cannot reach the database at {mask_url(self.url)}: {exc.orig}"
            ) from None
        return sorted(ours)

    def schema_differences(self) -> dict[str, list[Any]]:
        """What the database has that the tables declared in code do not, and the other
        way round: the core's (key ``"core"``) and each plugin's (by plugin name), each
        compared on its own tables only. Empty lists when the migrations and the code
        agree (a test of a plugin with tables asserts this)."""
        # Lazy: Alembic only for this check (tests, a plugin author's).
        from alembic.autogenerate import compare_metadata
        from alembic.runtime.migration import MigrationContext

        # Lazy: the core tables module, as the other storage checks read it.
        from veglia.storage.tables import metadata

        plugins = self.plugins()
        owned = {table for _, migrations in plugins for table in migrations.tables}

        def only(tables: set[str] | None) -> Any:
            def include(name: str | None, type_: str, parent_names: Any) -> bool:
                if type_ != "table" or name is None:
                    return True
                if name.startswith("alembic_version"):
                    return False
                return name in tables if tables is not None else name not in owned

            return include

        differences = {}
        with self.engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"include_name": only(None)})
            differences["core"] = compare_metadata(context, metadata)
            for plugin, migrations in plugins:
                opts = {"include_name": only(migrations.tables)}
                context = MigrationContext.configure(connection, opts=opts)
                differences[plugin] = compare_metadata(context, migrations.metadata)
        return differences

    # -- sessions ---------------------------------------------------------------------
    def _new_session(self) -> Session:
        # Imported here: SQLAlchemy's ORM is a quarter of a command's start-up, and commands
        # that only read rows (process list, the daemon's hints) go through connection().
        if self._sessions is None:
            from sqlalchemy.orm import sessionmaker

            self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        return self._sessions()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed at the end of the block and rolled back on error.

        Inside a :meth:`transaction` block it is that block's session: the statements go
        out at the end of this block (so errors show here, as before), the commit at the
        end of the transaction.
        """
        shared = self._joinable()
        if shared is not None:
            session = shared.session
            try:
                yield session
                session.flush()
            except BaseException as exc:
                shared.fail(exc)
                raise
            finally:
                # What the caller loaded is detached as it would be after a commit; the next
                # block reads the rows afresh (later UPDATEs are not in an identity map).
                session.expunge_all()
            return
        session = self._new_session()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A Core connection for statements through tables (no ORM objects): the
        :meth:`transaction` block's, else one whose transaction commits at the end of this
        block. About half the cost of a :meth:`session` block: the engine's own writes and
        reads at each step of a job go this way."""
        shared = self._joinable()
        if shared is not None:
            try:
                yield shared.connection
            except BaseException as exc:
                shared.fail(exc)
                raise
            return
        with self.engine.begin() as connection:
            yield connection

    def _joinable(self) -> _Shared | None:
        shared = _SHARED.get()
        if (
            shared is None
            or not shared.open
            or shared.error is not None
            or shared.thread != threading.get_ident()
            or shared.engine is not self.engine
        ):
            return self.held()
        return shared

    def held(self) -> HeldTransaction | None:
        """The transaction this task holds open in this thread (:meth:`hold`), if any."""
        held: HeldTransaction | None = getattr(self._pending, "held", None)
        if held is None or not held.open or held.error is not None:
            return None
        if held.owner is not _current_task():
            # Its task awaited with it open: what it wrote is committed now, before anything
            # of another task can join it (or wait in this thread for its lock, for ever).
            LOGGER.warning("a transaction was held open across an await: committed early")
            held.end(commit=True)
            return None
        return held

    @contextmanager
    def transaction(self, held: HeldTransaction | None = None) -> Iterator[None]:
        """Every :meth:`session` and :meth:`connection` block inside this one shares one
        transaction, committed at its end: a process's state change, its checkpoint and
        what the change wrote (an exit status, outputs, logs) are one commit instead of one
        each, and are seen together or not at all.

        The block must not wait on anything (no ``await``): on SQLite the first write takes
        the database's write lock until the commit. Blocks nest (the outer one commits).
        When an inner block fails, what was written so far is rolled back, and the rest of
        the block runs on sessions of its own (plumpy records an EXCEPTED state that way);
        the block then raises that error at its end even when something caught it, so no
        write is lost without a word.

        With ``held`` (from :meth:`hold`, still open) the block continues that transaction
        and commits it, with what was written in it before.
        """
        shared: _Shared
        if held is not None and held.open:
            shared = held
        elif self._joinable() is not None:
            yield
            return
        else:
            shared = _Shared(self.engine)
        token = _SHARED.set(shared)
        commit = False
        try:
            yield
            if shared.error is not None:
                raise shared.error
            commit = True
        finally:
            _SHARED.reset(token)
            shared.end(commit)

    def hold(self) -> HeldTransaction:
        """Open a transaction that outlives the block: the blocks that follow in this task
        and thread write in it, until a :meth:`transaction` block given it commits it (or
        :meth:`HeldTransaction.end`). It must not stay open across an ``await``: on SQLite
        it holds the database's write lock. Should its task await all the same, the next
        block of another task commits it first."""
        current = self.held()
        if current is not None:
            return current
        failed = getattr(self._pending, "held", None)
        if failed is not None:  # rolled back by a failed write: only its connection is left
            failed.end(commit=False)
        return HeldTransaction(self.engine, self._pending)

    def referenced_blobs(self) -> set[str]:
        """The digests of every blob a node's file refers to: what ``maintain`` keeps."""
        with self.connection() as connection:
            return set(connection.scalars(sa.select(repository_files.c.sha256).distinct()))

    def insert(self, table: Any) -> Any:
        """An INSERT for this database's dialect, which has ``on_conflict_do_nothing``."""
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    def close(self) -> None:
        self.engine.dispose()


def _raise_unless_current(
    status: SchemaStatus,
    subject: str,
    reader: tuple[str, str],
    upgrade: str,
    missing: str = "empty",
) -> None:
    """Raise when ``status`` is newer than the reader knows (upgrade ``upgrade``) or older
    than it needs (``veglia storage migrate``); ``subject`` ends with its verb
    ("The database at URL is"), ``reader`` names who reads it (newer than / needs)."""
    if status.newer:
        raise SchemaNewerError(
            f"{subject} at schema {status.current}, newer than {reader[0]} knows. "
            f"Upgrade {upgrade}."
        )
    if not status.up_to_date:
        where = missing if status.empty else f"at schema {status.current}"
        raise SchemaOutdatedError(
            f"{subject} {where}; {reader[1]} needs {status.head}. Run `veglia storage migrate` "
            "(back up the database first)."
        )
