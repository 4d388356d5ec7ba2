"""AiiDA's ``verdi`` forms of veglia's commands, in one place.

Users come from ``verdi``. Where its form is unambiguous veglia takes it too (a hidden alias
command, an extra name of an option); where it is not, the command ends with wrong usage
(exit 2) and the one line :func:`veglia_writes` gives, instead of click's bare "unexpected
extra argument". docs/cli.md's "From verdi" table lists each form.
"""

from __future__ import annotations

import copy

import click

from veglia.exceptions import VerdiFormError

__all__ = ["CODE_TYPES", "VERDI_FORMS", "add_alias", "veglia_writes"]

#: Each verdi form veglia takes or answers, as docs/cli.md's "From verdi" table writes it,
#: with where it is handled (a test keeps the table in step).
VERDI_FORMS: dict[str, str] = {
    "verdi profile setdefault NAME": "works: profile set-default, by add_alias (cmd_profile)",
    "verdi computer configure core.ssh LABEL": (
        "works when it names the computer's transport, else the hint (cmd_computer_configure)"
    ),
    "verdi code create core.code.installed -n --label L --computer C --filepath-executable PATH": (
        "works: TYPE, --filepath-executable and -n of code create (cmd_code)"
    ),
    "verdi code create core.code.portable / core.code.containerized": "the hint: CODE_TYPES",
    "verdi process list -X / -r / --paused": "works: options of process list (cmd_process)",
    "verdi group add-nodes -G GROUP [-f] PK...": "works: a hidden command (cmd_group)",
    "verdi group remove-nodes -G GROUP [-c] [-f] [PK...]": "works: a hidden command (cmd_group)",
    "verdi config set --global KEY VALUE": "the hint: options are per profile (cmd_config)",
    "verdi profile delete --delete-data / --keep-data NAME": (
        "works: --keep-data/--delete-data of profile delete (cmd_profile)"
    ),
    "verdi shell": "the hint: veglia python, when veglia shell has no COMMAND (cmd_shell)",
}

#: verdi's kinds of code (``verdi code create TYPE``) and what veglia makes of them: None for
#: the one veglia has (an executable installed on the computer), else the hint.
CODE_TYPES: dict[str, str | None] = {
    "core.code.installed": None,
    "core.code.portable": (
        "veglia code create --label L --computer C --executable /ABSOLUTE/PATH (veglia's codes "
        "are installed on the computer: copy the files there first)"
    ),
    "core.code.containerized": (
        "veglia code create --label L --computer C --executable /ABSOLUTE/PATH --prepend-text "
        "'...' (run the container from the prepend text)"
    ),
}


def veglia_writes(form: str) -> VerdiFormError:
    """The error for a verdi form veglia writes as ``form`` (``veglia ...``)."""
    return VerdiFormError(f"veglia writes this as: {form}")


def add_alias(group: click.Group, verdi_name: str, command: click.Command) -> None:
    """Add ``command`` to ``group`` under verdi's name too, left out of the group's help
    (which lists veglia's name only)."""
    alias = copy.copy(command)
    alias.name = verdi_name
    alias.hidden = True
    group.add_command(alias, verdi_name)
