"""core.chain: steps run one after another on one element, each on the outputs of the one
before; and pipeline setups made of such steps."""

from __future__ import annotations

import pytest


def two_steps(first_command: str = "tr a-z A-Z < reads.txt > upper.txt") -> list[dict]:
    return [
        {
            "process": "core.shell",
            "input_port": "files",
            "inputs": {"command": first_command, "outputs": ["upper.txt"]},
            "options": {"computer": "localhost"},
        },
        {
            "process": "core.shell",
            "input_port": "files",
            "inputs": {
                "command": "wc -c < upper.txt > count.txt; cat upper.txt",
                "outputs": ["count.txt"],
            },
            "options": {"computer": "localhost", "max_wallclock_seconds": 600},
        },
    ]


def test_a_chain_runs_its_steps_in_order_each_on_the_outputs_before(profile):
    from veglia import engine, orm
    from veglia.entry_points import WorkflowFactory

    chain = WorkflowFactory("core.chain")
    element = orm.SinglefileData(b"acgt\n", "reads.txt")
    outputs, node = engine.run_get_node(
        chain, files={"reads.txt": element}, steps=orm.List(two_steps())
    )
    assert node.is_finished_ok, (node.exit_status, node.exit_message)
    first, second = sorted(node.called, key=lambda n: n.pk)
    assert (first.process_type, second.process_type) == ("core.shell", "core.shell")
    assert first.label == "step 1 (core.shell)" and second.label == "step 2 (core.shell)"
    upper = first.outputs["files__upper_txt"]
    assert upper.get_content() == b"ACGT\n"
    assert upper.pk in {n.pk for _, n in second.inputs.items()}
    assert element.pk in {n.pk for _, n in first.inputs.items()}
    assert outputs["stdout"].get_content() == b"ACGT\n"
    assert node.outputs["files__count_txt"].get_content().strip() == b"5"


def test_a_failed_step_stops_the_chain_saying_which(profile):
    from veglia import engine, orm
    from veglia.entry_points import WorkflowFactory

    element = orm.SinglefileData(b"acgt\n", "reads.txt")
    _, node = engine.run_get_node(
        WorkflowFactory("core.chain"),
        files={"reads.txt": element},
        steps=orm.List(two_steps(first_command="exit 3")),
    )
    assert node.is_finished and not node.is_finished_ok
    [first] = node.called
    assert node.exit_status == 401
    assert node.exit_message == (
        f"Step 1 failed: core.shell, process {first.pk}: The command exited with status 3."
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.__setitem__(0, "sort"), "step 1: 'sort' is not a table; give e.g. "),
        (lambda s: s[1].__setitem__("colour", "red"), "step 2: unknown key 'colour'; a step's"),
        (lambda s: s[1].pop("input_port"), "step 2: input_port is missing or not a string"),
        (
            lambda s: s[1].__setitem__("process", "core.nope"),
            "step 2 (core.nope): process: No calculation or workflow 'core.nope'.",
        ),
        (
            lambda s: s[1].__setitem__("input_port", "command"),
            "step 2 (core.shell): input_port 'command' takes Str, which no output of step 1 "
            "(core.shell) gives",
        ),
        (
            lambda s: s[1]["inputs"].pop("command"),
            "step 2 (core.shell): inputs: give a `command` (a bash command line) or a `code`.",
        ),
        (
            lambda s: s[0]["options"].__setitem__("computer", "nowhere"),
            "step 1 (core.shell): No computer 'nowhere'",
        ),
        (lambda s: s.clear(), "steps: give a list of at least one step"),
    ],
)
def test_steps_that_will_not_do_are_refused_in_one_line(profile, change, message):
    from veglia import engine, orm
    from veglia.entry_points import WorkflowFactory

    steps = two_steps()
    change(steps)
    element = orm.SinglefileData(b"acgt\n", "reads.txt")
    with pytest.raises(ValueError) as refused:
        engine.run(
            WorkflowFactory("core.chain"), files={"reads.txt": element}, steps=orm.List(steps)
        )
    text = str(refused.value)
    assert message in text, text
    assert text.count("\n") == 0, text


def test_each_problem_of_the_steps_is_a_line(profile):
    from veglia import engine, orm
    from veglia.entry_points import WorkflowFactory

    steps = two_steps()
    steps[0]["inputs"]["outputs"] = "upper.txt"
    steps[1]["process"] = "core.nope"
    element = orm.SinglefileData(b"acgt\n", "reads.txt")
    with pytest.raises(ValueError) as refused:
        engine.run(
            WorkflowFactory("core.chain"), files={"reads.txt": element}, steps=orm.List(steps)
        )
    lines = str(refused.value).splitlines()
    assert len(lines) == 2 and lines[1].startswith("step 2 (core.nope): process:"), lines


def ok(result):
    assert result.exit_code == 0, result.output
    return result


