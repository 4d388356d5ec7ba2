"""``veglia pipeline``: named, versioned pipeline setups (a process run per element of a
data source): create, list, show, enable, disable, edit."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from veglia.cli.numbers import WholeNumber
from veglia.cli.output import console, echo_success, print_table, raw_option
from veglia.cli.process_format import format_time, relative_time
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import PipelineSetupError
from veglia.pipeline_elements import Progress, SourceState, pipeline_progress, source_state
from veglia.pipeline_setups import (
    PipelineSetup,
    edit_pipeline_setup,
    list_pipeline_setups,
    load_pipeline_setup,
    parse_setup_toml,
    parse_toml_value,
    set_pipeline_enabled,
    setup_toml,
    toml_value,
)
from veglia.row_ids import MAX_INTEGER
from veglia.storage.times import format_seconds

#: Failed elements ``pipeline show`` lists (``--failed``: all), and problems and elements
#: still being written it names, before "... and N more".
FAILED_SHOWN = 10
NAMES_SHOWN = 5


@click.group("pipeline")
def pipeline_group() -> None:
    """Create named pipeline setups that run a process on each element of a data source."""


def _read_file(path: str) -> dict[str, Any]:
    return parse_setup_toml(Path(path).read_text(encoding="utf-8"), where=path)


def process_text(setup: PipelineSetup) -> str:
    """What a setup runs: its process, or its steps' in order."""
    steps = setup.steps
    return " then ".join(str(step.get("process")) for step in steps) if steps else setup.process


