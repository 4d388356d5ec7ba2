"""``veglia presto`` (a working profile, no questions) and ``veglia setup`` (every question)."""

from __future__ import annotations

import shlex
from typing import Any

import click

from veglia.cli.output import console, echo_error, echo_info, echo_success, is_interactive
from veglia.cli.state import CliState, pass_state
from veglia.config.options import BUILTIN_OPTIONS, Option, get_option, get_options
from veglia.exceptions import InvalidOptionError, VegliaError
from veglia.profile_setup import SetupReport, create_profile, detect_local_broker
from veglia.selftest import CheckResult, run_checks


def print_checks(results: list[CheckResult]) -> bool:
    """One ✔/✘ line per check, with a hint under each failure; True when all passed."""
    for result in results:
        if result.ok:
            console.print(f"[green]✔[/green] {result.name + ':':<9} {result.detail}")
        else:
            console.print(f"[red]✘[/red] {result.name + ':':<9} {result.detail}")
            if result.hint:
                console.print(f"  [dim]hint:[/dim] {result.hint}")
    return all(result.ok for result in results)


def _summary(report: SetupReport, results: list[CheckResult]) -> int:
    echo_info("")
    echo_info("[bold]What was done[/bold]")
    for action in report.actions:
        echo_info(f"  • {action}")
    echo_info("")
    echo_info("[bold]Self-test[/bold]")
    if print_checks(results):
        echo_success(f"Profile {report.profile.name!r} is ready. Next: `veglia status`.")
        return 0
    echo_error(
        f"Profile {report.profile.name!r} was saved, but the self-test failed. Fix what the "
        "hints say (`veglia config set ...`), then check again with `veglia status`."
    )
    return 1


@click.command("presto")
@click.option("--profile-name", default="presto", show_default=True, help="Name of the profile.")
@click.option(
    "--broker/--no-broker",
    "use_broker",
    default=None,
    help="Use the local RabbitMQ (default: when it answers on 127.0.0.1:5672).",
)
@pass_state
def presto(state: CliState, profile_name: str, use_broker: bool | None) -> int:
    """Create a working profile with no questions: SQLite, localhost, direct scheduler."""
    config = state.config
    if profile_name in config.profile_names:
        echo_success(
            f"Profile {profile_name!r} exists already in {config.home}; nothing to do. "
            "Check it with `veglia status`."
        )
        return 0
    options: dict[str, Any] = {}
    if use_broker is not False:
        url = detect_local_broker()
        if url:
            options["broker.url"] = url
        elif use_broker:
            raise InvalidOptionError(
                "--broker was given but no RabbitMQ answers on 127.0.0.1:5672 with guest/guest."
            )
    report = create_profile(config, profile_name, options)
    if "broker.url" not in options:
        report.actions.append("no broker: the daemon runs as a single process")
    return _summary(report, run_checks(report.profile))


def _flag(option: Option) -> str:
    return "--" + option.name.replace(".", "-").replace("_", "-")


def _ask(option: Option) -> Any:
    """Prompt until the answer is valid; explain what is allowed after a wrong one."""
    echo_info(f"\n[bold]{option.name}[/bold]: {option.description}")
    choices = option.allowed_choices()
    if choices:
        echo_info(f"  allowed: {', '.join(choices)}")
    elif option.hint:
        echo_info(f"  format: {option.hint}")
    default = option.format(option.default)
    while True:
        answer = click.prompt(
            f"  {option.name}",
            default=default,
            show_default=bool(default) and not option.secret,
            hide_input=option.secret and is_interactive(),
        )
        try:
            return option.validate(answer)
        except InvalidOptionError as exc:
            echo_error(str(exc))
            echo_info("  Please answer again.")


def _setup_options() -> list[Option]:
    return [option for option in get_options().values() if option.setup]


def _with_setup_flags(function: Any) -> Any:
    """One ``--flag VALUE`` per built-in site-wide option, so setup runs without questions.

    Built from the built-in catalogue so that importing the CLI loads no plugin; plugins'
    options go through ``--option NAME=VALUE``.
    """
    for option in reversed([o for o in BUILTIN_OPTIONS if o.setup]):
        function = click.option(
            _flag(option),
            option.name.replace(".", "__"),
            default=None,
            metavar="TEXT",
            help=option.description,
        )(function)
    return function


@click.command("setup")
@click.option("--profile-name", required=False, help="Name of the new profile.")
@click.option("-n", "--non-interactive", is_flag=True, help="Ask nothing; use flags and defaults.")
@click.option(
    "--option",
    "extra",
    multiple=True,
    metavar="NAME=VALUE",
    help="Set any option, including plugins' ones; repeatable.",
)
@_with_setup_flags
@pass_state
def setup(
    state: CliState,
    /,
    profile_name: str | None,
    non_interactive: bool,
    extra: tuple[str, ...],
    **flags: Any,
) -> int:
    """Create a profile, asking for each site-wide option in turn, then self-test it."""
    config = state.config
    if not profile_name:
        if non_interactive:
            raise InvalidOptionError("--profile-name is required with --non-interactive.")
        profile_name = click.prompt("Profile name", default="default")
    if profile_name in config.profile_names:
        raise InvalidOptionError(
            f"Profile {profile_name!r} exists already; pick another --profile-name, or change "
            f"its options with `veglia -p {profile_name} config set`."
        )
    given: dict[str, Any] = {
        key.replace("__", "."): value for key, value in flags.items() if value is not None
    }
    for item in extra:
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidOptionError(f"--option {item!r} is not NAME=VALUE.")
        given[name.strip()] = value
    values = {name: get_option(name).validate(value) for name, value in given.items()}
    for option in _setup_options():
        if option.name not in values and not non_interactive:
            values[option.name] = _ask(option)
    # Keep only what differs from the defaults, so later releases can change defaults.
    options = {
        name: value
        for name, value in values.items()
        if value != get_options()[name].default and value != ""
    }
    try:
        report = create_profile(config, profile_name, options)
    except VegliaError:
        if not non_interactive:
            _print_rerun(profile_name, options)
        raise
    return _summary(report, run_checks(report.profile))


def _print_rerun(profile_name: str, options: dict[str, Any]) -> None:
    """The answers as flags: after fixing the cause, the same setup without the questions."""
    flags = {_flag(option): option.name for option in BUILTIN_OPTIONS if option.setup}
    words = ["veglia", "setup", "-n", "--profile-name", profile_name]
    for name, value in options.items():
        option = get_option(name)
        text = "****" if option.secret else option.format(value)
        flag = next((f for f, n in flags.items() if n == name), None)
        words += [flag, text] if flag else ["--option", f"{name}={text}"]
    echo_info(
        "Your answers, to run the setup again without questions once the cause is fixed"
        + (" (type the password instead of ****)" if "****" in words else "")
        + ":\n  "
        + shlex.join(words),
    )


COMMANDS = [presto, setup]
