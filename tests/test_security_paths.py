"""Paths, links and secrets at rest (issue #29): each test runs the attack a reviewer ran
and checks the refusal or the safe outcome that replaced it."""

from __future__ import annotations

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory

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
def test_a_link_in_a_folder_above_a_retrieved_file_is_refused_and_named(job_computer):
    # The job links d and f/g out of its work dir, to a folder of its own making.
    _, node = _run_on(
        job_computer,
        "out=$(mktemp -d); mkdir -p $out/sub; echo secret > $out/sub/leak.txt; "
        "echo secret > $out/leak.txt; ln -s $out d; mkdir f; ln -s $out f/g; "
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
