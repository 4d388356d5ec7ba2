"""Paths, links and secrets at rest (issue #29): each test runs the attack a reviewer ran
and checks the refusal or the safe outcome that replaced it."""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.exceptions import UnsafeWorkdirError
from veglia_fixtures.seqera_platform import TOKEN

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


# -- process dump: a call cycle and labels that clean to one name -----------------------------
def _add_link(source: orm.Node, target: orm.Node, link_type: str, label: str) -> None:
    """A link row written straight into the database, as a forged archive could leave it."""
    from veglia.manage import get_storage
    from veglia.storage.models import Link

    with get_storage().session() as session:
        session.add(Link(input_id=source.pk, output_id=target.pk, label=label, link_type=link_type))


def test_process_dump_writes_a_call_cycle_once_and_says_so(profile, workflows, run_cli, tmp_path):
    _, flow = engine.run_get_node(
        workflows.CountedShell, command=orm.Str("echo hi"), times=orm.Int(2)
    )
    first, _ = flow.called
    _add_link(first, flow, "call", "CALL")  # the flow calls first, which calls the flow
    target = tmp_path / "dump"
    result = run_cli("-p", "test", "process", "dump", str(flow.pk), "-o", str(target))
    assert result.exit_code == 0, result.output
    assert f"The calls form a cycle ({first.pk} -> {flow.pk})" in result.output
    step = target / f"01-core.shell-{first.pk}"
    assert (step / "retrieved" / "stdout").read_text() == "hi\nrun 1\n"
    assert not [path for path in step.iterdir() if path.name[:2].isdigit()]
    meta = json.loads((step / "veglia_process.json").read_text())
    assert meta["called"][0]["folder"] is None and meta["called"][0]["dumped_in"] == ".."
    readme = (step / "README.md").read_text()
    assert f"CountedShell {flow.pk}, finished [0], dumped already in `../`" in readme


def test_process_dump_keeps_labels_that_clean_to_one_name_apart(profile, run_cli, tmp_path):
    _, job = engine.run_get_node(ShellJob, command=orm.Str("true"))
    spaced, underscored = orm.Str("spaced").store(), orm.Str("underscored").store()
    upper = orm.Str("upper").store()
    _add_link(spaced, job, "input", "x y")
    _add_link(underscored, job, "input", "x_y")
    _add_link(upper, job, "input", "X_Y")
    target = tmp_path / "dump"
    result = run_cli("-p", "test", "process", "dump", str(job.pk), "-o", str(target))
    assert result.exit_code == 0, result.output
    meta = json.loads((target / "veglia_process.json").read_text())
    written = {}
    for label in ("x y", "x_y", "X_Y"):
        path = meta["inputs"][label]["path"]
        written[path.lower()] = json.loads((target / path).read_text())
    assert sorted(written.values()) == ["spaced", "underscored", "upper"]


# -- the veglia home is tightened whenever it is loaded ---------------------------------------
PRIVATE = {
    "home": "700",
    "config.json": "600",
    "secrets.json": "600",
    "profiles/test": "700",
    "profiles/other": "700",
}


def _open_up(home: Path) -> None:
    """The home as an older release (or a umask of 022) left it."""
    for name in PRIVATE:
        path = home if name == "home" else home / name
        path.chmod(0o755 if path.is_dir() else 0o644)


def _modes(home: Path) -> dict[str, str]:
    return {
        name: f"{(home if name == 'home' else home / name).stat().st_mode & 0o777:o}"
        for name in PRIVATE
    }


def test_the_home_and_its_files_are_made_private_when_a_profile_loads(profile, veglia_home):
    from veglia import load_profile
    from veglia.config import Config

    Config().add_profile("other")

    _open_up(veglia_home)
    load_profile("test")
    assert _modes(veglia_home) == PRIVATE


def test_the_home_and_its_files_are_made_private_when_a_command_starts(
    profile, veglia_home, run_cli
):
    from veglia.config import Config

    Config().add_profile("other")
    for command in (("profile", "list"), ("-p", "test", "config", "show")):
        _open_up(veglia_home)
        assert run_cli(*command).exit_code == 0
        assert _modes(veglia_home) == PRIVATE, command


# -- credentials inside tower.endpoint ----------------------------------------------------------
def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _assert_kept_secret(veglia_home: Path, run_cli, endpoint: str) -> None:
    assert "s3cret" not in (veglia_home / "config.json").read_text()
    secrets = json.loads((veglia_home / "secrets.json").read_text())
    assert secrets["test"]["tower.password"] == "s3cret!"
    for command in (
        ("config", "show", "--all"),
        ("config", "get", "tower.endpoint"),
        ("config", "get", "tower.password"),
        ("tower", "status"),
    ):
        result = run_cli("-p", "test", *command)
        assert result.exit_code == 0 and "s3cret" not in result.output, command
    shown = run_cli("-p", "test", "config", "get", "tower.endpoint").output
    assert shown.strip() == endpoint.replace(":s3cret%21@", "@")


def _delivered_credentials(profile, platform) -> list[str | None]:
    from veglia.plugins.tower.sender import TowerSender

    engine.run_get_node(ShellJob, command=orm.Str("true"))
    TowerSender(profile).send_pending()
    assert platform.authorizations
    return platform.authorizations


def test_a_password_in_tower_endpoint_is_kept_secret_and_still_sent(veglia_home, platform, run_cli):
    from veglia_fixtures.profiles import make_profile

    endpoint = platform.url.replace("http://", "http://alice:s3cret%21@")
    profile = make_profile(
        **{"tower.enabled": "yes", "tower.endpoint": endpoint, "tower.access_token": TOKEN}
    )
    _assert_kept_secret(veglia_home, run_cli, endpoint)
    assert set(_delivered_credentials(profile, platform)) == {_basic("alice", "s3cret!")}


def test_a_password_an_older_release_left_in_tower_endpoint_moves_to_the_secrets(
    veglia_home, platform, run_cli
):
    from veglia import load_profile
    from veglia_fixtures.profiles import make_profile

    make_profile(**{"tower.enabled": "yes", "tower.access_token": TOKEN})
    endpoint = platform.url.replace("http://", "http://alice:s3cret%21@")
    config = json.loads((veglia_home / "config.json").read_text())
    config["profiles"]["test"]["options"]["tower.endpoint"] = endpoint
    (veglia_home / "config.json").write_text(json.dumps(config))
    profile = load_profile("test")
    _assert_kept_secret(veglia_home, run_cli, endpoint)
    assert set(_delivered_credentials(profile, platform)) == {_basic("alice", "s3cret!")}
