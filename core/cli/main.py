"""The ``veglia`` command line: a click group whose sub-commands live in one module each."""

from __future__ import annotations

import logging
import os
import sys
import traceback

import click

import veglia
from veglia.cli.output import echo_error
from veglia.cli.state import CliState
from veglia.exceptions import VegliaError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(veglia.__version__, "--version", prog_name="veglia")
@click.option(
    "-p",
    "--profile",
    "profile_name",
    envvar="VEGLIA_PROFILE",
    help="Profile to use (default: the default profile, or $VEGLIA_PROFILE).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show debug logging and full tracebacks.")
@click.pass_context
def cli(ctx: click.Context, profile_name: str | None, verbose: bool) -> None:
    """veglia: run calculation jobs with provenance, on any computer and scheduler."""
    ctx.obj = CliState(profile_name=profile_name, verbose=verbose)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # Libraries (aio-pika, paramiko) log retries the user cannot act on; errors that
        # matter reach the user as exceptions with a message.
        logging.getLogger().setLevel(logging.CRITICAL)


def _register_commands() -> None:
    from veglia.cli import (
        cmd_archive,
        cmd_calcjob_clean,
        cmd_code,
        cmd_computer,
        cmd_config,
        cmd_daemon,
        cmd_group,
        cmd_monitor,
        cmd_node,
        cmd_node_delete,
        cmd_node_repo,
        cmd_plugin,
        cmd_process,
        cmd_process_control,
        cmd_profile,
        cmd_setup,
        cmd_shell,
        cmd_status,
        cmd_storage,
        cmd_verify,
    )

    for module in (
        cmd_config,
        cmd_daemon,
        cmd_plugin,
        cmd_profile,
        cmd_setup,
        cmd_status,
        cmd_storage,
        cmd_process,
        cmd_node,
        cmd_computer,
        cmd_code,
        cmd_shell,
        cmd_monitor,
        cmd_verify,
        cmd_group,
        cmd_archive,
    ):
        for command in module.COMMANDS:
            cli.add_command(command)
    process_group = cli.commands.get("process")
    if not isinstance(process_group, click.Group):
        process_group = click.Group("process", help="Inspect and control processes.")
        cli.add_command(process_group)
    for command in cmd_process_control.PROCESS_COMMANDS:
        process_group.add_command(command)
    # Sub-commands kept in modules of their own, added to the groups they belong in.
    for module in (cmd_node_delete, cmd_node_repo, cmd_calcjob_clean):
        for parent, commands in module.SUBCOMMANDS.items():
            group = cli.commands[parent]
            assert isinstance(group, click.Group)
            for command in commands:
                group.add_command(command)


_register_commands()


def _add_plugin_commands() -> None:
    from veglia.cli.output import echo_warning
    from veglia.exceptions import PluginError
    from veglia.plugin_manager import get_plugin_manager

    builtin = dict(cli.commands)
    try:
        get_plugin_manager().hook.register_commands(cli=cli)
    except PluginError as exc:
        # Keep the CLI usable (`veglia plugin list` helps find the broken plugin).
        echo_warning(str(exc))
    for name, command in builtin.items():
        if cli.commands.get(name) is not command:
            echo_warning(f"A plugin tried to replace the built-in command {name!r}; kept ours.")
            cli.commands[name] = command


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``veglia`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in args or "--verbose" in args or os.environ.get("VEGLIA_VERBOSE") == "1"
    try:
        _add_plugin_commands()
        result = cli.main(args=args, prog_name="veglia", standalone_mode=False)
    except click.exceptions.Abort:
        echo_error("Aborted.")
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except VegliaError as exc:
        if verbose:
            traceback.print_exc()
        echo_error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        echo_error("Interrupted.")
        sys.exit(130)
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        echo_error(
            f"Unexpected {type(exc).__name__}: {exc} (run again with --verbose for the "
            "traceback, and please report it)"
        )
        sys.exit(1)
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
