"""``veglia computer set``, ``relabel`` and ``duplicate``: change a computer that is set up,
or make a new one from it, with the flags of ``veglia computer setup``.

A running daemon follows these changes without a restart: its workers read a computer's
settings again at most every ``computer_settings.TTL`` seconds. What active jobs depend on
for good (the scheduler that knows their job ids, the transport, the label they were
launched with) is refused while they run.
"""

from __future__ import annotations

from typing import Any

import click

from veglia.cli.cmd_computer_setup import (
    FieldFlagsCommand,
    check_label,
    setup_fields,
    shown,
    with_field_flags,
)
from veglia.cli.completion import complete_computer_labels
from veglia.cli.output import echo_info, echo_success, echo_warning
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import ConfigurationError, InvalidOptionError, ProcessActiveError
from veglia.orm.computers import Computer, load_computer, property_defaults
from veglia.orm.queries import processes_on_computer

__all__ = [
    "apply_changes",
    "computer_duplicate",
    "computer_relabel",
    "computer_set",
    "refuse_active",
]

#: setup's field names of the computer's own columns -> the Computer attribute.
_COLUMNS = {
    "hostname": "hostname",
    "description": "description",
    "transport": "transport_type",
    "scheduler": "scheduler_type",
}


def refuse_active(computer: Computer, doing: str) -> None:
    """ProcessActiveError naming the processes that have not ended on ``computer``."""
    assert computer.pk is not None
    active = processes_on_computer(computer.pk)
    if not active:
        return
    named = ", ".join(f"{pk} ({kind or 'process'}, {state})" for pk, kind, state in active[:10])
    more = f" and {len(active) - 10} more" if len(active) > 10 else ""
    raise ProcessActiveError(
        f"Refusing to {doing} computer {computer.label!r}: process"
        f"{'es' if len(active) > 1 else ''} {named}{more} use{'' if len(active) > 1 else 's'} "
        f"it and {'have' if len(active) > 1 else 'has'} not ended. Wait until "
        f"{'they end' if len(active) > 1 else 'it ends'} (`veglia process list`), or kill "
        f"{'them' if len(active) > 1 else 'it'} (`veglia process kill "
        f"{' '.join(str(pk) for pk, _, _ in active[:10])}`), then run this again."
    )


def apply_changes(
    computer: Computer, given: dict[str, Any], reset: tuple[str, ...] = ()
) -> list[str]:
    """Set the fields given as flags (converted as setup does) and reset the properties in
    ``reset`` to their defaults; what changed, as ``name: old -> new``."""
    defaults = property_defaults()
    unknown = sorted(set(reset) - set(defaults))
    if unknown:
        raise InvalidOptionError(
            f"--reset {', '.join(unknown)}: not a property (properties: {', '.join(defaults)})."
        )
    changes: list[str] = []
    for field in setup_fields():
        raw = given.get(field.name)
        if raw is None or field.name == "label":
            continue
        value = field.from_flag(raw)
        if field.name in _COLUMNS:
            old = getattr(computer, _COLUMNS[field.name])
            setattr(computer, _COLUMNS[field.name], value)
        else:
            old = computer.get_property(field.name)
            computer.properties[field.name] = value
        if old != value:
            changes.append(f"{field.name}: {shown(old)!r} -> {shown(value)!r}")
    for name in reset:
        if name in computer.properties:
            old = computer.properties.pop(name)
            changes.append(f"{name}: {shown(old)!r} -> default {shown(defaults[name])!r}")
    return changes


