"""``veglia code hide``, ``reveal``, ``duplicate`` and ``delete``: change the codes there are,
as ``verdi code`` does; and the checks ``veglia code create`` makes of a code's fields."""

from __future__ import annotations

import click

from veglia.cli.completion import complete_code_labels, complete_computer_labels
from veglia.cli.output import console, echo_info, echo_success, print_table
from veglia.cli.state import CliState, pass_state
from veglia.entry_points import get_entry_points
from veglia.exceptions import InvalidOptionError, ProcessActiveError, StorageError
from veglia.orm.computers import Code, load_code, load_computer
from veglia.orm.queries import ACTIVE_STATES, processes_of_code

__all__ = [
    "check_code_label",
    "check_plugin",
    "code_delete",
    "code_duplicate",
    "code_hide",
    "code_reveal",
]

#: How many processes an error names before "and N more".
NAMED = 10


def check_code_label(label: str) -> str:
    label = label.strip()
    if not label or "@" in label or any(c.isspace() for c in label) or label.isdigit():
        raise InvalidOptionError(
            f"Code label {label!r} must be non-empty, without spaces or '@', and not a number."
        )
    return label


def check_plugin(name: str | None) -> str | None:
    names = [ep.name for ep in get_entry_points("calculations")]
    if name is not None and name not in names:
        raise InvalidOptionError(
            f"{name!r} is not an installed calculation plugin; installed: "
            f"{', '.join(names) or 'none'}."
        )
    return name


# -- hide / reveal ---------------------------------------------------------------------------
def _set_hidden(identifiers: tuple[str, ...], hidden: bool) -> None:
    codes = [load_code(identifier) for identifier in identifiers]  # all found, or none changed
    for code in codes:
        code.set_hidden(hidden)
    labels = ", ".join(repr(code.full_label) for code in codes)
    if hidden:
        echo_success(
            f"Hid {labels}: `veglia code list` leaves {'it' if len(codes) == 1 else 'them'} "
            "out (`-a` lists hidden codes too); jobs can still use "
            f"{'it' if len(codes) == 1 else 'them'}."
        )
    else:
        again = "it" if len(codes) == 1 else "them"
        echo_success(f"Revealed {labels}: `veglia code list` lists {again} again.")


@click.command("hide")
@click.argument(
    "identifiers", nargs=-1, required=True, metavar="CODE...", shell_complete=complete_code_labels
)
@pass_state
def code_hide(state: CliState, identifiers: tuple[str, ...]) -> None:
    """Hide codes from `veglia code list` (given by LABEL@COMPUTER, LABEL or PK).

    A hidden code still runs jobs; `veglia code list -a` lists it, `veglia code reveal`
    shows it again.
    """
    state.profile  # noqa: B018 -- load the chosen profile
    _set_hidden(identifiers, True)


@click.command("reveal")
@click.argument(
    "identifiers", nargs=-1, required=True, metavar="CODE...", shell_complete=complete_code_labels
)
@pass_state
def code_reveal(state: CliState, identifiers: tuple[str, ...]) -> None:
    """List hidden codes in `veglia code list` again (given by LABEL@COMPUTER, LABEL or PK)."""
    state.profile  # noqa: B018
    _set_hidden(identifiers, False)


