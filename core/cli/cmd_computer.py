"""``veglia computer``: set up, configure, test, list and show computers, as ``verdi computer``."""

from __future__ import annotations

import functools
import posixpath
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from veglia.cli.output import console, echo_error, echo_info, echo_success, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.config.values import format_queues, parse_queues
from veglia.entry_points import TransportFactory, get_entry_points
from veglia.exceptions import ConfigurationError, InvalidOptionError, PluginError, VegliaError
from veglia.orm.computers import (
    COMPUTER_PROPERTIES,
    Computer,
    ComputerProperty,
    load_computer,
    plugin_computer_properties,
    property_defaults,
)
from veglia.orm.queries import configured_computer_pks
from veglia.selftest import CheckResult
from veglia.workdir_root import private_root

_TRUE, _FALSE = ("true", "yes", "y", "1", "on"), ("false", "no", "n", "0", "off")


# -- setup -----------------------------------------------------------------------------------------
def _installed(group: str, kind: str, value: str) -> str:

    names = [ep.name for ep in get_entry_points(group)]
    if value not in names:
        raise InvalidOptionError(
            f"{value!r} is not an installed {kind}; installed {kind}s: {', '.join(names) or 'none'}"
            f" (see `veglia plugin list {group}`)."
        )
    return value


def _label(value: str) -> str:

    value = value.strip()
    if not value or any(c.isspace() for c in value) or "@" in value or value.isdigit():
        raise InvalidOptionError(
            f"Computer label {value!r} must be non-empty, without spaces or '@', and not a number."
        )
    if any(computer.label == value for computer in Computer.list()):
        raise InvalidOptionError(f"A computer labelled {value!r} exists already; pick another.")
    return value


def _rule(test: Callable[[str], bool], message: str) -> Callable[[str], str]:
    """A converter that strips the value and refuses it when ``test`` fails."""

    def convert(value: str) -> str:
        if not test(value.strip()):
            raise InvalidOptionError(message.replace("VALUE", repr(value)))
        return value.strip()

    return convert


def _formats(value: str) -> bool:
    try:
        value.format(tot_num_mpiprocs=1)
    except (KeyError, IndexError, ValueError):
        return False
    return True


_text = _rule(lambda value: True, "")
_required = _rule(bool, "A value is required.")
_workdir = _rule(
    lambda value: value.startswith(("/", "{home}")),
    "Work dir VALUE must be an absolute path or start with {home} (it may contain {username}).",
)
_mpirun = _rule(_formats, "mpirun command VALUE may only use the placeholder {tot_num_mpiprocs}.")


def _number(kind: type, minimum: float) -> Callable[[str], Any]:
    def convert(value: str) -> Any:
        try:
            number = kind(str(value).strip())
        except ValueError:
            number = None
        if number is None or number < minimum:
            what = "a whole number" if kind is int else "a number"
            raise InvalidOptionError(f"{value!r} is not {what} >= {minimum:g}.")
        return number

    return convert


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE + _FALSE:
        return text in _TRUE
    raise InvalidOptionError(f"{value!r} is not yes or no.")


def _queues(value: str) -> str:

    try:
        return format_queues(parse_queues(value))
    except ValueError as exc:
        raise InvalidOptionError(str(exc)) from None


@dataclass(frozen=True)
class SetupField:
    """One answer of ``veglia computer setup``: its flags, question and converter."""

    name: str
    flags: str
    help: str
    convert: Callable[[str], Any]
    required: bool = False
    #: The property a plugin added (computer_properties), for the fields made from those.
    added: ComputerProperty | None = None

    @property
    def default(self) -> Any:
        if self.added is not None:
            return self.added.default
        return None if self.required else COMPUTER_PROPERTIES.get(self.name, "")


_transport = functools.partial(_installed, "transports", "transport")
_scheduler = functools.partial(_installed, "schedulers", "scheduler")
_F = SetupField
SETUP_FIELDS: list[SetupField] = [
    _F("label", "-L --label", "Short unique name of the computer.", _label, True),
    _F("hostname", "-H --hostname", "Host to connect to.", _required, True),
    _F("description", "-D --description", "What it is.", _text),
    _F("transport", "-T --transport", "How to reach it (a transport plugin).", _transport, True),
    _F("scheduler", "-S --scheduler", "Batch system (a scheduler plugin).", _scheduler, True),
    _F("workdir", "-w --workdir", "Where job folders go; {username} allowed.", _workdir),
    _F("safe_interval", "--safe-interval", "Seconds between connections.", _number(float, 0)),
    _F("minimum_poll_interval", "--minimum-poll-interval", "Seconds between polls, at least.",
       _number(float, 0)),
    _F("mpirun_command", "--mpirun-command", "MPI launcher line.", _mpirun),
    _F("default_mpiprocs_per_machine", "-m --mpiprocs-per-machine",
       "MPI processes per machine by default.", _number(int, 1)),
    _F("prepend_text", "--prepend-text", "Shell lines before each job.", _text),
    _F("append_text", "--append-text", "Shell lines after each job.", _text),
    _F("queues", "--queues", "Queues with limits, 'short:mem=4G:time=1h; long:time=2d' "
       "(empty: ask the scheduler).", _queues),
    _F("measure_usage", "--measure-usage",
       "Record each job's peak memory with /usr/bin/time (yes/no).", _boolean),
]  # fmt: skip


