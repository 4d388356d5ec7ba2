"""The web plugin's hook implementations: its option, its command, the daemon's web view."""

from __future__ import annotations

from typing import Any

import click

from veglia.plugin_api import hookimpl
from veglia.plugins.web import daemon
from veglia.plugins.web.auth import USERS_OPTION
from veglia.plugins.web.cli import report, web

__all__ = [
    "daemon_start_options",
    "daemon_started",
    "daemon_status_lines",
    "daemon_stopping",
    "register_commands",
    "register_options",
]


@hookimpl
def register_options() -> list[Any]:
    return [USERS_OPTION]


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(web)
    cli.add_command(report)


@hookimpl
def daemon_start_options() -> list[click.Option]:
    """``--web [HOST:PORT]``: the daemon serves the web view too."""
    return [daemon.WEB_OPTION]


@hookimpl
def daemon_started(profile: Any, start_options: dict[str, Any]) -> None:
    bind = start_options.get("web")
    if bind:
        daemon.serve_beside_daemon(profile, bind)
    else:  # the address a daemon killed without a stop left behind
        daemon.stop_beside_daemon(profile)


@hookimpl
def daemon_stopping(profile: Any) -> None:
    daemon.stop_beside_daemon(profile)


@hookimpl
def daemon_status_lines(profile: Any, start_options: dict[str, Any]) -> list[str]:
    return daemon.status_lines(profile, start_options.get("web"))
