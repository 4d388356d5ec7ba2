"""Paths, links and secrets at rest (issue #29): each test runs the attack a reviewer ran
and checks the refusal or the safe outcome that replaced it."""

from __future__ import annotations

import base64
import json
import posixpath
import re
import shlex
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.engine.calcjob.file_watch import FileWatch, requests_for, slices_from, watch_files
from veglia.entry_points import CalculationFactory
from veglia.exceptions import UnsafeWorkdirError
from veglia.file_reads import read_per_file
from veglia.plugins.transports.local import LocalTransport
from veglia.plugins.transports.ssh import SshTransport
from veglia.transports import Transport
from veglia_fixtures.seqera_platform import TOKEN
from veglia_fixtures.services import run_on

ShellJob = CalculationFactory("core.shell")


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
    _, node = run_on(
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


# -- a link above a file veglia or a monitor reads while the job runs ------------------------
def test_a_monitor_reads_no_file_behind_a_link_in_a_folder_above_it(job_computer, outside):
    builder = ShellJob.get_builder()
    builder.command = orm.Str(f"ln -s {outside} logs; sleep 3; echo done")
    builder.metadata.computer = job_computer
    builder.monitors = {
        "leak": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "logs/leak.txt", "pattern": "secret"},
        }
    }
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message  # not stopped by what it read outside
    report = "\n".join(log.message for log in node.logs)
    link = f"{node.remote_workdir}/logs"
    assert f"monitor leak: logs/leak.txt is not read: {link} is a link" in report


@watch_files(
    FileWatch("logs/leak.txt"),
    FileWatch("logs/*.txt", glob=True),
    FileWatch("sub/leak.txt"),
    FileWatch("mine.txt"),
)
def _reads(node, transport, files: dict | None = None):
    """Test monitor: what it was handed."""
    return files


class _CommandLocal(LocalTransport):
    """This machine read as a computer is: through the python3 command."""

    read_files = Transport.read_files


class _SftpOnly(SshTransport):
    """A computer without python3: lstat and read per file, over SFTP."""

    def read_files(self, payload):
        return read_per_file(self, payload)


def _read(transport: Transport, workdir: str) -> dict:
    """What the engine hands ``_reads`` for a job in ``workdir``, in one read."""
    requests = requests_for(_reads, {}, workdir, {})
    answers = transport.read_files({"budget": 1 << 20, "requests": requests})
    return slices_from(_reads, {}, workdir, {}, answers)[0]


@pytest.fixture(params=["local", "command", "ssh", "sftp"])
def reading_transport(request, tmp_path):
    """A transport, and a folder on its computer to stand for a job's work dir."""
    if request.param in ("local", "command"):
        transport = LocalTransport() if request.param == "local" else _CommandLocal()
        return transport, str(tmp_path / "job")
    services_env, ssh_params = (request.getfixturevalue(n) for n in ("services_env", "ssh_params"))
    kind = SshTransport if request.param == "ssh" else _SftpOnly
    transport = kind(services_env["SSH_HOST"], **ssh_params)
    base = f"{services_env['SSH_USER_HOME']}/veglia-work/paths-{uuid.uuid4().hex}"

    def remove() -> None:
        with transport:
            transport.rmtree(base)

    request.addfinalizer(remove)
    return transport, f"{base}/job"


def test_watched_files_behind_a_link_are_not_read_by_any_transport(reading_transport, outside):
    transport, workdir = reading_transport
    with transport:
        transport.makedirs(f"{workdir}/sub")
        transport.symlink(str(outside), f"{workdir}/logs")
        transport.write_bytes(f"{workdir}/sub/leak.txt", b"own\n")
        transport.write_bytes(f"{workdir}/mine.txt", b"mine\n")
        # The job's folder itself made a link to a real folder holding the same files.
        transport.symlink(workdir, f"{workdir}-link")
        files, through = _read(transport, workdir), _read(transport, f"{workdir}-link")
    assert set(files) == {"logs/leak.txt", "logs/*.txt", "sub/leak.txt", "mine.txt"}
    assert (files["mine.txt"].data, files["sub/leak.txt"].data) == (b"mine\n", b"own\n")
    for name in ("logs/leak.txt", "logs/*.txt"):
        assert files[name].data == b"", name  # not the secret from outside
        assert files[name].link == f"{workdir}/logs", name
    assert not [part.data for part in through.values() if part.data]
    assert {part.link for part in through.values()} == {f"{workdir}-link"}


def test_a_fusion_trace_in_a_linked_folder_is_not_read(job_computer, outside):
    (outside / "trace.json").write_text(json.dumps({"gpu": {"name": "Tesla", "pct": 1}}))
    builder = ShellJob.get_builder()
    builder.command = orm.Str(f"ln -s {outside} .fusion; echo ok")
    builder.metadata.computer = job_computer
    builder.metadata.options.fusion = True
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    assert node.get_attribute("trace_record")["gpu_metrics"] is None
    link = f"{node.remote_workdir}/.fusion"
    assert any(f"is not read: {link} is a link" in log.message for log in node.logs)


