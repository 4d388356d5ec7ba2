"""AiiDA's ``verdi`` forms of veglia's commands, in one place.

Users come from ``verdi``. Where its form is unambiguous veglia takes it too (a hidden alias
command, an extra name of an option); where it is not, the command ends with wrong usage
(exit 2) and the one line :func:`veglia_writes` gives, instead of click's bare "unexpected
extra argument". docs/cli.md's "From verdi" table lists each form.
"""

from __future__ import annotations

import copy
from typing import Any

import click

from veglia.exceptions import VerdiFormError

__all__ = [
    "CODE_TYPES",
    "USAGE_HINTS",
    "VERDI_FORMS",
    "VerdiArgument",
    "VerdiNamedOption",
    "add_alias",
    "usage_hint",
    "veglia_writes",
]

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
    "verdi archive info FILE": "works: archive inspect, by add_alias (cmd_archive)",
    "verdi archive create --all / -N PK...": "works: options of archive create (cmd_archive)",
    "verdi computer configure show LABEL": "the hint (cmd_computer_configure)",
    "verdi daemon logshow": "the hint: USAGE_HINTS",
    "verdi node graph generate": "the hint: USAGE_HINTS",
    "verdi storage info --detailed / storage version": "the hint: USAGE_HINTS",
    "verdi code setup": "the hint: USAGE_HINTS",
    "verdi user configure / set-default": "the hint: USAGE_HINTS",
}

#: verdi's command lines that veglia writes otherwise and click refuses: the words they start
#: with (an option word anywhere after them; a word in capitals stands for any argument) ->
#: how veglia writes them. Read only once click has refused a line (:func:`usage_hint`), so
#: no entry can shadow a command that works.
USAGE_HINTS: dict[str, str] = {
    "node graph generate": "veglia node graph PK [-o FILE]",
    "daemon logshow": "veglia daemon logs -f",
    "storage info --detailed": "veglia storage info (it shows all it has)",
    "storage version": "veglia storage info (its schema lines)",
    "code setup": "veglia code create --label L --computer C --executable /ABSOLUTE/PATH",
    "user configure": "veglia config set user.email EMAIL",
    "user set-default": "veglia config set user.email EMAIL",
    "python SCRIPT": "veglia run SCRIPT [ARGS...] (veglia python opens a console)",
}


def _command_line(args: list[str], top: click.Command) -> list[str]:
    """``args`` without the options of ``top`` (veglia's own, before the command)."""
    options = [param for param in top.params if isinstance(param, click.Option)]
    with_value = {name for o in options if not o.is_flag for name in o.opts}
    flags = {name for o in options if o.is_flag for name in o.opts}
    words = list(args)
    while words:
        name, given, _ = words[0].partition("=")  # --profile=NAME
        if words[0] in flags or (given and name in with_value):
            words.pop(0)
        elif words[0] in with_value:
            del words[:2]
        else:
            break
    return words


def _matches(form: str, words: list[str]) -> bool:
    wanted = form.split()
    leading = [word for word in wanted if not word.startswith("-")]
    options = [word for word in wanted if word.startswith("-")]
    if len(words) < len(leading):
        return False
    for want, word in zip(leading, words, strict=False):
        if word.startswith("-") or (not want.isupper() and want != word):
            return False
    return all(option in words for option in options)


def usage_hint(args: list[str], top: click.Command) -> str | None:
    """How veglia writes the verdi command line ``args`` (given to ``top``, the ``veglia``
    command) that click refused, when :data:`USAGE_HINTS` knows it (the longest form that
    matches); else None."""
    words = _command_line(args, top)
    found = [form for form in USAGE_HINTS if _matches(form, words)]
    if not found:
        return None
    return USAGE_HINTS[max(found, key=lambda form: len(form.split()))]


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


class VerdiNamedOption(click.Option):
    """An option that takes verdi's names for it too (``verdi_names``), left out of the
    help, which shows veglia's names only."""

    def __init__(self, *args: Any, verdi_names: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verdi_names = verdi_names

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        everything = self.opts
        self.opts = [name for name in everything if name not in self.verdi_names]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = everything


class VerdiArgument(click.Argument):
    """An argument only verdi's form of a command gives, left out of its usage line."""

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        return []


def add_alias(group: click.Group, verdi_name: str, command: click.Command) -> None:
    """Add ``command`` to ``group`` under verdi's name too, left out of the group's help
    (which lists veglia's name only)."""
    alias = copy.copy(command)
    alias.name = verdi_name
    alias.hidden = True
    group.add_command(alias, verdi_name)
