"""What a job, its files or another local user must not be able to do (issue: hardening).

Each test runs the attack as a reviewer ran it and checks the clear error or the safe
outcome that replaced it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.exceptions import UnsafePathError, UnsafeWorkdirError
from veglia.schedulers import JobTemplate, SchedulerError
from veglia_fixtures.services import run_on

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
def test_a_link_to_dev_zero_as_the_exit_status_file_is_not_read(job_computer):
    # The script's last line writes through the link (into /dev/zero): the status is unknown.
    _, node = run_on(job_computer, "ln -sf /dev/zero _veglia_exit_status; echo done")
    assert node.is_terminated
    assert node.get_attribute("job_outcome").get("exit_status") is None
    sizes = [record.size for record in node.outputs.retrieved.list_objects()]
    assert sum(sizes) < 1_000_000


def test_links_and_fifos_a_job_leaves_are_not_retrieved(job_computer):
    _, node = run_on(
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


def test_a_command_that_exits_non_zero_is_measured_without_a_dropped_line_report(profile):
    # GNU time writes "Command exited with non-zero status 3" before the figures: its own
    # line, not a number the job wrote.
    _, node = engine.run_get_node(ShellJob, command=orm.Str("exit 3"))
    assert node.exit_status == 400, node.exit_message
    report = "\n".join(log.message for log in node.logs)
    assert "not sane numbers" not in report, report
    usage = node.get_attribute("usage")
    assert usage["peak_memory_kb"] > 0
    assert usage["failed_commands"] == 1  # as docs/pipelines.md says


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


# -- gotocomputer --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("hostname", "username"), [("h; touch {marker}", "u"), ("-oProxyCommand=touch {marker}", "")]
)
def test_gotocomputer_passes_the_destination_to_ssh_as_one_quoted_argument(
    tmp_path, hostname, username
):
    import os
    import subprocess

    from veglia.plugins.transports.ssh import SshTransport

    marker = tmp_path / "pwned"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Stands in for ssh: records the arguments it was given, one per line.
    (bin_dir / "ssh").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/args\n')
    (bin_dir / "ssh").chmod(0o755)
    host = hostname.format(marker=marker)
    transport = SshTransport(host, username=username, port=22)
    command = transport.gotocomputer_command("/work/dir")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", command], env=env, check=True, timeout=30)
    assert not marker.exists()
    args = (tmp_path / "args").read_text().splitlines()
    destination = f"{username}@{host}" if username else host
    assert args[-3:] == ["--", destination, "cd /work/dir && exec bash -l"]


# -- file modes of the profile -----------------------------------------------------------
def _mode(path) -> int:
    return path.stat().st_mode & 0o777


def test_the_profile_tree_is_readable_by_its_owner_only(veglia_home, run_cli, daemon):
    assert run_cli("presto", "--no-broker").exit_code == 0
    folder = veglia_home / "profiles" / "presto"
    assert _mode(veglia_home) == 0o700 and _mode(folder) == 0o700
    assert _mode(folder / "storage.sqlite") == 0o600
    assert _mode(veglia_home / "config.json") == 0o600
    assert run_cli("shell", "echo private").exit_code == 0
    assert _mode(folder / "scratch") == 0o700  # the job folders are inside it
    for path in folder.rglob("*"):
        if "scratch" in path.relative_to(folder).parts:
            continue
        if path.is_dir():
            assert _mode(path) == 0o700, path
        elif path.suffix in (".sqlite", ".log") or "objects" in path.parts:
            assert _mode(path) == 0o600, path

    run_cli("-p", "presto", "daemon", "start", "1")
    try:
        logs = list(folder.glob("daemon/*/daemon.log"))
        assert logs and all(_mode(log) == 0o600 for log in logs)
    finally:
        run_cli("-p", "presto", "daemon", "stop")


def test_a_profile_made_open_by_an_older_release_is_tightened_when_used(profile):
    from veglia import load_profile

    profile.folder.chmod(0o755)
    load_profile("test")
    assert _mode(profile.folder) == 0o700


# -- the work dir root ---------------------------------------------------------------------
NOBODY = 65534


@pytest.fixture
def shared_tmp_root():
    """A folder in /tmp as the old default put work dirs there; removed afterwards."""
    import os
    import shutil
    import uuid

    if os.getuid() != 0:
        pytest.skip("making a folder another user owns needs root")
    root = Path(f"/tmp/veglia-sec-{uuid.uuid4().hex[:8]}")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _local_computer(label: str, workdir: str):
    return orm.Computer(
        label=label,
        hostname="localhost",
        transport_type="core.local",
        scheduler_type="core.direct",
        properties={"workdir": workdir, "safe_interval": 0.0, "minimum_poll_interval": 0.1},
    ).store()


def test_a_work_dir_another_user_made_first_is_refused(profile, shared_tmp_root, run_cli):
    import os

    (shared_tmp_root / "work").mkdir(parents=True)
    os.chown(shared_tmp_root, NOBODY, NOBODY)
    os.chown(shared_tmp_root / "work", NOBODY, NOBODY)
    _local_computer("tmpdefault", f"{shared_tmp_root}/work").configure()
    marker = shared_tmp_root / "ran"
    with pytest.raises(UnsafeWorkdirError, match="is owned by user 65534"):
        engine.run(
            ShellJob, command=orm.Str(f"touch {marker}"), metadata={"computer": "tmpdefault"}
        )
    assert not marker.exists() and not list((shared_tmp_root / "work").iterdir())
    tested = run_cli("-p", "test", "computer", "test", "tmpdefault")
    assert tested.exit_code != 0 and "not safe" in tested.output


def test_a_work_dir_others_can_write_is_refused_and_a_new_one_is_private(profile, shared_tmp_root):
    _local_computer("open", f"{shared_tmp_root}/open").configure()
    (shared_tmp_root / "open").mkdir(parents=True, mode=0o777)
    (shared_tmp_root / "open").chmod(0o777)
    with pytest.raises(UnsafeWorkdirError, match="can be written by group and others"):
        engine.run(ShellJob, command=orm.Str("true"), metadata={"computer": "open"})

    _local_computer("fresh", f"{shared_tmp_root}/fresh/work").configure()
    _, node = engine.run_get_node(ShellJob, command=orm.Str("true"), metadata={"computer": "fresh"})
    assert node.is_finished_ok
    assert (shared_tmp_root / "fresh" / "work").stat().st_mode & 0o777 == 0o700


def test_over_ssh_a_work_dir_root_owned_by_another_user_is_refused(
    profile, services_env, ssh_params, shared_tmp_root
):
    from veglia_fixtures.services import ssh_computer

    (shared_tmp_root / "work").mkdir(parents=True)  # owned by root, not the ssh user
    shared_tmp_root.chmod(0o755)
    ssh_computer(
        "remote", services_env, ssh_params, "core.direct", workdir=f"{shared_tmp_root}/work"
    )
    with pytest.raises(UnsafeWorkdirError, match="is owned by user 0"):
        engine.run(ShellJob, command=orm.Str("true"), metadata={"computer": "remote"})


def test_the_default_work_dir_is_under_the_home(profile, services_env, ssh_params):
    from veglia_fixtures.services import ssh_computer

    computer = ssh_computer("homed", services_env, ssh_params, "core.direct")
    computer.properties.pop("workdir")
    orm.Computer(
        label="homed2",
        hostname=computer.hostname,
        transport_type="core.ssh",
        scheduler_type="core.direct",
    ).store().configure(**ssh_params)
    _, node = engine.run_get_node(
        ShellJob, command=orm.Str("true"), metadata={"computer": "homed2"}
    )
    assert node.is_finished_ok
    assert node.remote_workdir.startswith(f"{services_env['SSH_USER_HOME']}/veglia-work/")


def test_in_the_daemon_a_job_with_an_unsafe_work_dir_waits_blocked(
    profile, shared_tmp_root, daemon, run_cli
):
    import os

    from veglia_fixtures.profiles import wait_for

    (shared_tmp_root / "work").mkdir(parents=True)
    os.chown(shared_tmp_root / "work", NOBODY, NOBODY)
    _local_computer("tmpdefault", f"{shared_tmp_root}/work").configure()
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("echo ok"), metadata={"computer": "tmpdefault"})
    wait_for([node], lambda n: bool(n.get_attribute("blocked")) and n.paused, timeout=60)
    assert "owned by user 65534" in node.get_attribute("blocked")["reason"]

    os.chown(shared_tmp_root / "work", 0, 0)  # the fix
    assert run_cli("-p", "test", "process", "unblock", str(node.pk)).exit_code == 0
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_finished_ok, node.exit_message
