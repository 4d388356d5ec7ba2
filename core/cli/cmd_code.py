"""``veglia code``: codes (executables on a computer), as ``verdi code``."""

from __future__ import annotations

from typing import Any

import click

from veglia.cli.cmd_code_edit import (
    check_code_label,
    check_plugin,
    code_delete,
    code_duplicate,
    code_hide,
    code_reveal,
)
from veglia.cli.completion import complete_code_labels, complete_computer_labels
from veglia.cli.output import echo_success, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.cli.verdi_forms import CODE_TYPES, VerdiArgument, VerdiNamedOption, veglia_writes
from veglia.engine.calcjob.history import MIN_SAMPLES, Distribution, code_usage
from veglia.exceptions import InvalidOptionError
from veglia.orm.computers import Code, load_code, load_computer


@click.group("code", commands=[code_hide, code_reveal, code_duplicate, code_delete])
def code_group() -> None:
    """Create and inspect codes: executables installed on a computer."""


def _check_code_type(code_type: str | None) -> str | None:
    """verdi's TYPE: the kind veglia has, another one of verdi's (its hint), or wrong."""
    if code_type is not None and CODE_TYPES.get(code_type) is not None:
        raise veglia_writes(str(CODE_TYPES[code_type]))
    if code_type is not None and code_type not in CODE_TYPES:
        raise click.BadParameter(
            f"{code_type!r}: veglia's codes are {next(iter(CODE_TYPES))} (the default)."
        )
    return code_type


@code_group.command("create")
@click.option("-L", "--label", required=True, help="Name of the code (unique on its computer).")
@click.option(
    "-Y",
    "--computer",
    required=True,
    help="Label of the computer it is on.",
    shell_complete=complete_computer_labels,
)
# --filepath-executable and TYPE are verdi's `code create core.code.installed` form; -n too
# (veglia asks nothing here).
@click.option(
    "-X",
    "--executable",
    "--filepath-executable",
    cls=VerdiNamedOption,
    verdi_names=("--filepath-executable",),
    required=True,
    help="Absolute path of the executable there.",
)
@click.argument(
    "code_type",
    cls=VerdiArgument,
    metavar="[core.code.installed]",
    required=False,
    is_eager=True,  # verdi's other kinds get their hint before a missing option is named
    callback=lambda _ctx, _param, value: _check_code_type(value),
)
@click.option("-n", "--non-interactive", is_flag=True, hidden=True)
@click.option(
    "-P",
    "--default-calc-job-plugin",
    help="Calculation plugin the code runs by default (e.g. core.shell).",
)
@click.option("-D", "--description", default="", help="What it is.")
@click.option("--prepend-text", default="", help="Shell lines before the executable runs.")
@click.option("--append-text", default="", help="Shell lines after it ran.")
@pass_state
def code_create(
    state: CliState,
    label: str,
    computer: str,
    executable: str,
    code_type: str | None,
    non_interactive: bool,
    default_calc_job_plugin: str | None,
    description: str,
    prepend_text: str,
    append_text: str,
) -> None:
    """Create a code: an executable at an absolute path on a computer."""

    state.profile  # noqa: B018 -- load the chosen profile
    if not executable.startswith("/"):
        raise InvalidOptionError(
            f"--executable {executable!r} must be an absolute path on the computer (find it "
            "with `which` there)."
        )
    code = Code(
        label=check_code_label(label),
        computer=load_computer(computer),
        executable=executable,
        default_calc_job_plugin=check_plugin(default_calc_job_plugin),
        description=description,
        prepend_text=prepend_text,
        append_text=append_text,
    ).store()
    echo_success(f"Code {code.full_label!r} (pk {code.pk}) created for {executable}.")