def _plugin_convert(prop: ComputerProperty) -> Callable[[str], Any]:
    if prop.parse is None:
        return _boolean if isinstance(prop.default, bool) else _text
    parse = prop.parse

    def convert(value: str) -> Any:
        try:
            return parse(value)
        except ValueError as exc:
            raise InvalidOptionError(f"{prop.name}: {exc}") from None

    return convert


def setup_fields() -> list[SetupField]:
    """The built-in fields, then one per property the plugins add (computer_properties)."""
    added = [
        _F(p.name, "--" + p.name.replace("_", "-"), p.help, _plugin_convert(p), added=p)
        for p in plugin_computer_properties().values()
    ]
    return [*SETUP_FIELDS, *added]


def _flag_help(field: SetupField) -> str:
    default = _shown(field.default)
    return f"{field.help} [default: {default}]" if default else field.help


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else str(value)


def _ask(field: SetupField, hint: str = "") -> Any:
    """Prompt until the answer converts; explain what was wrong after a bad one."""
    default = field.default
    echo_info(f"\n[bold]{field.name}[/bold]: {field.help}{hint}")
    while True:
        answer = click.prompt(
            f"  {field.name}", default=_shown(default), show_default=bool(_shown(default))
        )
        try:
            return field.convert(answer)
        except InvalidOptionError as exc:
            echo_error(str(exc))
            echo_info("  Please answer again.")


def _with_setup_flags(function: Any) -> Any:
    for field in reversed(SETUP_FIELDS):
        function = click.option(*field.flags.split(), field.name, help=_flag_help(field))(function)
    return function


