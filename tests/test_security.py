"""What a job, its files or another local user must not be able to do (issue: hardening).

Each test runs the attack as a reviewer ran it and checks the clear error or the safe
outcome that replaced it.
"""

from __future__ import annotations

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.exceptions import UnsafePathError
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


# -- names and patterns stay inside their folder --------------------------------------------
@pytest.mark.parametrize("pattern", ["../veglia-escape.txt", "/etc/hostname", "a/../../b"])
def test_a_retrieve_pattern_cannot_leave_the_work_dir(profile, tmp_path, pattern):
    with pytest.raises(ValueError, match="absolute|climbs out"):
        engine.run(
            ShellJob,
            command=orm.Str(f"echo x > {tmp_path}/ran"),
            outputs=orm.List([pattern]),
        )
    with pytest.raises(ValueError, match="absolute|climbs out"):
        engine.run(
            ShellJob,
            command=orm.Str(f"echo x > {tmp_path}/ran"),
            metadata={"options": {"additional_retrieve_list": [pattern]}},
        )
    assert not (tmp_path / "ran").exists(), "refused before anything ran"


@pytest.mark.parametrize("name", ["../../escape.txt", "/tmp/escape.txt", "a/../../escape.txt"])
def test_an_input_file_name_cannot_leave_the_work_dir(profile, name):
    folder = orm.FolderData()
    with pytest.raises(UnsafePathError, match="absolute|climbs out"):
        folder.put_object_from_bytes(name, b"x")
    with pytest.raises(UnsafePathError):
        orm.SinglefileData(b"x", name)
    with pytest.raises(ValueError, match="absolute|climbs out"):
        engine.run(ShellJob, command=orm.Str("true"), files={"x": folder}, outputs=orm.List([name]))


# -- links and special files a job leaves are never followed ---------------------------------
@pytest.fixture(params=["local", "ssh"])
def job_computer(request, profile):
    """The label of a computer to run on: localhost, or the loopback sshd (direct)."""
    if request.param == "local":
        return "localhost"
    from veglia_fixtures.services import ssh_computer

    services_env = request.getfixturevalue("services_env")
    ssh_computer("sshbox", services_env, request.getfixturevalue("ssh_params"), "core.direct")
    return "sshbox"


def _run_on(computer: str, command: str, **inputs):
    return engine.run_get_node(
        ShellJob, command=orm.Str(command), metadata={"computer": computer}, **inputs
    )


def test_a_link_to_dev_zero_as_the_exit_status_file_is_not_read(job_computer):
    # The script's last line writes through the link (into /dev/zero): the status is unknown.
    _, node = _run_on(job_computer, "ln -sf /dev/zero _veglia_exit_status; echo done")
    assert node.is_terminated
    assert node.get_attribute("job_outcome").get("exit_status") is None
    sizes = [record.size for record in node.outputs.retrieved.list_objects()]
    assert sum(sizes) < 1_000_000


def test_links_and_fifos_a_job_leaves_are_not_retrieved(job_computer):
    _, node = _run_on(
        job_computer,
        "ln -s /etc/passwd leak.txt; mkfifo pipe.txt; mkdir d; ln -s /etc d/etc; "
        "echo mine > ok.txt",
        outputs=orm.List(["*.txt", "d"]),
    )
    assert node.is_finished_ok, node.exit_message
    names = node.outputs.retrieved.list_object_names()
    assert "ok.txt" in names
    assert not {"leak.txt", "pipe.txt", "d/etc"} & set(names)
    report = "\n".join(log.message for log in node.logs)
    assert "not retrieved, as not regular files" in report and "leak.txt" in report


def test_a_fusion_trace_linked_to_dev_zero_is_not_read(job_computer):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("mkdir -p .fusion && ln -s /dev/zero .fusion/trace.json; echo ok")
    builder.metadata.computer = job_computer
    builder.metadata.options.fusion = True
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok
    assert node.get_attribute("trace_record")["gpu_metrics"] is None
    assert any("not a regular file" in log.message for log in node.logs)


# -- numbers a job writes where measurements go ---------------------------------------------
def test_insane_usage_numbers_are_dropped_and_the_job_ends_normally(profile):
    big = "9" * 400
    usage = f"nan nan nan%\n{big} 1.5 100%\n2048 inf 50%\n1024 2.0 1e999%\n"
    _, node = engine.run_get_node(
        ShellJob,
        command=orm.Str("cat written >> _veglia_usage; echo ok"),
        files={"written": orm.SinglefileData(usage.encode(), "written")},
    )
    assert node.is_finished_ok, node.exit_message
    recorded = node.get_attribute("usage")
    assert recorded["peak_memory_kb"] < 2**53  # the sane lines only
    assert all(isinstance(v, str) or (v == v and abs(v) < 2**53) for v in recorded.values())
    assert any("were not sane numbers: dropped" in log.message for log in node.logs)


def test_a_fusion_trace_with_nan_and_400_digit_numbers_never_excepts_the_job(profile):
    trace = (
        '{"proc": {"peak_rss": NaN, "realtime": ' + "9" * 400 + ', "pcpu": Infinity},'
        ' "gpu": {"name": "Tesla", "mem": NaN}}'
    )
    builder = ShellJob.get_builder()
    builder.files = {"trace.json": orm.SinglefileData(trace.encode(), "trace.json")}
    builder.command = orm.Str("mkdir -p .fusion && mv trace.json .fusion/trace.json; echo ok")
    builder.metadata.options.fusion = True
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    record = node.get_attribute("trace_record")
    assert record["gpu_metrics"] == {"name": "Tesla", "mem": None}
    assert node.get_attribute("usage") is None or node.get_attribute("usage")["source"] != "fusion"


def test_nan_never_reaches_the_database_as_malformed_json(profile):
    node = orm.Dict({"x": 1}).store()
    with pytest.raises(ValueError, match="not JSON compliant"):
        orm.Dict({"x": float("nan")}).store()
    assert orm.load_node(node.pk).get_dict() == {"x": 1}


# -- passwords in URLs --------------------------------------------------------------------
def test_a_password_in_a_refused_url_is_never_echoed(profile, run_cli):
    result = run_cli("-p", "test", "config", "set", "storage.url", "mysql://alice:S3cretPw@db/x")
    assert result.exit_code != 0
    assert "S3cretPw" not in result.output and "alice:****@db" in result.output


def test_a_percent_encoded_password_is_encoded_once(profile, run_cli):
    from veglia.config import Config

    url = "postgres://alice:p%40ss@127.0.0.1:5432/veglia"
    result = run_cli("-p", "test", "config", "set", "storage.url", url)
    assert result.exit_code == 0, result.output
    assert "p%40ss" not in result.output and "p@ss" not in result.output
    stored = Config().get_profile("test")
    assert stored.get_option("storage.password") == "p@ss"
    assert stored.storage_url == "postgresql://alice:p%40ss@127.0.0.1:5432/veglia"
