"""``veglia computer setup``: create a computer, from flags or by asking, one field at a time
(the built-in fields, then those the plugins add through ``computer_properties``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from veglia.cli.output import echo_error, echo_info, echo_success
from veglia.cli.state import CliState, pass_state
from veglia.config.values import format_queues, parse_queues
from veglia.entry_points import get_entry_points
from veglia.exceptions import InvalidOptionError
from veglia.orm.computers import (
    COMPUTER_PROPERTIES,
    Computer,
    ComputerProperty,
    plugin_computer_properties,
    property_defaults,
)

__all__ = [
    "SETUP_FIELDS",
    "FieldFlagsCommand",
    "SetupField",
    "check_label",
    "computer_setup",
    "parse_yes_no",
    "setup_fields",
    "shown",
    "with_field_flags",
]


_TRUE, _FALSE = ("true", "yes", "y", "1", "on"), ("false", "no", "n", "0", "off")


def _installed(group: str, kind: str, value: str) -> str:

    names = [ep.name for ep in get_entry_points(group)]
    if value not in names:
        raise InvalidOptionError(
            f"{value!r} is not an installed {kind}; installed {kind}s: {', '.join(names) or 'none'}"
            f" (see `veglia plugin list {group}`)."
        )
    return value


def check_label(value: str) -> str:
    """A new computer label: well formed and not taken."""

    value = value.strip()
    if not value or any(c.isspace() for c in value) or "@" in value or value.isdigit():
        raise InvalidOptionError(
            f"Computer label {value!r} must be non-empty, without spaces or '@', and not a number."
        )
    if any(computer.label == value for computer in Computer.list()):
        raise InvalidOptionError(
            f"A computer labelled {value!r} exists already; pick another, or change that one "
            f"with `veglia computer set {value}`."
        )
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


def parse_yes_no(value: Any) -> bool:
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

    def from_flag(self, raw: str) -> Any:
        """The value given as this field's flag, converted; a refusal names the flag, as
        click's own messages do (a prompt names the field already)."""
        try:
            return self.convert(raw)
        except InvalidOptionError as exc:
            if self.added is not None:
                raise  # a plugin property's message starts with its name already
            raise InvalidOptionError(f"{self.flags.split()[-1]}: {exc}") from None

    @property
    def default(self) -> Any:
        """What the prompt offers and ``--non-interactive`` takes: the property's default
        (for workdir the profile's ``workdir.root``)."""
        return None if self.required else property_defaults().get(self.name, "")

    @property
    def listed_default(self) -> Any:
        """The default ``--help`` shows: built without a profile, so the built-in one."""
        if self.added is not None:
            return self.added.default
        return None if self.required else COMPUTER_PROPERTIES.get(self.name, "")


_transport = functools.partial(_installed, "transports", "transport")
_scheduler = functools.partial(_installed, "schedulers", "scheduler")
_F = SetupField
SETUP_FIELDS: list[SetupField] = [
    _F("label", "-L --label", "Short unique name of the computer.", check_label, True),
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
    _F("move_jobs", "--move-jobs", "Move a job to a queue with a longer time limit when "
       "similar jobs took longer than its queue allows (yes/no).", parse_yes_no),
]  # fmt: skip


def _plugin_convert(prop: ComputerProperty) -> Callable[[str], Any]:
    if prop.parse is None:
        return parse_yes_no if isinstance(prop.default, bool) else _text
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
    default = shown(field.listed_default)
    return f"{field.help} [default: {default}]" if default else field.help


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else str(value)


def _ask(field: SetupField, hint: str = "") -> Any:
    """Prompt until the answer converts; explain what was wrong after a bad one."""
    default = field.default
    echo_info(f"\n[bold]{field.name}[/bold]: {field.help}{hint}")
    while True:
        answer = click.prompt(
            f"  {field.name}", default=shown(default), show_default=bool(shown(default))
        )
        try:
            return field.convert(answer)
        except InvalidOptionError as exc:
            echo_error(str(exc))
            echo_info("  Please answer again.")


F = TypeVar("F", bound=Callable[..., Any])


def with_field_flags(*, skip: tuple[str, ...] = (), defaults: bool = True) -> Callable[[F], F]:
    """A decorator adding one option per built-in field but ``skip``; with ``defaults``
    their help shows the default (setup), without it not (set, duplicate: they keep)."""

    def decorate(function: F) -> F:
        for field in reversed([f for f in SETUP_FIELDS if f.name not in skip]):
            text = _flag_help(field) if defaults else field.help
            function = click.option(*field.flags.split(), field.name, help=text)(function)
        return function

    return decorate


class FieldFlagsCommand(click.Command):
    """Adds one flag per property the plugins add, loaded only when used."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        taken = {opt for param in params for opt in getattr(param, "opts", [])}
        extra: list[click.Parameter] = [
            click.Option([field.flags, field.name], help=_flag_help(field))
            for field in setup_fields()[len(SETUP_FIELDS) :]
            if field.flags not in taken  # then only asked, or its default
        ]
        return [*params[:-1], *extra, params[-1]] if params else extra


@click.command("setup", cls=FieldFlagsCommand)
@click.option("-n", "--non-interactive", is_flag=True, help="Ask nothing; use flags and defaults.")
@with_field_flags()
@pass_state
def computer_setup(state: CliState, /, non_interactive: bool, **given: str | None) -> None:
    """Create a computer, asking for each field not given as a flag."""

    state.profile  # noqa: B018 -- load the chosen profile
    values: dict[str, Any] = {}
    for field in setup_fields():
        raw = given.get(field.name)
        if raw is not None:
            values[field.name] = field.from_flag(raw)
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
    label, hostname, transport, scheduler, description = (values[name] for name in fields)
    computer = Computer(
        label, hostname, transport, scheduler, description, properties=properties
    ).store()
    step = "configure" if not computer.needs_no_configuration else "test"
    echo_success(
        f"Computer {computer.label!r} (pk {computer.pk}) set up: {computer.transport_type}, "
        f"{computer.scheduler_type}. Next: `veglia computer {step} {computer.label}`."
    )