@click.command("set", cls=FieldFlagsCommand)
@click.argument("label", shell_complete=complete_computer_labels)
@click.option(
    "--reset",
    multiple=True,
    metavar="PROPERTY",
    help="Put a property back to its default (workdir, prepend_text, ...); repeatable.",
)
@with_field_flags(skip=("label",), defaults=False)
@pass_state
def computer_set(
    state: CliState, /, label: str, reset: tuple[str, ...], **given: str | None
) -> None:
    """Change computer LABEL: the fields and properties given as flags, the rest kept.

    The flags are those of `veglia computer setup`; `veglia computer relabel` renames it.
    A running daemon uses the new settings for its next connection or poll. Changing the
    transport drops your connection options (configure again); the transport or the
    scheduler cannot change while jobs on it have not ended.
    """
    state.profile  # noqa: B018 -- load the chosen profile
    computer = load_computer(label)
    before = (computer.transport_type, computer.scheduler_type)
    changes = apply_changes(computer, given, reset)
    if not changes:
        echo_info(
            f"Nothing changed on {computer.label!r}: give the flags to change (see `veglia "
            "computer set --help`), and `veglia computer show` for the current values."
        )
        return
    if (computer.transport_type, computer.scheduler_type) != before:
        refuse_active(computer, "change the transport or scheduler of")
    computer.save()
    echo_success(f"Computer {computer.label!r} changed: {'; '.join(changes)}.")
    assert computer.pk is not None
    active = processes_on_computer(computer.pk)
    if active:
        echo_info(
            f"{len(active)} active job(s) on it use the new settings from their next step "
            "(a running daemon reads them again within a second); those already uploaded keep "
            "their work dirs."
        )
    if computer.transport_type != before[0]:
        step = "test" if computer.needs_no_configuration else "configure"
        echo_warning(
            f"The transport changed, so your connection options were dropped. Next: "
            f"`veglia computer {step} {computer.label}`."
        )


@click.command("relabel")
@click.argument("old", metavar="LABEL", shell_complete=complete_computer_labels)
@click.argument("new", metavar="NEW_LABEL")
@pass_state
def computer_relabel(state: CliState, old: str, new: str) -> None:
    """Rename computer LABEL to NEW_LABEL (refused while jobs on it have not ended)."""
    state.profile  # noqa: B018
    computer = load_computer(old)
    new = check_label(new)
    # Jobs find their computer, their outage and hold marks by the label they started with.
    refuse_active(computer, "relabel")
    previous, computer.label = computer.label, new
    computer.save()
    echo_success(
        f"Computer {previous!r} is now {new!r}; its codes are now CODE@{new}. Finished jobs "
        "keep the label they ran with in their record."
    )


@click.command("duplicate", cls=FieldFlagsCommand)
@click.argument("label", shell_complete=complete_computer_labels)
@click.argument("new", metavar="NEW_LABEL")
@click.option(
    "--copy-configuration/--no-copy-configuration",
    default=True,
    help="Copy your connection options too (when the transport stays) [default: copy].",
)
@with_field_flags(skip=("label",), defaults=False)
@pass_state
def computer_duplicate(
    state: CliState, /, label: str, new: str, copy_configuration: bool, **given: str | None
) -> None:
    """Make computer NEW_LABEL as a copy of LABEL, changing the fields given as flags.

    Its codes are not copied: `veglia code create` them on the new computer.
    """
    state.profile  # noqa: B018
    source = load_computer(label)
    copy = Computer(
        check_label(new),
        source.hostname,
        source.transport_type,
        source.scheduler_type,
        source.description,
        properties=dict(source.properties),
    )
    changes = apply_changes(copy, given)
    copy.store()
    configured = copy.needs_no_configuration
    if not configured and copy_configuration and copy.transport_type == source.transport_type:
        try:
            copy.configure(**source.get_auth_params())
            configured = True
        except ConfigurationError:  # the source was not configured: nothing to copy
            pass
    what = f", with {'; '.join(changes)}" if changes else ""
    step = "test" if configured else "configure"
    echo_success(
        f"Computer {copy.label!r} (pk {copy.pk}) made from {source.label!r}{what}"
        f"{' and its connection options' if configured and not copy.needs_no_configuration else ''}"
        f". Next: `veglia computer {step} {copy.label}`."
    )
