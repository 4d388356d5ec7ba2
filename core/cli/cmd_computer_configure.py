"""``veglia computer configure``: set how you connect to a computer, with one flag per auth
option of the installed transports."""

from __future__ import annotations

import functools
from typing import Any

import click

from veglia.cli.cmd_computer_setup import parse_yes_no, shown
from veglia.cli.completion import complete_computer_labels
from veglia.cli.output import echo_error, echo_info, echo_success
from veglia.cli.state import CliState, pass_state
from veglia.cli.verdi_forms import veglia_writes
from veglia.entry_points import TransportFactory, get_entry_points
from veglia.exceptions import ConfigurationError, InvalidOptionError, PluginError
from veglia.orm.computers import load_computer

__all__ = ["computer_configure", "convert_auth_value"]


@functools.cache
def _auth_catalogue() -> dict[str, tuple[Any, tuple[str, ...]]]:
    """Every installed transport's auth options: name -> (first option, transports)."""

    catalogue: dict[str, tuple[Any, tuple[str, ...]]] = {}
    for entry_point in get_entry_points("transports"):
        try:
            transport_class = TransportFactory(entry_point.name)
        except PluginError:
            continue  # a broken plugin must not break `configure` of the others
        for option in transport_class.auth_options:
            first, names = catalogue.get(option.name, (option, ()))
            catalogue[option.name] = (first, (*names, entry_point.name))
    return catalogue


class _ConfigureCommand(click.Command):
    """Adds one flag per auth option of the installed transports, loaded only when used."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        taken = {opt for param in params for opt in getattr(param, "opts", [])}
        extra: list[click.Parameter] = []
        for name, (option, transports) in _auth_catalogue().items():
            flag = "--" + name.replace("_", "-")
            if flag in taken:
                continue
            text = f"{option.description} [{', '.join(transports)}]"
            if option.type is bool:
                decl = f"{flag}/--no-{flag[2:]}"
                extra.append(click.Option([decl, f"auth__{name}"], default=None, help=text))
            else:
                metavar = {str: "TEXT", int: "INTEGER", float: "FLOAT"}.get(option.type, "VALUE")
                extra.append(click.Option([flag, f"auth__{name}"], metavar=metavar, help=text))
        return [*params[:-1], *extra, params[-1]] if params else extra


def convert_auth_value(option: Any, value: Any) -> Any:
    """A flag or prompt answer as the auth option's type; InvalidOptionError if it is not."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "!")):
        return None
    flag = "--" + option.name.replace("_", "-")
    if option.type not in (bool, int, float) or (
        option.type is not bool and isinstance(value, bool)
    ):
        return option.type(value)
    try:
        if option.type is bool:
            return parse_yes_no(value)
        number = option.type(str(value).strip())
    except (InvalidOptionError, ValueError):
        kind = {bool: "yes or no", int: "a whole number", float: "a number"}[option.type]
        raise InvalidOptionError(f"{flag}: {value!r} is not {kind}.") from None
    low, high = option.minimum, option.maximum
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = (
            f"at least {low}"
            if high is None
            else f"at most {high}"
            if low is None
            else f"between {low} and {high}"
        )
        raise InvalidOptionError(f"{flag}: {number} is not {bounds}.")
    return number


def _ask_auth(option: Any, current: Any) -> Any:
    echo_info(f"\n[bold]{option.name}[/bold]: {option.description}")
    while True:
        answer = click.prompt(
            f"  {option.name}", default=shown(current), show_default=bool(shown(current))
        )
        try:
            return convert_auth_value(option, answer)
        except InvalidOptionError as exc:
            echo_error(str(exc))
            echo_info("  Please answer again ('!' to unset).")


@click.command("configure", cls=_ConfigureCommand)
# verdi's form names the transport first: `computer configure core.ssh LABEL`.
@click.argument(
    "words", nargs=-1, required=True, metavar="LABEL", shell_complete=complete_computer_labels
)
@click.option("-n", "--non-interactive", is_flag=True, help="Ask nothing; keep other values.")
@pass_state
def computer_configure(
    state: CliState, /, words: tuple[str, ...], non_interactive: bool, **flags: Any
) -> None:
    """Set how you connect to computer LABEL: the options of its transport."""

    if len(words) > 2:
        raise click.UsageError(f"Got unexpected extra arguments ({' '.join(words[2:])}).")
    transport, label = words if len(words) == 2 else (None, words[0])
    if transport == "show":  # verdi's `computer configure show LABEL` lists the settings
        raise veglia_writes(f"veglia computer show {label}")
    state.profile  # noqa: B018
    if transport is None and label in {ep.name for ep in get_entry_points("transports")}:
        raise click.UsageError(f"Missing argument LABEL: the computer to configure over {label}.")
    computer = load_computer(label)
    if transport is not None and transport != computer.transport_type:
        raise veglia_writes(
            f"veglia computer configure {computer.label} (its transport is "
            f"{computer.transport_type}, not {transport})"
        )
    options = {o.name: o for o in TransportFactory(computer.transport_type).auth_options}
    given = {k[len("auth__") :]: v for k, v in flags.items() if v is not None}
    foreign = sorted(set(given) - set(options))
    if foreign:
        accepted = ", ".join("--" + n.replace("_", "-") for n in options) or "none"
        raise InvalidOptionError(
            f"{computer.transport_type} does not take "
            f"{', '.join('--' + n.replace('_', '-') for n in foreign)} (it takes: {accepted})."
        )
    try:
        values = {k: v for k, v in computer.get_auth_params().items() if k in options}
    except ConfigurationError:
        values = {}
    for name, value in given.items():
        values[name] = convert_auth_value(options[name], value)
    if not non_interactive:
        for name, option in options.items():
            if name not in given:
                values[name] = _ask_auth(option, values.get(name, option.default))
    stored = {k: v for k, v in values.items() if v is not None and v != options[k].default}
    computer.configure(**stored)
    shown = ", ".join(f"{k}={v}" for k, v in stored.items()) or "defaults"
    echo_success(
        f"Computer {computer.label!r} configured ({shown}). "
        f"Next: `veglia computer test {computer.label}`."
    )