@code_group.command("list")
@click.option(
    "-Y",
    "--computer",
    help="Only codes on this computer.",
    shell_complete=complete_computer_labels,
)
@click.option("-a", "--all", "show_all", is_flag=True, help="Hidden codes too (`code hide`).")
@raw_option
@pass_state
def code_list(state: CliState, computer: str | None, show_all: bool, raw: bool) -> None:
    """List codes; hidden ones (`veglia code hide`) only with -a, marked hidden."""

    state.profile  # noqa: B018
    if computer is not None:
        computer = load_computer(computer).label
    codes = [
        c
        for c in Code.list()
        if (computer is None or c.computer.label == computer) and (show_all or not c.hidden)
    ]
    rows = [
        (
            c.pk,
            c.full_label + (" (hidden)" if c.hidden else ""),
            c.executable,
            c.default_calc_job_plugin or "",
            c.description,
        )
        for c in codes
    ]
    print_table(("PK", "Full label", "Executable", "Default plugin", "Description"), rows, raw=raw)


@code_group.command("show")
@click.argument("identifier", metavar="LABEL@COMPUTER", shell_complete=complete_code_labels)
@pass_state
def code_show(state: CliState, identifier: str) -> None:
    """Show a code, by LABEL@COMPUTER, LABEL (when unique) or PK."""

    state.profile  # noqa: B018
    code = load_code(identifier)
    rows: list[tuple[str, Any]] = [
        ("pk", code.pk),
        ("uuid", code.uuid),
        ("label", code.label),
        ("full label", code.full_label),
        ("computer", f"{code.computer.label} (pk {code.computer.pk})"),
        ("executable", code.executable),
        ("default plugin", code.default_calc_job_plugin),
        ("description", code.description),
        ("prepend text", code.prepend_text),
        ("append text", code.append_text),
        ("hidden", "yes (`veglia code reveal` lists it again)" if code.hidden else "no"),
    ]
    print_table(("Property", "Value"), rows)


COMMANDS = [code_group]


@code_group.command("stats")
@click.argument("identifier", metavar="LABEL", shell_complete=complete_code_labels)
@raw_option
@pass_state
def code_stats(state: CliState, identifier: str, raw: bool) -> None:
    """Peak memory and run time of the code's finished jobs, and the requests they suggest.

    The recommendation is mean + 1 standard deviation over similar jobs (same calculation
    and computer); with the profile option resources.right_size the engine uses it.
    """
    from collections import Counter

    state.profile  # noqa: B018 - loads the profile
    code = load_code(identifier)
    assert code.pk is not None
    grouped = code_usage(code.pk)
    if not grouped:
        raise InvalidOptionError(
            f"No finished job of code {code.full_label} recorded its usage yet. Jobs record "
            "it from SLURM's accounting (sacct), a plugin's trace, or /usr/bin/time where the "
            "computer has it (property measure_usage)."
        )
    rows = []
    for key, usages in sorted(grouped.items()):
        calculation = key.split("|")[0]
        for what, field, unit, scale in (
            ("peak memory", "peak_memory_kb", "MB", 1024),
            ("run time", "runtime_seconds", "s", 1),
        ):
            measured = [u for u in usages if u.get(field) is not None]
            dist = Distribution.of([u[field] / scale for u in measured])
            if dist is None:
                continue
            # Who measured it: sacct, time or a plugin, with how many jobs each when they mix.
            sources = Counter(str(u.get("source") or "?") for u in measured)
            source = ", ".join(
                name if len(sources) == 1 else f"{name} ({count})"
                for name, count in sorted(sources.items())
            )
            recommended = (
                f"{dist.recommended:.1f}" if dist.count >= MIN_SAMPLES else "(too few jobs)"
            )
            rows.append(
                (
                    calculation,
                    f"{what} ({unit})",
                    dist.count,
                    f"{dist.mean:.1f}",
                    f"{dist.stdev:.1f}",
                    f"{dist.minimum:.1f}",
                    f"{dist.median:.1f}",
                    f"{dist.maximum:.1f}",
                    recommended,
                    source,
                )
            )
    print_table(
        (
            "Calculation",
            "Measure",
            "Jobs",
            "Mean",
            "SD",
            "Min",
            "Median",
            "Max",
            "Recommended",
            "Measured by",
        ),
        rows,
        raw=raw,
    )
