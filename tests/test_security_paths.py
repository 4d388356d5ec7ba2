"""Paths, links and secrets at rest (issue #29): each test runs the attack a reviewer ran
and checks the refusal or the safe outcome that replaced it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.exceptions import UnsafeWorkdirError

ShellJob = CalculationFactory("core.shell")


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


# -- a link anywhere along a retrieved path ---------------------------------------------------
@pytest.fixture
def outside():
    """A folder outside any work dir that both root and the ssh user can read, with files
    a job must not bring back; removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="veglia-outside-"))
    folder.chmod(0o755)
    (folder / "sub").mkdir(mode=0o755)
    (folder / "leak.txt").write_text("secret\n")
    (folder / "sub" / "leak.txt").write_text("secret\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_link_in_a_folder_above_a_retrieved_file_is_refused_and_named(job_computer, outside):
    _, node = _run_on(
        job_computer,
        f"ln -s {outside} d; mkdir f; ln -s {outside} f/g; "
        "mkdir -p e/sub; echo fine > e/sub/good.txt; echo mine > ok.txt",
        outputs=orm.List(["d/sub/*", "f/g/*", "e/sub/*", "ok.txt"]),
    )
    assert node.is_finished_ok, node.exit_message
    names = set(node.outputs.retrieved.list_object_names())
    assert {"ok.txt", "e/sub/good.txt"} <= names
    assert not [name for name in names if name.startswith(("d/", "f/"))], names
    assert node.outputs.retrieved.get_object_content("e/sub/good.txt") == b"fine\n"
    report = "\n".join(log.message for log in node.logs)
    assert "d (a link on the path of d/sub/*)" in report
    assert "f/g (a link on the path of f/g/*)" in report


# -- a work-dir root that is a link ------------------------------------------------------------
def _local_computer(label: str, workdir: str) -> orm.Computer:
    computer = orm.Computer(
        label=label,
        hostname="localhost",
        transport_type="core.local",
        scheduler_type="core.direct",
        properties={"workdir": workdir, "safe_interval": 0.0, "minimum_poll_interval": 0.1},
    ).store()
    computer.configure()
    return computer


@pytest.fixture
def link_to_tmp():
    """A link to /tmp in a folder of its own under /tmp (root's 0755); removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="veglia-sec-"))
    folder.chmod(0o755)
    (folder / "work").symlink_to("/tmp")
    yield folder / "work"
    shutil.rmtree(folder, ignore_errors=True)


def test_a_work_dir_root_linked_to_tmp_is_refused_as_tmp_is(profile, link_to_tmp, tmp_path):
    marker = tmp_path / "ran"
    for label, workdir in (("direct", "/tmp"), ("linked", str(link_to_tmp))):
        _local_computer(label, workdir)
        with pytest.raises(UnsafeWorkdirError, match="not safe: /tmp can be written by"):
            engine.run(ShellJob, command=orm.Str(f"touch {marker}"), metadata={"computer": label})
    assert not marker.exists()


def test_over_ssh_a_work_dir_root_linked_to_tmp_is_refused(
    profile, services_env, ssh_params, link_to_tmp
):
    from veglia_fixtures.services import ssh_computer

    ssh_computer("remote", services_env, ssh_params, "core.direct", workdir=str(link_to_tmp))
    with pytest.raises(UnsafeWorkdirError, match="not safe: /tmp is owned by user 0"):
        engine.run(ShellJob, command=orm.Str("true"), metadata={"computer": "remote"})