class _SetupCommand(click.Command):
    """Adds one flag per property the plugins add, loaded only when used."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        taken = {opt for param in params for opt in getattr(param, "opts", [])}
        extra = [
            click.Option([field.flags, field.name], help=_flag_help(field))
            for field in setup_fields()[len(SETUP_FIELDS) :]
            if field.flags not in taken  # then only asked, or its default
        ]
        return [*params[:-1], *extra, params[-1]] if params else extra


@click.group("computer")
def computer_group() -> None:
    """Set up, configure, test and inspect computers."""


@computer_group.command("setup", cls=_SetupCommand)
@click.option("-n", "--non-interactive", is_flag=True, help="Ask nothing; use flags and defaults.")
@_with_setup_flags
@pass_state
def computer_setup(state: CliState, non_interactive: bool, **given: str | None) -> None:
    """Create a computer, asking for each field not given as a flag."""

    state.profile  # noqa: B018 -- load the chosen profile
    values: dict[str, Any] = {}
    for field in setup_fields():
        raw = given.get(field.name)
        if raw is not None:
            values[field.name] = field.convert(raw)
        elif non_interactive:
            if field.required:
                flag = field.flags.split()[-1]
                raise InvalidOptionError(f"{flag} is required with --non-interactive.")
            values[field.name] = field.default
        else:
            hint = ""
            if field.name in ("transport", "scheduler"):
                names = ", ".join(ep.name for ep in get_entry_points(f"{field.name}s"))
                hint = f"\n  installed: {names}"
            values[field.name] = _ask(field, hint)
    properties = {
        name: values[name]
        for name, default in property_defaults().items()
        if name in values and values[name] != default
    }
    fields = ("label", "hostname", "transport", "scheduler", "description")
    computer = Computer(*(values[name] for name in fields), properties=properties).store()
    step = "configure" if not computer.needs_no_configuration else "test"
    echo_success(
        f"Computer {computer.label!r} (pk {computer.pk}) set up: {computer.transport_type}, "
        f"{computer.scheduler_type}. Next: `veglia computer {step} {computer.label}`."
    )


# -- configure -------------------------------------------------------------------------------------
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
    try:
        if option.type is bool:
            return _boolean(value)
        if option.type in (int, float) and not isinstance(value, bool):
            return option.type(str(value).strip())
    except (InvalidOptionError, ValueError):
        kind = {bool: "yes or no", int: "a whole number", float: "a number"}[option.type]
        raise InvalidOptionError(f"{flag}: {value!r} is not {kind}.") from None
    return option.type(value)


def _ask_auth(option: Any, current: Any) -> Any:
    echo_info(f"\n[bold]{option.name}[/bold]: {option.description}")
    while True:
        answer = click.prompt(
            f"  {option.name}", default=_shown(current), show_default=bool(_shown(current))
        )
        try:
            return convert_auth_value(option, answer)
        except InvalidOptionError as exc:
            echo_error(str(exc))
            echo_info("  Please answer again ('!' to unset).")


@computer_group.command("configure", cls=_ConfigureCommand)
@click.argument("label")
@click.option("-n", "--non-interactive", is_flag=True, help="Ask nothing; keep other values.")
@pass_state
def computer_configure(state: CliState, label: str, non_interactive: bool, **flags: Any) -> None:
    """Set how you connect to computer LABEL: the options of its transport."""

    state.profile  # noqa: B018
    computer = load_computer(label)
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


# -- test, list, show ------------------------------------------------------------------------------
def _print_checks(results: list[CheckResult]) -> bool:
    width = max(len(r.name) for r in results) + 2
    for result in results:
        mark = "[green]✔[/green]" if result.ok else "[red]✘[/red]"
        console.print(f"{mark} {result.name + ':':<{width}}", end="")
        console.print(result.detail, markup=False)
        if not result.ok and result.hint:
            console.print(f"  [dim]hint:[/dim] {result.hint}")
    return all(r.ok for r in results)


def _check(results: list[CheckResult], name: str, hint: str, step: Callable[[], str]) -> bool:
    try:
        results.append(CheckResult(name, True, step()))
    except (VegliaError, OSError) as exc:
        results.append(CheckResult(name, False, str(exc), hint))
        return False
    return True


def _workdir_check(transport: Any, workdir: str) -> str:

    private_root(transport, workdir)
    probe = posixpath.join(workdir, f".veglia-test-{secrets.token_hex(4)}")
    data = secrets.token_bytes(64)
    transport.write_bytes(probe, data)
    try:
        if transport.read_bytes(probe) != data:
            raise ConfigurationError(f"{probe} read back different bytes than were written.")
    finally:
        transport.remove(probe)
    return f"{workdir} exists and is writable"


def _list_jobs(transport: Any, scheduler: Any, user: str) -> str:
    command = scheduler.joblist_command(user=user)
    jobs = scheduler.parse_joblist_output(*transport.exec_command(command, timeout=60))
    return f"`{command}` ran: {len(jobs)} jobs of {user}"


@computer_group.command("test")
@click.argument("label")
@pass_state
def computer_test(state: CliState, label: str) -> int:
    """Connect to computer LABEL and check user, work dir and scheduler; ✔/✘ per check."""

    state.profile  # noqa: B018
    computer = load_computer(label)
    transport, scheduler = computer.get_transport(), computer.get_scheduler()
    fix = (
        f"check the options (`veglia computer show {label}`) and fix them with "
        f"`veglia computer configure {label}`"
    )
    checks: list[CheckResult] = []
    start = time.monotonic()
    whoami = functools.cache(transport.whoami)

    def connect() -> str:
        transport.open()
        return (
            f"{computer.transport_type} to {computer.hostname} in {time.monotonic() - start:.2f} s"
        )

    try:
        if _check(checks, "connect", fix, connect):
            _check(checks, "whoami", fix, lambda: f"commands run as {whoami()}")
            user = whoami() if checks[-1].ok else "unknown"
            workdir = computer.get_workdir(user, transport.home() if checks[-1].ok else "")
            hint = "pick a work dir under your home (`veglia computer setup -w`)"
            _check(checks, "work dir", hint, lambda: _workdir_check(transport, workdir))
            hint = f"is {computer.scheduler_type} installed there, and on the PATH?"
            _check(checks, "scheduler", hint, lambda: _list_jobs(transport, scheduler, user))
    finally:
        transport.close()
    if _print_checks(checks):
        echo_success(f"Computer {label!r} is ready for jobs.")
        return 0
    return 1


@computer_group.command("list")
@raw_option
@pass_state
def computer_list(state: CliState, raw: bool) -> None:
    """List computers and whether you configured them."""

    state.profile  # noqa: B018
    configured = configured_computer_pks()
    rows = [
        (c.pk, c.label, c.hostname, c.transport_type, c.scheduler_type, c.pk in configured)
        for c in Computer.list()
    ]
    print_table(("PK", "Label", "Hostname", "Transport", "Scheduler", "Configured"), rows, raw=raw)


@computer_group.command("show")
@click.argument("label")
@pass_state
def computer_show(state: CliState, label: str) -> None:
    """Show computer LABEL: its fields, properties and your connection options."""

    state.profile  # noqa: B018
    computer = load_computer(label)
    rows: list[tuple[str, Any]] = [
        ("pk", computer.pk),
        ("uuid", computer.uuid),
        ("label", computer.label),
        ("hostname", computer.hostname),
        ("description", computer.description),
        ("transport", computer.transport_type),
        ("scheduler", computer.scheduler_type),
    ]
    defaults = property_defaults()
    for name in defaults:
        value = computer.get_property(name)
        rows.append((name, _shown(value) + ("" if name in computer.properties else " (default)")))
    for name in sorted(set(computer.properties) - set(defaults)):
        rows.append((name, f"{_shown(computer.properties[name])} (of a plugin not loaded)"))
    print_table(("Property", "Value"), rows)
    console.print("")
    try:
        params = computer.get_transport().auth_params
        stored = computer.get_auth_params()
    except ConfigurationError as exc:
        console.print(str(exc), markup=False)
        return
    if not params:
        console.print(f"{computer.transport_type} needs no connection options.")
        return
    print_table(
        ("Connection", "Value"),
        [(k, _shown(v) + ("" if k in stored else " (default)")) for k, v in params.items()],
    )


COMMANDS = [computer_group]
