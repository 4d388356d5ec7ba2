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

__all__ = ["CODE_TYPES", "add_alias", "veglia_writes"]

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
