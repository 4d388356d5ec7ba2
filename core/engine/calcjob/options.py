"""The ``metadata.options`` of a calc job: what it asks of the scheduler and how it runs,
each checked when the builder is filled, so a bad value names its port before submission.

Plugins add options through the ``calcjob_options`` hook: each is added as a
``metadata.options.<name>`` port after the built-in ones, so a plugin's option is built,
validated and documented like any other.
"""

from __future__ import annotations

from typing import Any

from veglia.plugin_manager import gather_named
from veglia.plugin_types import CalcJobOption
from veglia.relative_paths import checked_relative
from veglia.schedulers import JobResources, SchedulerError, environment_problem

__all__ = ["OPTIONS", "CalcJobOption", "define_options", "plugin_calcjob_options"]


def _non_negative_int(value: Any, _: Any = None) -> str | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        return f"must be a whole number >= 0, not {value!r}"
    return None


def _positive_int(value: Any, _: Any = None) -> str | None:
    if value is not None and (not isinstance(value, int) or value <= 0):
        return f"must be a whole number > 0, not {value!r}"
    return None


def _patterns(value: Any, _: Any = None) -> str | None:
    for pattern in value or []:
        try:
            checked_relative(pattern, "retrieve pattern")
        except ValueError as exc:
            return str(exc)
    return None


def _environment(value: Any, _: Any = None) -> str | None:
    return None if value is None else environment_problem(value)


def _resources(value: Any, _: Any = None) -> str | None:
    try:
        JobResources(**value)
    except (TypeError, SchedulerError) as exc:
        return str(exc)
    return None


#: (name, type, validator, help) of every option the core defines.
OPTIONS: list[tuple[str, type, Any, str]] = [
    ("resources", dict, _resources, "num_machines, num_mpiprocs_per_machine, ..."),
    (
        "max_memory_kb",
        int,
        _non_negative_int,
        "Memory the job may use, in kB (0: all of a node's, where the scheduler has "
        "such a request, as SLURM's --mem=0).",
    ),
    ("max_wallclock_seconds", int, _positive_int, "Wall time the job may run."),
    ("queue_name", str, None, "Queue (partition) to submit to."),
    ("account", str, None, "Account to charge."),
    ("qos", str, None, "Quality of service."),
    ("custom_scheduler_commands", str, None, "Extra directive lines."),
    ("prepend_text", str, None, "Shell lines before the command."),
    ("append_text", str, None, "Shell lines after the command."),
    ("environment_variables", dict, _environment, "Variables exported in the job."),
    ("additional_retrieve_list", list, _patterns, "More file patterns to retrieve."),
    ("parser_name", str, None, "Entry point of the parser (veglia.parsers)."),
    ("withmpi", bool, None, "Run the code through the computer's mpirun."),
    ("right_size", bool, None, "Adjust requests from similar jobs' history."),
    (
        "move_queue",
        bool,
        None,
        "Move the job to a queue with a longer time limit when similar jobs took longer "
        "than its queue allows (default: the computer's move_jobs).",
    ),
]


def define_options(spec: Any) -> None:
    """Add the ``metadata.options`` namespace and its ports to a calc job's spec."""
    spec.input_namespace("metadata.options", required=False)
    for name, valid_type, validator, help_text in OPTIONS:
        spec.input(
            f"metadata.options.{name}",
            valid_type=valid_type,
            required=False,
            validator=validator,
            help=help_text,
        )
    # Then the options plugins add (the calcjob_options hook), read by those plugins.
    for option in plugin_calcjob_options({name for name, *_ in OPTIONS}):
        spec.input(
            f"metadata.options.{option.name}",
            valid_type=option.valid_type,
            required=False,
            validator=option.validator,
            help=option.help,
            **({} if option.default is None else {"default": option.default}),
        )
    spec.inputs["metadata"]["options"]["resources"].default = lambda: {"num_machines": 1}


def plugin_calcjob_options(builtin: set[str]) -> list[CalcJobOption]:
    """The options of the loaded plugins, in registration order; an error names the plugin
    that returned something else than options, or the two sides of a clash."""
    named = gather_named("calcjob_options", CalcJobOption, "Calc-job option", builtin)
    return [option for _, option in named]
