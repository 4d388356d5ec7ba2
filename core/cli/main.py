"""The ``veglia`` command line: a click group whose sub-commands live in one module each,
imported when they run."""

from __future__ import annotations

import gc
import logging
import os
import sys
import traceback

import click

import veglia
from veglia.cli.lazy_group import LazyGroup
from veglia.exceptions import CliExit, PluginError, VegliaError

__all__ = ["cli", "exit_code_of", "main"]


#: Built-in commands: name -> (module, attribute, short help). A module is imported only
#: when its command runs (or ``--help`` of it is asked), so ``veglia --version`` and each
#: command load only what they use; tests/test_cli_startup.py keeps the help texts in step.
BUILTIN_COMMANDS: dict[str, tuple[str, str, str]] = {
    "archive": (
        "veglia.cli.cmd_archive",
        "archive_group",
        "Write nodes with their provenance to a file; import such a file into a profile.",
    ),
    "calcjob": (
        "veglia.cli.cmd_calcjob",
        "calcjob_group",
        "Inspect calc jobs: their input and retrieved files, results, work dir.",
    ),
    "code": (
        "veglia.cli.cmd_code",
        "code_group",
        "Create and inspect codes: executables installed on a computer.",
    ),
    "computer": (
        "veglia.cli.cmd_computer",
        "computer_group",
        "Set up, configure, test, change and delete computers.",
    ),
    "config": ("veglia.cli.cmd_config", "config_group", "Get, set and list profile options."),
    "daemon": (
        "veglia.cli.cmd_daemon",
        "daemon_group",
        "Start, stop and inspect the daemon that runs submitted processes.",
    ),
    "group": (
        "veglia.cli.cmd_group",
        "group_group",
        "Create groups of nodes, fill them, and list what is in them.",
    ),
    "monitor": (
        "veglia.cli.cmd_monitor",
        "monitor_group",
        "Inspect the monitors jobs can be watched with.",
    ),
    "node": (
        "veglia.cli.cmd_node",
        "node_group",
        "Inspect nodes and their files; delete nodes with their provenance.",
    ),
    "pipeline": (
        "veglia.cli.cmd_pipeline",
        "pipeline_group",
        "Create named pipeline setups that run a process on each element of a data source.",
    ),
    "plugin": ("veglia.cli.cmd_plugin", "plugin_group", "List and inspect installed plugins."),
    "presto": (
        "veglia.cli.cmd_setup",
        "presto",
        "Create a working profile with no questions: SQLite, localhost, direct scheduler.",
    ),
    "process": ("veglia.cli.cmd_process", "process_group", "Inspect and control processes."),
    "profile": ("veglia.cli.cmd_profile", "profile_group", "Inspect and manage profiles."),
    "python": (
        "veglia.cli.cmd_run",
        "python",
        "Open an interactive Python with the profile loaded and veglia's names defined, as "
        "`verdi shell` does: IPython when it is installed, else Python's own console.",
    ),
    "run": (
        "veglia.cli.cmd_run",
        "run",
        "Run the Python SCRIPT with the profile loaded, as `verdi run` does.",
    ),
    "setup": (
        "veglia.cli.cmd_setup",
        "setup",
        "Create a profile, asking for each site-wide option in turn, then self-test it.",
    ),
    "shell": (
        "veglia.cli.cmd_shell",
        "shell",
        "Run COMMAND with bash as a calc job, with full provenance, and print its output.",
    ),
    "status": (
        "veglia.cli.cmd_status",
        "status",
        "Check configuration, storage and broker; one ✔/✘ line each, exit 1 on any ✘.",
    ),
    "storage": (
        "veglia.cli.cmd_storage",
        "storage_group",
        "Inspect, migrate and maintain the profile's storage.",
    ),
    "user": (
        "veglia.cli.cmd_user",
        "user_group",
        "List the users of the profile: who owns nodes and connects to computers.",
    ),
    "verify": (
        "veglia.cli.cmd_verify",
        "verify",
        "Recompute the SHA-256 of stored files: of PKS, what they produced and what the "
        "processes they called produced (or of every node).",
    ),
}


class VegliaGroup(LazyGroup):
    """The built-in commands, imported when used, and the plugins' commands (the
    ``register_commands`` hook), added when a name is not a built-in."""

    _plugins_added = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        _add_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context | None, name: str) -> click.Command | None:
        if name not in self.lazy_commands:
            _add_plugin_commands()
        return super().get_command(ctx, name)


