"""What a job, its files or another local user must not be able to do (issue: hardening).

Each test runs the attack as a reviewer ran it and checks the clear error or the safe
outcome that replaced it.
"""

from __future__ import annotations

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.schedulers import JobTemplate, SchedulerError

ShellJob = CalculationFactory("core.shell")


# -- environment variable names go into the script ------------------------------------------
def test_an_environment_variable_name_cannot_run_a_command(profile, tmp_path):
    pwned = tmp_path / "pwned"
    with pytest.raises(ValueError, match="not an environment variable name"):
        engine.run(
            ShellJob,
            command=orm.Str("true"),
            metadata={"options": {"environment_variables": {f"A=1; touch {pwned}; B": "v"}}},
        )
    assert not pwned.exists()


def test_environment_values_are_text_or_numbers(profile):
    with pytest.raises(ValueError, match="must be text or a number, not list"):
        engine.run(
            ShellJob,
            command=orm.Str("true"),
            metadata={"options": {"environment_variables": {"OK": ["a"]}}},
        )
    outputs = engine.run(
        ShellJob,
        command=orm.Str('echo "$THREADS $NAME"'),
        metadata={"options": {"environment_variables": {"THREADS": 4, "NAME": "a b;c"}}},
    )
    assert outputs["stdout"].get_content() == b"4 a b;c\n"


def test_a_scheduler_plugin_never_writes_a_bad_name_into_a_script():
    from veglia.plugins.schedulers.slurm import SlurmScheduler

    template = JobTemplate(commands=["true"], environment={"$(id)": "x"})
    with pytest.raises(SchedulerError, match="not an environment variable name"):
        SlurmScheduler().get_submit_script(template)