# -- duplicate -------------------------------------------------------------------------------
@click.command("duplicate")
@click.argument("identifier", metavar="CODE", shell_complete=complete_code_labels)
@click.argument("new_label", metavar="NEW_LABEL", required=False)
# verdi's form: `verdi code duplicate CODE --label NEW -n`.
@click.option("-L", "--label", help="The new code's label (or give it as NEW_LABEL).")
@click.option(
    "-Y",
    "--computer",
    help="Put the copy on this computer instead.",
    shell_complete=complete_computer_labels,
)
@click.option(
    "-X", "--executable", "--filepath-executable", help="Absolute path of its executable."
)
@click.option("-P", "--default-calc-job-plugin", help="Its default calculation plugin.")
@click.option("-D", "--description", help="What it is.")
@click.option("--prepend-text", help="Shell lines before the executable runs.")
@click.option("--append-text", help="Shell lines after it ran.")
@click.option("--hide-original", is_flag=True, help="Hide CODE from `veglia code list`.")
@click.option("-n", "--non-interactive", is_flag=True, hidden=True)
@pass_state
def code_duplicate(
    state: CliState,
    identifier: str,
    new_label: str | None,
    label: str | None,
    computer: str | None,
    executable: str | None,
    default_calc_job_plugin: str | None,
    description: str | None,
    prepend_text: str | None,
    append_text: str | None,
    hide_original: bool,
    non_interactive: bool,
) -> None:
    """Make code NEW_LABEL as a copy of CODE, changing the fields given as options.

    The options are those of `veglia code create`; what is not given is copied. The copy
    is on CODE's computer unless --computer names another.
    """
    if new_label is not None and label is not None and new_label != label:
        raise click.UsageError(
            f"Two new labels: NEW_LABEL {new_label!r} and --label {label!r}; give one."
        )
    chosen = new_label if new_label is not None else label
    if chosen is None:
        raise click.UsageError("Give the copy's label: NEW_LABEL, or --label.")
    state.profile  # noqa: B018
    source = load_code(identifier)
    if executable is not None and not executable.startswith("/"):
        raise InvalidOptionError(
            f"--executable {executable!r} must be an absolute path on the computer (find it "
            "with `which` there)."
        )
    copy = Code(
        label=check_code_label(chosen),
        computer=load_computer(computer) if computer is not None else source.computer,
        executable=executable if executable is not None else source.executable,
        default_calc_job_plugin=(
            check_plugin(default_calc_job_plugin)
            if default_calc_job_plugin is not None
            else source.default_calc_job_plugin
        ),
        description=description if description is not None else source.description,
        prepend_text=prepend_text if prepend_text is not None else source.prepend_text,
        append_text=append_text if append_text is not None else source.append_text,
    ).store()
    if hide_original:
        source.set_hidden(True)
    hid = f"; {source.full_label!r} is hidden now" if hide_original else ""
    echo_success(f"Code {copy.full_label!r} (pk {copy.pk}) made from {source.full_label!r}{hid}.")


# -- delete ----------------------------------------------------------------------------------
def _named(processes: list[tuple[int, str, str]]) -> str:
    named = ", ".join(f"{pk} ({state})" for pk, _, state in processes[:NAMED])
    more = f" and {len(processes) - NAMED} more" if len(processes) > NAMED else ""
    return f"process{'es' if len(processes) > 1 else ''} {named}{more}"


@click.command("delete")
@click.argument(
    "identifiers", nargs=-1, required=True, metavar="CODE...", shell_complete=complete_code_labels
)
@click.option(
    "-f",
    "--force",
    is_flag=True,
    help="Do not ask; delete it even though ended jobs ran with it.",
)
@click.option("-n", "--dry-run", is_flag=True, help="Only show what would be deleted.")
@pass_state
def code_delete(state: CliState, identifiers: tuple[str, ...], force: bool, dry_run: bool) -> None:
    """Delete codes CODE... (LABEL@COMPUTER, LABEL or PK), their computers and jobs kept.

    Refused while a job that runs with one has not ended. When ended jobs ran with one, it
    is refused unless --force: they keep their record of it (label, executable), but
    `veglia process rerun` cannot use it again; `veglia code hide` keeps it out of `veglia
    code list` instead. Each code is checked before any is deleted.
    """
    state.profile  # noqa: B018
    codes = {code.pk: code for code in map(load_code, identifiers)}.values()
    uses = [(code, processes_of_code(code.pk)) for code in codes if code.pk is not None]
    for code, used in uses:
        active = [process for process in used if process[2] in ACTIVE_STATES]
        if active:
            raise ProcessActiveError(
                f"Refusing to delete code {code.full_label!r}: {_named(active)} "
                f"{'run' if len(active) > 1 else 'runs'} with it and "
                f"{'have' if len(active) > 1 else 'has'} not ended. Wait, or kill "
                f"(`veglia process kill {' '.join(str(pk) for pk, _, _ in active[:NAMED])}`), "
                "then run this again."
            )
    for code, used in uses:
        if used and not force and not dry_run:
            raise StorageError(
                f"Code {code.full_label!r} was used by {_named(used)}. Delete it anyway with "
                f"`veglia code delete {code.full_label} --force` (the jobs keep their record "
                f"of it), or hide it with `veglia code hide {code.full_label}`."
            )
    for code, used in uses:
        console.print(
            f"Deleting code {code.full_label!r} (pk {code.pk}, {code.executable}); its "
            "computer and jobs stay.",
            markup=False,
        )
        if used:
            print_table(("PK", "Process type", "State"), used, title="Jobs that ran with it")
    if dry_run:
        if not force and any(used for _, used in uses):
            echo_info("Without --force, the delete is refused: ended jobs ran with it.")
        console.print("Dry run: nothing was deleted.")
        return
    labels = ", ".join(repr(code.full_label) for code, _ in uses)
    if not force:
        what = "code" if len(uses) == 1 else "codes"
        click.confirm(f"Delete {what} {labels}? This cannot be undone", abort=True)
    for code, _ in uses:
        code.delete()
        echo_success(f"Deleted code {code.full_label!r}.")
