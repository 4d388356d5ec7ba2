"""``veglia web``: serve the live view; ``veglia web user add/list/remove``: its users;
``veglia report PK -o FILE``: a workflow as one self-contained HTML file."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

from veglia.plugin_api import InvalidOptionError
from veglia.plugins.web.auth import ROLES

__all__ = ["report", "web"]


def profile_of_command() -> Any:
    """The profile the command runs for: ``veglia -p NAME`` or the default one."""
    # Lazy: profiles load only once a command runs (`veglia --help` stays quick).
    from veglia.plugin_api import load_profile

    state = click.get_current_context().find_root().obj
    return load_profile(getattr(state, "profile_name", None))


@click.group("web", invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="0: any free."
)
@click.option("--no-token", is_flag=True, help="No login token: named users only.")
@click.option(
    "--behind-proxy",
    is_flag=True,
    help="A reverse proxy serves it over HTTPS: allow a non-loopback --host without TLS.",
)
@click.option("--certfile", type=click.Path(exists=True, dir_okay=False), help="TLS certificate.")
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False), help="TLS private key.")
@click.pass_context
def web(
    ctx: click.Context,
    host: str,
    port: int,
    no_token: bool,
    behind_proxy: bool,
    certfile: str | None,
    keyfile: str | None,
) -> None:
    """Serve a live view of the profile's workflows and jobs in a browser.

    Prints an address with a login token (as Jupyter does); named users log in with a
    password (`veglia web user add`). Listens on 127.0.0.1 unless told otherwise."""
    if ctx.invoked_subcommand is not None:
        return
    # Lazy: uvicorn and Starlette only to serve (not for `veglia web user ...`).
    from veglia.plugins.web.server import Listener, WebServer, new_token

    listener = Listener(host, port, certfile, keyfile, behind_proxy)
    profile = profile_of_command()
    server = WebServer(profile.name, listener, None if no_token else new_token())
    click.echo(f"veglia web for profile {profile.name!r}; open in a browser:")
    click.echo(f"    {server.url}")
    click.echo("Stop it with Ctrl-C.")
    sys.stdout.flush()
    # uvicorn stops cleanly on Ctrl-C, then passes it on.
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    click.echo("Stopped.")


@web.group("user")
def user_group() -> None:
    """Named users of the web view, with their role: read (look) or operate (also act)."""


@user_group.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), default="read", show_default=True)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def user_add(name: str, role: str, password_stdin: bool) -> None:
    """Add user NAME (or give it a new role and password); the password is prompted twice."""
    # Lazy: the configuration only once a user command runs.
    from veglia.plugins.web.auth import add_user

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    add_user(profile_of_command().name, name, role, password)
    click.echo(f"✔ Web user {name} has role {role}.")


@user_group.command("list")
def user_list() -> None:
    """List the users and their roles."""
    # Lazy: the configuration only once a user command runs.
    from veglia.plugins.web.auth import list_users

    users = list_users(profile_of_command().name)
    if not users:
        click.echo("No web user; add one with `veglia web user add NAME --role read`.")
    for user in users:
        click.echo(f"{user.name}\t{user.role}")


@user_group.command("remove")
@click.argument("name")
def user_remove(name: str) -> None:
    """Remove user NAME: its sessions end at their next request."""
    # Lazy: the configuration only once a user command runs.
    from veglia.plugins.web.auth import remove_user

    remove_user(profile_of_command().name, name)
    click.echo(f"✔ Removed web user {name}.")


@click.command("report")
@click.argument("pk", type=int)
@click.option(
    "-o",
    "--output",
    "output",
    help="The HTML file to write (default veglia-report-PK.html); `-` writes to standard output.",
)
@click.option("-f", "--force", is_flag=True, help="Overwrite the file if it exists.")
def report(pk: int, output: str | None, force: bool) -> None:
    """Write workflow PK as one self-contained HTML file: summary, steps, timeline, and each
    job's resources and charts. It loads nothing from elsewhere: mail it, open it offline.
    A calc job's PK gives the report of that job alone."""
    target = None if output == "-" else Path(output or f"veglia-report-{pk}.html")
    if target is not None and target.is_dir():
        raise InvalidOptionError(f"{target} is a folder; give a file name with -o.")
    if target is not None and target.exists() and not force:
        raise InvalidOptionError(
            f"{target} exists; choose another file with -o, or replace it with --force."
        )
    profile_of_command()
    # Lazy: the views and the templates only once a report is asked for.
    from veglia.plugins.web.report import report_of

    html = report_of(pk)
    if target is None:
        click.echo(html, nl=False)
        return
    target.write_text(html, encoding="utf-8")
    click.echo(f"✔ Wrote the report of process {pk} to {target}")
