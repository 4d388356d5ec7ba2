"""``veglia pipeline``: named, versioned pipeline setups (a process run per element of a
data source): create, list, show, enable, disable, edit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from veglia.cli.output import console, echo_success, print_table, raw_option
from veglia.cli.process_format import format_time, relative_time
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import PipelineSetupError
from veglia.pipeline_setups import (
    PipelineSetup,
    edit_pipeline_setup,
    list_pipeline_setups,
    load_pipeline_setup,
    parse_setup_toml,
    parse_toml_value,
    set_pipeline_enabled,
    setup_toml,
)


@click.group("pipeline")
def pipeline_group() -> None:
    """Create named pipeline setups that run a process on each element of a data source."""


def _read_file(path: str) -> dict[str, Any]:
    return parse_setup_toml(Path(path).read_text(encoding="utf-8"), where=path)


def _stored(setup: PipelineSetup, what: str) -> None:
    state = "enabled" if setup.enabled else "disabled"
    hint = "" if setup.enabled else f"; enable it with `veglia pipeline enable {setup.name}`"
    echo_success(
        f"{what} pipeline setup {setup.name!r} version {setup.version} ({state}): "
        f"{setup.process} on each element of {setup.source}{hint}."
    )


@pipeline_group.command("create")
@click.option(
    "--from-file",
    "from_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A TOML file describing the setup (see docs/pipelines.md); nothing is asked.",
)
@pass_state
def pipeline_create(state: CliState, from_file: str | None) -> None:
    """Create a pipeline setup from a TOML file, or by answering questions."""
    state.profile  # noqa: B018 -- load the chosen profile
    if from_file:
        setup = PipelineSetup.from_dict(_read_file(from_file)).store()
    else:
        # Lazy: the questions load every source and process plugin to offer them.
        from veglia.cli.pipeline_questions import ask_setup

        setup = ask_setup().store()
    _stored(setup, "Created")


@pipeline_group.command("list")
@click.option("-a", "--all-versions", is_flag=True, help="Every version, not only the newest.")
@raw_option
@pass_state
def pipeline_list(state: CliState, all_versions: bool, raw: bool) -> None:
    """List the pipeline setups (their newest versions)."""
    state.profile  # noqa: B018
    setups = list_pipeline_setups(all_versions=all_versions)
    if not setups and not raw:
        console.print("No pipeline setups yet; create one with `veglia pipeline create`.")
        return
    rows = [
        (
            setup.name,
            setup.version,
            "yes" if setup.enabled else "no",
            setup.process,
            setup.source,
            format_time(setup.created) if raw else relative_time(setup.created),
        )
        for setup in setups
    ]
    print_table(("Name", "Version", "Enabled", "Process", "Source", "Created"), rows, raw=raw)


@pipeline_group.command("show")
@click.argument("name")
@click.option("--version", "version", type=int, help="This version (default: the newest).")
@click.option("--toml", "as_toml", is_flag=True, help="Print the setup as a TOML file.")
@pass_state
def pipeline_show(state: CliState, name: str, version: int | None, as_toml: bool) -> None:
    """Show pipeline setup NAME: what it runs, on what, with which inputs and options."""
    state.profile  # noqa: B018
    setup = load_pipeline_setup(name, version)
    if as_toml:
        click.echo(setup_toml(setup), nl=False)
        return
    newest = load_pipeline_setup(name).version if version is not None else setup.version
    rows = [
        ("name", setup.name),
        ("version", f"{setup.version} of {newest}"),
        ("enabled", "yes" if setup.enabled else "no"),
        ("description", setup.description),
        ("process", setup.process),
        ("input port", setup.input_port),
        ("computer", setup.computer or ""),
        ("max active", setup.max_active if setup.max_active is not None else "no cap"),
        ("source", setup.source),
        ("source computer", setup.source_computer or setup.computer or ""),
        ("created", format_time(setup.created)),
        ("created by", setup.created_by or ""),
    ]
    print_table(("Field", "Value"), rows)
    for title, values in (
        ("Source settings", setup.source_settings),
        ("Fixed inputs", setup.inputs),
        ("Options", {k: v for k, v in setup.options.items() if k != "computer"}),
    ):
        console.print("")
        if values:
            print_table((title, "Value"), sorted(values.items()))
        else:
            console.print(f"{title}: none")


@pipeline_group.command("enable")
@click.argument("name")
@pass_state
def pipeline_enable(state: CliState, name: str) -> None:
    """Enable pipeline setup NAME: the daemon starts its newest version on new elements."""
    state.profile  # noqa: B018
    setup = set_pipeline_enabled(name, True)
    echo_success(f"Pipeline setup {name!r} enabled (version {setup.version} is the newest).")


@pipeline_group.command("disable")
@click.argument("name")
@pass_state
def pipeline_disable(state: CliState, name: str) -> None:
    """Disable pipeline setup NAME: nothing new starts; running work goes on."""
    state.profile  # noqa: B018
    set_pipeline_enabled(name, False)
    echo_success(f"Pipeline setup {name!r} disabled; work it started goes on to its end.")


def _dotted(assignments: tuple[str, ...]) -> dict[str, Any]:
    """``options.queue_name=long`` ... as nested tables; a value is read as TOML when it is
    TOML (``3``, ``true``, ``['a']``), else as text."""
    changes: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PipelineSetupError(
                f"--set {assignment!r} will not do; give KEY=VALUE, e.g. "
                "--set options.queue_name=long or --set inputs.command='wc -l *'."
            )
        *parents, last = key.split(".")
        table = changes
        for parent in parents:
            table = table.setdefault(parent, {})
            if not isinstance(table, dict):
                raise PipelineSetupError(f"--set {key}: {parent!r} is given a value already.")
        table[last] = parse_toml_value(value.strip())
    return changes


@pipeline_group.command("edit")
@click.argument("name")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change one key, dotted as in the TOML file: options.queue_name=long, "
    "inputs.command='...', source.settings.glob='*.bam', max_active=4; repeatable.",
)
@click.option(
    "--from-file",
    "from_file",
    type=click.Path(exists=True, dir_okay=False),
    help="The whole new setup as a TOML file (`pipeline show NAME --toml`, edited).",
)
@pass_state
def pipeline_edit(
    state: CliState, name: str, assignments: tuple[str, ...], from_file: str | None
) -> None:
    """Store the next version of pipeline setup NAME with changes; the older versions stay,
    and work started from them keeps them."""
    state.profile  # noqa: B018
    if bool(assignments) == bool(from_file):
        raise click.UsageError("Give the changes with --set KEY=VALUE ..., or --from-file FILE.")
    if from_file:
        setup = edit_pipeline_setup(name, _read_file(from_file), whole=True)
    else:
        setup = edit_pipeline_setup(name, _dotted(assignments))
    _stored(setup, "Stored")


COMMANDS = [pipeline_group]
