"""Hook implementations: an option, a command and a table of its own."""

import click

from veglia.config.options import Option
from veglia.hookspecs import hookimpl

LOADED = []


@hookimpl
def register_options():
    return [
        Option(
            "example.threshold",
            "How many warnings the example plugin tolerates.",
            default=3,
            parse=int,
        )
    ]


@hookimpl
def register_commands(cli):
    @cli.command("example-hello")
    @click.option("--name", default="world")
    def example_hello(name):
        """Say hello from the example plugin."""
        click.echo(f"hello {name} from veglia-example-plugin")


@hookimpl
def profile_loaded(profile):
    LOADED.append(profile.name)


@hookimpl
def storage_migrations():
    from veglia_example_plugin.tables import MIGRATIONS

    return MIGRATIONS
