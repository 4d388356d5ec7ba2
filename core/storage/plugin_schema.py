"""Tables a plugin owns, with Alembic migrations of its own (the ``storage_migrations`` hook).

Each plugin's migrations are a chain apart from the core's, recorded in a version table of
its own (``alembic_version_<name>``), not a branch of the core's: the core migrates and opens
whatever plugins are installed, a plugin uninstalled leaves its tables and version row
behind without Alembic failing on a revision it cannot find, and two plugins' revision ids
never meet. ``veglia storage migrate`` brings the core to its head first, then each plugin,
so a plugin's tables may refer to the core's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData

from veglia.exceptions import PluginError

__all__ = ["PluginMigrations", "plugin_migrations"]

#: Where the Alembic environment of every plugin's migrations is: plugins ship versions only.
PLUGIN_ENV = Path(__file__).parent / "plugin_env"

_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True)
class PluginMigrations:
    """A plugin's tables and the folder of the Alembic migrations that make them.

    ``name`` names the version table (``alembic_version_<name>``): lower-case letters,
    digits and ``_``. ``metadata`` holds the plugin's tables and nothing else (a test of
    yours compares it with the migrated database). ``versions`` is the folder of the
    migration files (``revision = "0001"``, ``down_revision = None`` for the first).
    ``head`` is the newest of them: a database already there is opened without Alembic.
    """

    name: str
    metadata: MetaData
    versions: Path
    head: str

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise PluginError(
                f"Plugin migrations name {self.name!r} is not allowed: use 1 to 40 lower-case "
                "letters, digits and '_', starting with a letter."
            )
        object.__setattr__(self, "versions", Path(self.versions))

    @property
    def version_table(self) -> str:
        return f"alembic_version_{self.name}"

    @property
    def tables(self) -> set[str]:
        return set(self.metadata.tables)

    def alembic_config(self, connection: Any = None) -> Any:
        """The Alembic configuration of these migrations (on ``connection``, when given)."""
        # Lazy: Alembic is a third of a command's start-up, and only migrating needs it.
        from alembic.config import Config as AlembicConfig

        config = AlembicConfig()
        config.set_main_option("script_location", str(PLUGIN_ENV))
        # One folder, whatever characters its path holds.
        config.set_main_option("path_separator", "os")
        config.set_main_option("version_locations", str(self.versions))
        config.attributes.update(
            connection=connection, metadata=self.metadata, version_table=self.version_table
        )
        return config


def plugin_migrations(
    core: MetaData,
    results: list[tuple[str, Any]],
    errors: list[tuple[str, BaseException]],
) -> list[tuple[str, PluginMigrations]]:
    """The plugins' migrations, as (plugin name, migrations), from what they answered to
    ``storage_migrations`` (``gather``'s ``results`` and ``errors``), checked that no two
    share a name or a table, nor take a table of the ``core`` metadata.

    The caller asks the plugins: the hook catalogue names :class:`PluginMigrations`, so this
    module stays below the plugin manager that loads it."""
    for plugin, error in errors:
        raise PluginError(
            f"Plugin {plugin!r} failed to name its tables (storage_migrations): "
            f"{type(error).__name__}: {error}. Fix or uninstall it, or leave it out with "
            "VEGLIA_PLUGINS=<names to load>."
        ) from error
    found: list[tuple[str, PluginMigrations]] = []
    names: dict[str, str] = {}
    owners = dict.fromkeys(core.tables, "veglia's core")
    for plugin, result in results:
        for migrations in result if isinstance(result, (list, tuple)) else [result]:
            if not isinstance(migrations, PluginMigrations):
                raise PluginError(
                    f"Plugin {plugin!r} returned {type(migrations).__name__} from "
                    "storage_migrations: return a veglia.plugin_api.PluginMigrations."
                )
            if migrations.name in names:
                raise PluginError(
                    f"Plugins {names[migrations.name]!r} and {plugin!r} both name their "
                    f"migrations {migrations.name!r}: uninstall one, or rename its own."
                )
            names[migrations.name] = plugin
            for table in sorted(migrations.tables):
                if table in owners:
                    raise PluginError(
                        f"Plugin {plugin!r} declares table {table!r}, which {owners[table]} "
                        "owns already: uninstall one, or rename the plugin's table."
                    )
                owners[table] = repr(plugin)
            found.append((plugin, migrations))
    return found