# -- a job that replaces its own folder, or one veglia made above it, with a link --------------
REPLACE = {
    # The job's own folder: ``cd ..; mv job x; ln -s /elsewhere job``.
    "job": 'j=$(basename "$PWD"); cd ..; mv "$j" "$j.moved"; ln -s {outside} "$j"',
    # The shard above it (``root/ab/cd``): a link to a folder holding a job folder of the name.
    "shard": 'j=$(basename "$PWD"); s=$(basename "$(dirname "$PWD")"); cd ../..; '
    'mkdir -p "elsewhere-$s/$j"; cp {outside}/leak.txt "elsewhere-$s/$j/"; '
    'mv "$s" "$s.moved"; ln -s "elsewhere-$s" "$s"',
}
UNDO = {
    "job": 'cd "$(dirname {workdir})" && rm "$j" && mv "$j.moved" "$j"',
    "shard": 'cd "$(dirname "$(dirname {workdir})")" && rm -r "$s" "elsewhere-$s" && '
    'mv "$s.moved" "$s"',
}


@pytest.mark.parametrize("replaced", ["job", "shard"])
def test_a_job_folder_replaced_with_a_link_is_not_retrieved_from(job_computer, outside, replaced):
    _, node = run_on(
        job_computer,
        REPLACE[replaced].format(outside=outside),
        outputs=orm.List(["*.txt"]),
    )
    workdir = node.remote_workdir
    with orm.load_computer(job_computer).get_transport() as transport:
        job, shard = (shlex.quote(part) for part in workdir.split("/")[:-3:-1])
        undo = UNDO[replaced].format(workdir=shlex.quote(workdir))
        assert transport.exec_command(f"j={job}; s={shard}; {undo}")[0] == 0
    retrieved = node.outputs.retrieved.list_object_names() if "retrieved" in node.outputs else []
    assert "leak.txt" not in retrieved
    link = workdir if replaced == "job" else posixpath.dirname(workdir)
    report = "\n".join(log.message for log in node.logs)
    assert f"nothing retrieved: {link} is a link" in report


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


def test_config_set_workdir_root_refuses_what_the_first_job_would_refuse(
    profile, run_cli, link_to_tmp, tmp_path
):
    def set_root(value: str):
        return run_cli("-p", "test", "config", "set", "workdir.root", value)

    for value in ("/tmp", str(link_to_tmp)):
        refused = set_root(value)
        assert refused.exit_code == 3, refused.output
        [line] = refused.stderr.strip().splitlines()
        assert f"Invalid value for workdir.root: '{value}' is not safe on this machine: " in line
        # As root /tmp is yours but open to all; as anyone else it is root's.
        assert re.search(r"/tmp (can be written by group and others|is owned by user 0)", line)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all, without the sticky bit /tmp has
    below = set_root(f"{shared}/work")
    assert below.exit_code == 3
    assert "can be written by other users and has no sticky bit" in below.stderr
    relative = set_root("veglia-work")
    assert relative.exit_code == 3 and "is not an absolute path" in relative.stderr
    assert run_cli("-p", "test", "config", "get", "workdir.root").stdout.strip() == (
        "{home}/veglia-work"
    )
    private = tmp_path / "mine"
    private.mkdir(mode=0o700)
    for value in (str(private), "{home}/veglia-work", "/tmp/{username}-veglia"):
        accepted = set_root(value)
        assert accepted.exit_code == 0, accepted.output


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


def test_workdir_root_is_where_jobs_go_on_computers_that_name_no_workdir(
    profile, run_cli, tmp_path
):
    root = tmp_path / "jobs"
    root.mkdir(mode=0o700)
    assert run_cli("-p", "test", "config", "set", "workdir.root", str(root)).exit_code == 0
    profile.options["workdir.root"] = str(root)  # what a process loading the profile now reads
    orm.Computer(
        label="rooted",
        hostname="localhost",
        transport_type="core.local",
        scheduler_type="core.direct",
        properties={"safe_interval": 0.0, "minimum_poll_interval": 0.1},
    ).store().configure()
    _, node = engine.run_get_node(
        ShellJob, command=orm.Str("true"), metadata={"computer": "rooted"}
    )
    assert node.is_finished_ok, node.exit_message
    assert node.remote_workdir.startswith(f"{root}/"), node.remote_workdir
    # A computer's own workdir still wins.
    _local_computer("own", str(tmp_path / "own"))
    _, mine = engine.run_get_node(ShellJob, command=orm.Str("true"), metadata={"computer": "own"})
    assert mine.remote_workdir.startswith(f"{tmp_path}/own/"), mine.remote_workdir