@click.group(
    cls=VegliaGroup,
    lazy_commands=BUILTIN_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
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
    # Lazy: profiles and their config only once a command runs (not for --version, --help).
    from veglia.cli.state import CliState

    ctx.obj = CliState(profile_name=profile_name, verbose=verbose)
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # Libraries (aio-pika, paramiko) log retries the user cannot act on; errors that
        # matter reach the user as exceptions with a message.
        logging.getLogger().setLevel(logging.CRITICAL)
    _resume_collector()


#: Whether :func:`main` holds Python's cyclic garbage collector off (see there).
_collector_held = False


def _hold_collector() -> None:
    global _collector_held
    gc.disable()
    _collector_held = True


def _resume_collector() -> None:
    """Turn the collector on again once the command is chosen (its module imported): what
    the command started with stays for its life, so it is frozen out of the collector's
    walks, as a daemon worker's is; a long command (watch, run, python) collects its own
    garbage as usual."""
    global _collector_held
    if _collector_held:
        _collector_held = False
        gc.freeze()
        gc.enable()


def _before_exit() -> None:
    """Close the database connections (PostgreSQL is told goodbye, SQLite's last connection
    folds its write-ahead log, as when the exit freed them), then freeze what is left: the
    interpreter's exit would walk every object it still tracks, more than once, to free
    memory that the exit frees anyway."""
    manage = sys.modules.get("veglia.manage")
    if manage is not None:
        manage.close_storage()
    gc.freeze()


def _add_plugin_commands() -> None:
    """Let plugins add their commands, once; a plugin cannot replace a built-in."""
    if VegliaGroup._plugins_added:
        return
    VegliaGroup._plugins_added = True
    # Lazy: the plugin manager (and every plugin's module) only for a non-built-in command.
    from veglia.cli.output import echo_warning
    from veglia.plugin_manager import get_plugin_manager

    try:
        get_plugin_manager().hook.register_commands(cli=cli)
    except PluginError as exc:
        # Keep the CLI usable (`veglia plugin list` helps find the broken plugin).
        echo_warning(str(exc))
    for name in [name for name in cli.commands if name in BUILTIN_COMMANDS]:
        echo_warning(f"A plugin tried to replace the built-in command {name!r}; kept ours.")
        del cli.commands[name]


def echo_error(message: str) -> None:
    # Lazy: rich only when there is an error to print (not for --version).
    from veglia.cli.output import echo_error as echo

    echo(message)


def exit_code_of(exc: BaseException) -> int:
    """The one place that decides what exit code an exception ends a command with (the codes
    are :class:`veglia.exceptions.CliExit`, listed in docs/cli.md)."""
    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    if isinstance(exc, click.UsageError):
        return CliExit.USAGE
    if isinstance(exc, VegliaError):
        return int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return CliExit.INTERRUPTED
    # click's Abort (a question answered no, or Ctrl-D), a plugin's ClickException, a bug.
    return CliExit.FAILED


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``veglia`` console script."""
    # Starting a command makes some 80,000 objects that live as long as it does (click,
    # rich, SQLAlchemy, the database driver, the command's module). The cyclic collector
    # walked them again and again as they loaded, and at the exit, and found nothing to
    # free: a quarter of a short command's CPU time (0.12 s of ``process list``'s 0.5 on
    # PostgreSQL). It is held off until the command is chosen (_resume_collector).
    _hold_collector()
    try:
        _run(argv)
    finally:
        _before_exit()


def _run(argv: list[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in args or "--verbose" in args or os.environ.get("VEGLIA_VERBOSE") == "1"
    try:
        result = cli.main(args=args, prog_name="veglia", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exit_code_of(exc))
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):  # click's Abort for a Ctrl-C
            echo_error("Interrupted.")
            sys.exit(CliExit.INTERRUPTED)
        # A question answered no (or Ctrl-D at a prompt): the user's choice, not an error.
        # Every command asks before it acts, so nothing was done; the exit code stays 1 so a
        # script does not go on as if it had been.
        click.echo("Nothing done.")
        sys.exit(exit_code_of(exc))
    except click.UsageError as exc:
        # Lazy: the table of verdi's forms only for a line click refused.
        from veglia.cli.verdi_forms import usage_hint

        if (hint := usage_hint(args, cli)) is not None:
            echo_error(f"veglia writes this as: {hint}")
        else:
            # One line, as every error (click's own shows the usage and a blank line first).
            see = f" See `{exc.ctx.command_path} --help`." if exc.ctx is not None else ""
            echo_error(exc.format_message() + see)
        sys.exit(exit_code_of(exc))
    except click.ClickException as exc:
        exc.show()
        sys.exit(exit_code_of(exc))
    except VegliaError as exc:
        if verbose:
            traceback.print_exc()
        echo_error(str(exc))
        sys.exit(exit_code_of(exc))
    except KeyboardInterrupt as exc:
        echo_error("Interrupted.")
        sys.exit(exit_code_of(exc))
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        echo_error(
            f"Unexpected {type(exc).__name__}: {exc} (run again with --verbose for the "
            "traceback, and please report it)"
        )
        sys.exit(exit_code_of(exc))
    sys.exit(result if isinstance(result, int) else CliExit.OK)


if __name__ == "__main__":  # pragma: no cover
    main()