def _stored(setup: PipelineSetup, what: str) -> None:
    state = "enabled" if setup.enabled else "disabled"
    hint = "" if setup.enabled else f"; enable it with `veglia pipeline enable {setup.name}`"
    echo_success(
        f"{what} pipeline setup {setup.name!r} version {setup.version} ({state}): "
        f"{process_text(setup)} on each element of {setup.source}{hint}."
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
    progress = {name: pipeline_progress(name, failed_limit=0) for name in {s.name for s in setups}}
    rows = [
        (
            setup.name,
            setup.version,
            "yes" if setup.enabled else "no",
            process_text(setup),
            setup.source,
            format_time(setup.created) if raw else relative_time(setup.created),
            progress_summary(progress[setup.name]),
        )
        for setup in setups
    ]
    headers = ("Name", "Version", "Enabled", "Process", "Source", "Created", "Progress")
    print_table(headers, rows, raw=raw)


def progress_summary(progress: Progress) -> str:
    """``"12/40 done, 2 running, 1 failed"``: a setup's elements in a few words."""
    if not progress.seen:
        return "no elements yet"
    text = f"{progress.done}/{progress.seen} done"
    if progress.running:
        text += f", {progress.running} running"
    if progress.failed_total:
        text += f", {progress.failed_total} failed"
    return text


def eta_text(progress: Progress, parallel: int | None) -> str:
    """The estimated time to finish the elements not ended, and what it rests on."""
    left = progress.to_start + progress.running
    if not left:
        return "nothing left to run" if progress.seen else "no elements yet"
    if progress.eta_seconds is None or progress.seconds_per_run is None:
        return "unknown until a run is done"
    at_once = f", {parallel} at once" if parallel else ""
    eta = format_seconds(progress.eta_seconds)
    return (
        f"{eta if eta.startswith('under') else 'about ' + eta} for {left} "
        f"(a run took {format_seconds(progress.seconds_per_run)} on average{at_once})"
    )


def _capped(items: tuple[str, ...], limit: int = NAMES_SHOWN) -> list[str]:
    shown = list(items[:limit])
    if len(items) > limit:
        shown.append(f"... and {len(items) - limit} more")
    return shown


def _first_line(text: str) -> str:
    # A multi-line exit message would make the table fold; `process show PK` has it all.
    lines = text.strip().splitlines() or [""]
    return lines[0] + (" …" if len(lines) > 1 else "")


def source_rows(source: SourceState, enabled: bool) -> list[tuple[str, Any]]:
    """What the last look at the source found: when, its error, or what it listed."""
    if source.polled is None:
        why = (
            "the daemon lists it every pipeline.poll_interval"
            if enabled
            else "the setup is disabled"
        )
        return [("last look", f"none yet ({why})")]
    rows: list[tuple[str, Any]] = [
        ("last look", f"{relative_time(source.polled)} ({format_time(source.polled)})")
    ]
    if source.error:
        # What it listed before is not what the source holds now: only the error is news.
        return [*rows, ("error", source.error)]
    rows.append(("listed", f"{source.listed} element(s)"))
    for index, problem in enumerate(_capped(source.problems)):
        rows.append(("problems" if index == 0 else "", problem))
    if source.waiting:
        rows.append(("being written", ", ".join(_capped(source.waiting))))
    return rows


def print_failed(name: str, progress: Progress, limit: int | None) -> None:
    """The failed elements, each with its run's pk (none when refused) and its problem."""
    shown = progress.failed if limit is None else progress.failed[:limit]
    rows = [
        (identity, pk if pk is not None else "-", _first_line(problem))
        for identity, pk, problem in shown
    ]
    print_table(("Failed element", "PK", "Problem"), rows)
    more = progress.failed_total - len(shown)
    if more > 0:
        console.print(
            f"... and {more} more: `veglia pipeline show {name} --failed` lists them all.",
            markup=False,
        )


@pipeline_group.command("show")
@click.argument("name")
@click.option(
    "--version",
    "version",
    type=WholeNumber(min=1, max=MAX_INTEGER),
    help="This version (default: the newest).",
)
@click.option("--toml", "as_toml", is_flag=True, help="Print the setup as a TOML file.")
@click.option(
    "--failed",
    "failed_only",
    is_flag=True,
    help="Only the elements that failed, all of them, each with its problem and run's PK.",
)
@pass_state
def pipeline_show(
    state: CliState, name: str, version: int | None, as_toml: bool, failed_only: bool
) -> None:
    """Show pipeline setup NAME: what it runs, on what, with which inputs and options, and
    how far it has got with its source's elements."""
    state.profile  # noqa: B018
    setup = load_pipeline_setup(name, version)
    if as_toml:
        click.echo(setup_toml(setup), nl=False)
        return
    latest = load_pipeline_setup(name) if version is not None else setup
    # The newest version's cap is the one the daemon starts runs under.
    if failed_only:
        progress = pipeline_progress(name, latest.max_active, failed_limit=sys.maxsize)
        if progress.failed_total:
            print_failed(name, progress, None)
        else:
            console.print(f"No element of pipeline setup {name!r} failed.", markup=False)
        return
    progress = pipeline_progress(name, latest.max_active, failed_limit=FAILED_SHOWN)
    newest = latest.version
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
    steps = setup.steps
    for title, values in (
        ("Source settings", setup.source_settings),
        ("Fixed inputs", {k: v for k, v in setup.inputs.items() if not (steps and k == "steps")}),
        ("Options", {k: v for k, v in setup.options.items() if k != "computer"}),
    ):
        console.print("")
        if values:
            print_table((title, "Value"), sorted(values.items()))
        else:
            console.print(f"{title}: none")
    if steps:
        console.print("")
        print_table(("Step", "Process", "Input port", "Fixed inputs", "Options"), _step_rows(steps))
    console.print("")
    print_table(
        ("Progress", "Value"),
        [
            ("elements seen", progress.seen),
            ("to start", progress.to_start),
            ("running", progress.running),
            ("done", progress.done),
            ("failed", progress.failed_total),
            ("time to finish", eta_text(progress, latest.max_active)),
        ],
    )
    console.print("")
    print_table(("Source", "Value"), source_rows(source_state(name), latest.enabled))
    if progress.failed_total:
        console.print("")
        print_failed(name, progress, FAILED_SHOWN)
    if any(pk is not None for _, pk, _ in progress.failed):
        console.print(
            f"Their runs: `veglia process list --setup {name} -a` (every run, with its element).",
            markup=False,
        )


def _step_rows(steps: list[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """A chain's steps one a row, their inputs and options as TOML writes them."""

    def pairs(values: Any) -> str:
        if not isinstance(values, dict) or not values:
            return ""
        return ", ".join(f"{key} = {toml_value(value)}" for key, value in values.items())

    rows = []
    for number, step in enumerate(steps, 1):
        port = str(step.get("input_port", ""))
        if step.get("from_output"):
            port += f" (from {step['from_output']})"
        rows.append(
            (
                number,
                step.get("process", ""),
                port,
                pairs(step.get("inputs")),
                pairs(step.get("options")),
            )
        )
    return rows


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
