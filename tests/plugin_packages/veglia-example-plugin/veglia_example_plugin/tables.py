"""The example plugin's own table: notes it keeps on processes, in the profile's database."""

from pathlib import Path

from sqlalchemy import Column, ForeignKey, Integer, MetaData, Table, Text

from veglia.plugin_api import NAMING_CONVENTION, Node, PluginMigrations

metadata = MetaData(naming_convention=NAMING_CONVENTION)

example_notes = Table(
    "example_notes",
    metadata,
    Column("id", Integer, primary_key=True),
    # A core table, referred to by its column: the core is migrated before any plugin.
    Column("node_id", ForeignKey(Node.id, ondelete="CASCADE"), nullable=False, index=True),
    Column("text", Text, nullable=False),
)

MIGRATIONS = PluginMigrations(
    name="example",
    metadata=metadata,
    versions=Path(__file__).parent / "migrations",
    head="0001",
)
