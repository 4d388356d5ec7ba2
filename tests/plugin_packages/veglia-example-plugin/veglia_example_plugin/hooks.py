"""Hook implementations: an option, a command, a job-script wrap and a table of its own.

The wrap writes how each job's commands ended, and on which host, into a file the engine
retrieves; when the job's files are parsed, that becomes a note in the plugin's own table,
which ``veglia process show`` prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from veglia.plugin_api import JobScriptWrap, Option, PluginMigrations, ProcessNode, hookimpl

LOADED: list[str] = []
#: What the wrap writes beside the job, and the engine retrieves with its files.
STAMP = "_example_stamp.txt"


@hookimpl
def register_options() -> list[Option]:
    return [
        Option(
            "example.threshold",
            "How many warnings the example plugin tolerates.",
            default=3,
            parse=int,
        )
    ]


@hookimpl
def register_commands(cli: click.Group) -> None:
    @cli.command("example-hello")
    @click.option("--name", default="world")
    def example_hello(name: str) -> None:
        """Say hello from the example plugin."""
        click.echo(f"hello {name} from veglia-example-plugin")


@hookimpl
def profile_loaded(profile: Any) -> None:
    LOADED.append(profile.name)


# The table and SQLAlchemy load when a hook needs them: every veglia command loads this
# module, most never touch the plugin's table.
@hookimpl
def storage_migrations() -> PluginMigrations:
    from veglia_example_plugin.tables import MIGRATIONS

    return MIGRATIONS


@hookimpl
def job_script_wrap(node: ProcessNode, computer: Any) -> JobScriptWrap:
    return JobScriptWrap(
        name="example.stamp",
        after=f'echo "exit $veglia_exit on $(hostname)" > {STAMP}',
        retrieve=(STAMP,),
    )


@hookimpl
def job_stopped_beside(node: ProcessNode, folder: Path) -> None:
    stamp = folder / STAMP
    if stamp.is_file():
        from veglia_example_plugin.notes import add_note

        add_note(node.pk, stamp.read_text().strip())


@hookimpl
def process_show_tables(node: ProcessNode) -> list[tuple[tuple[str, ...], list[tuple[Any, ...]]]]:
    from veglia_example_plugin.notes import notes_of

    return [(("Example notes",), [(text,) for text in notes_of(node.pk)])]
