"""``veglia run SCRIPT [ARGS...]`` and ``veglia python``: Python with the profile loaded and
veglia's names at hand, as ``verdi run`` and ``verdi shell`` (``veglia shell`` runs a command
line as a calc job)."""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

import veglia
from veglia import engine, entry_points, orm
from veglia.cli.state import CliState, pass_state
from veglia.cli.status_line import status_line
from veglia.exceptions import ScriptError
from veglia.manage import get_storage

__all__ = ["python", "run", "user_namespace"]

#: What ``veglia run`` and ``veglia python`` preload from veglia's packages, besides every
#: public name of ``veglia.orm`` (``Int``, ``Group``, ``load_node``...).
_ENGINE_NAMES = (
    "run",
    "run_get_node",
    "submit",
    "CalcJob",
    "WorkChain",
    "ToContext",
    "ExitCode",
    "if_",
    "while_",
    "return_",
    "append_",
)
_FACTORIES = (
    "CalculationFactory",
    "WorkflowFactory",
    "DataFactory",
    "ParserFactory",
    "SchedulerFactory",
    "TransportFactory",
    "MonitorFactory",
    "DataSourceFactory",
)


def user_namespace() -> dict[str, Any]:
    """The names a script run by ``veglia run`` (or ``veglia python``) finds defined: the
    packages ``veglia``, ``orm`` and ``engine``, the ORM's classes and loaders, ``run`` and
    ``submit`` and the workflow helpers, the plugin factories, ``get_profile``."""
    namespace: dict[str, Any] = {"veglia": veglia, "orm": orm, "engine": engine}
    namespace.update({name: getattr(orm, name) for name in orm.__all__})
    namespace.update({name: getattr(engine, name) for name in _ENGINE_NAMES})
    namespace.update({name: getattr(entry_points, name) for name in _FACTORIES})
    namespace.update(get_profile=veglia.get_profile, get_storage=veglia.get_storage)
    return namespace


def _loaded(state: CliState) -> dict[str, Any]:
    """Load the profile and open its storage (a wrong profile or an old schema is one line
    here, before any of the user's code runs); veglia's names."""
    state.profile  # noqa: B018 -- load the chosen profile
    get_storage()
    return user_namespace()


def _exit_status(exc: SystemExit) -> int:
    """The exit status of a script that called ``sys.exit(code)``, as Python gives it."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    click.echo(str(exc.code), err=True)
    return 1


def _print_script_error(exc: BaseException, filename: str) -> None:
    """The traceback of what the script raised, from the script's own frames on (the ones
    of this command are veglia's, not the user's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    sys.stdout.flush()  # what the script printed comes first
    # A syntax error is shown as Python shows it: where in the script, no frame of veglia's.
    traceback.print_exception(type(exc), exc, None if isinstance(exc, SyntaxError) else tb)


def _source(script: str) -> bytes:
    path = Path(script)
    if not path.exists():
        raise ScriptError(f"No script {script}; check the name.")
    if path.is_dir():
        raise ScriptError(f"{script} is a folder: give the Python file to run.")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ScriptError(f"Cannot read {script}: {exc.strerror or exc}.") from None


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.argument("script", metavar="SCRIPT")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[ARGS]...")
@pass_state
def run(state: CliState, script: str, args: tuple[str, ...]) -> int:
    """Run the Python SCRIPT with the profile loaded, as `verdi run` does.

    The script runs as `__main__`, with `sys.argv` its name and ARGS (options after SCRIPT
    are its own), and finds veglia's names defined: orm, engine, load_node, Int, Group,
    run, submit, CalculationFactory, WorkflowFactory... (`veglia python` lists them). What it
    raises is shown with its traceback, and exits 1; `sys.exit(N)` exits N."""
    source = _source(script)
    namespace = _loaded(state)
    namespace.update(
        __name__="__main__", __file__=script, __doc__=None, __builtins__=builtins
    )  # fmt: skip
    try:
        code = compile(source, script, "exec")
    except (SyntaxError, ValueError) as exc:  # ValueError: a null byte in the source
        _print_script_error(exc, script)
        return 1
    sys.argv = [script, *args]
    # As `python SCRIPT`: modules beside the script are importable.
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with status_line():  # on a terminal, while the script's run() waits for its process
            exec(code, namespace)
    except SystemExit as exc:
        return _exit_status(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        _print_script_error(exc, script)
        return 1
    return 0


def _banner(namespace: dict[str, Any], profile: str) -> str:
    names = ", ".join(sorted(name for name in namespace if not name.startswith("_")))
    return f"veglia {namespace['veglia'].__version__}, profile {profile!r}. Loaded: {names}."


@click.command("python")
@click.option(
    "--plain", is_flag=True, help="Use Python's own console even if IPython is installed."
)
@pass_state
def python(state: CliState, plain: bool) -> None:
    """Open an interactive Python with the profile loaded and veglia's names defined, as
    `verdi shell` does: IPython when it is installed, else Python's own console."""
    namespace = _loaded(state)
    namespace.update(__name__="__main__", __doc__=None, __builtins__=builtins)
    banner = _banner(namespace, state.profile.name)
    if not plain and importlib.util.find_spec("IPython") is not None:
        # By name: IPython is optional (not a dependency, so no types for it either).
        ipython = importlib.import_module("IPython")
        click.echo(banner)
        ipython.start_ipython(argv=[], user_ns=namespace, display_banner=False)
        return
    # Lazy: the console only for this command.
    import code

    if sys.stdin.isatty():
        _complete_names(namespace)
    code.interact(banner=banner, local=namespace, exitmsg="")


def _complete_names(namespace: dict[str, Any]) -> None:
    """<TAB> completes the names defined (and their attributes) in Python's own console."""
    try:
        # Lazy: readline is for an interactive terminal only (and missing on some builds).
        import readline
        import rlcompleter
    except ImportError:
        return
    readline.set_completer(rlcompleter.Completer(namespace).complete)
    readline.parse_and_bind("tab: complete")


COMMANDS = [run, python]