TWO_STEP_ANSWERS = [
    "core.folder",
    "{runs}",  # path
    "*.txt",  # glob
    "",  # group_by: none
    "10",  # settled
    "",  # the source's computer: localhost
    "core.shell",
    "",  # input_port: files
    "",  # computer: localhost
    "command = 'cat *.txt > all.txt'",
    "outputs = ['all.txt']",
    "",
    "",  # no options
    "",  # max_active: no cap
    "y",  # a step after it
    "core.arithmetic.add",  # takes nothing core.shell gives: explained, asked again
    "core.shell",
    "command",  # an input, but not one for files: explained, asked again
    "",  # input_port: files
    "",  # computer: localhost
    "",  # no fixed inputs: core.shell needs a command, explained, asked again
    "",
    "command = 'wc -l < all.txt > count.txt'",
    "outputs = ['count.txt']",
    "",
    "max_wallclock_seconds = 600",
    "",
    "n",  # no third step
    "two-steps",
    "y",
]


def test_create_asks_for_steps_one_after_another(any_profile, run_cli, tmp_path):
    import re

    import tomllib

    from veglia.pipeline_setups import load_pipeline_setup

    runs = tmp_path / "runs"
    runs.mkdir()
    answers = [answer.format(runs=runs) for answer in TWO_STEP_ANSWERS]
    out = ok(run_cli("pipeline", "create", input="\n".join(answers) + "\n")).output
    assert "Add a step after it (run on its outputs)?" in out
    # Offered after core.shell: what takes files, with each one's first sentence.
    offer = out.split("step 2")[1]
    assert "core.shell" in offer and "Run a shell command line (with bash)" in offer
    listed = offer.split("process:")[0]
    assert (
        "core.restart" in listed
        and "core.arithmetic.add" not in listed
        and "core.chain" not in listed
    )
    assert (
        "'core.arithmetic.add' is not one of the processes offered (core.restart, core.shell)"
        in out
    )
    assert "input 'command' of core.shell takes nothing that core.shell gives; answer" in out
    assert "Error: step 2 (core.shell): inputs: give a `command`" in out
    assert "Please give the fixed inputs and options of step 2 again." in out
    assert out.count("[[inputs.steps]]") == 2  # the summary
    assert (
        "Created pipeline setup 'two-steps' version 1 (enabled): core.shell then core.shell" in out
    )

    setup = load_pipeline_setup("two-steps")
    assert (setup.process, setup.input_port) == ("core.chain", "files")
    assert setup.options == {"computer": "localhost"}
    assert setup.inputs == {
        "steps": [
            {
                "process": "core.shell",
                "input_port": "files",
                "inputs": {"command": "cat *.txt > all.txt", "outputs": ["all.txt"]},
                "options": {"computer": "localhost"},
            },
            {
                "process": "core.shell",
                "input_port": "files",
                "inputs": {"command": "wc -l < all.txt > count.txt", "outputs": ["count.txt"]},
                "options": {"computer": "localhost", "max_wallclock_seconds": 600},
            },
        ]
    }

    listed = ok(run_cli("pipeline", "list")).stdout
    assert re.search(r"two-steps\s+1\s+yes\s+core\.shell then core\.shell\s+core\.folder", listed)
    shown = ok(run_cli("pipeline", "show", "two-steps")).stdout
    assert re.search(r"1\s+core\.shell\s+files\s+command = \"cat \*\.txt > all\.txt\"", shown)
    assert re.search(r"2\s+core\.shell\s+files\s+command = \"wc -l < all.txt > count.txt\"", shown)
    assert "max_wallclock_seconds = 600" in shown
    assert "steps" not in shown.split("Fixed inputs")[1].split("\n")[0]

    # The TOML form: a setup file again, with the steps as [[inputs.steps]] tables.
    toml = ok(run_cli("pipeline", "show", "two-steps", "--toml")).stdout
    assert toml.count("[[inputs.steps]]") == 2
    copy = tmp_path / "copy.toml"
    copy.write_text(toml.replace('name = "two-steps"', 'name = "two-steps-2"'))
    ok(run_cli("pipeline", "create", "--from-file", str(copy)))
    again = load_pipeline_setup("two-steps-2")
    assert again.to_dict() == {**setup.to_dict(), "name": "two-steps-2"}
    assert tomllib.loads(toml)["inputs"]["steps"] == setup.inputs["steps"]


def test_a_setup_of_steps_builds_a_run_that_validates(profile, tmp_path):
    from veglia import orm
    from veglia.engine.pipeline_setup_check import run_builder
    from veglia.exceptions import PipelineSetupError
    from veglia.pipeline_setups import PipelineSetup

    runs = tmp_path / "runs"
    runs.mkdir()
    data = {
        "name": "upper-then-count",
        "process": "core.chain",
        "input_port": "files",
        "inputs": {"steps": two_steps()},
        "options": {"computer": "localhost"},
        "source": {"entry_point": "core.folder", "settings": {"path": str(runs)}},
    }
    setup = PipelineSetup.from_dict(data).store()
    element = {"reads.txt": orm.SinglefileData(b"acgt\n", "reads.txt")}
    builder = run_builder(setup, element, "a file")
    assert builder.process_class.process_type() == "core.chain"
    assert builder.steps.get_list() == two_steps()
    assert dict(builder.files) == element

    bad = two_steps()
    bad[1]["input_port"] = "arguments"
    with pytest.raises(PipelineSetupError) as refused:
        PipelineSetup.from_dict({**data, "name": "bad", "inputs": {"steps": bad}}).store()
    assert "step 2 (core.shell): input_port 'arguments' takes List, which no output" in str(
        refused.value
    )
    assert "\n" not in str(refused.value)
