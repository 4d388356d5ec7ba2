"""The web plugin's hook implementations: its option, its command, the daemon's web view."""

from __future__ import annotations

from typing import Any

import click

from veglia.hookspecs import hookimpl
from veglia.plugins.web.auth import USERS_OPTION
from veglia.plugins.web.cli import web

__all__ = ["register_commands", "register_options"]


@hookimpl
def register_options() -> list[Any]:
    return [USERS_OPTION]


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(web)
