"""Issue 15's silent traps, each as a user meets it (through the CLI where there is one):
it is either gone or said out loud now."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time

import pytest

from veglia_fixtures.profiles import wait_for

SHELL_SUBMITTED = re.compile(r"Submitted process (\d+)")


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def _closed_port() -> int:
    with socket.socket() as probe:  # bound then released: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _submit_shell(run_cli, *args: str) -> int:
    result = ok(run_cli("-p", "test", "shell", "--submit", *args))
    return int(SHELL_SUBMITTED.search(result.output).group(1))


# -- 1. a running daemon follows config set and computer configure --------------------------
@pytest.fixture
def notify_profile(veglia_home, smtp_server):
    from veglia.engine.runner import set_runner
    from veglia_fixtures.profiles import make_profile

    profile = make_profile(
        **{
            "notify.email": "old@example.org",
            "notify.smtp_host": "127.0.0.1",
            "notify.smtp_port": str(smtp_server.port),
        }
    )
    yield profile
    set_runner(None)


def test_a_running_daemon_follows_config_set_and_computer_configure(
    notify_profile, smtp_server, services_env, ssh_params, daemon, run_cli
):
    from veglia.orm.loading import load_node

    ok(
        run_cli(
            "-p", "test", "computer", "setup", "-n", "--label", "flaky", "--hostname",
            services_env["SSH_HOST"], "--transport", "core.ssh", "--scheduler", "core.direct",
            "--workdir", f"{services_env['SSH_USER_HOME']}/veglia-work", "--safe-interval", "0",
            "--minimum-poll-interval", "0.5",
        )
    )  # fmt: skip
    wrong = _closed_port()
    ok(
        run_cli(
            "-p", "test", "computer", "configure", "flaky", "-n", "--port", str(wrong),
            "--username", services_env["SSH_USER"], "--key-filename", services_env["SSH_KEY"],
            "--known-hosts", services_env["SSH_KNOWN_HOSTS"], "--no-look-for-keys",
            "--no-allow-agent", "--timeout", "5",
        )
    )  # fmt: skip
    daemon(1)

    # The e-mail address changes under the running daemon; its first notification uses it.
    changed = ok(run_cli("-p", "test", "config", "set", "notify.email", "new@example.org"))
    assert "The running daemon uses the new notify.email" in changed.output
    restart = ok(run_cli("-p", "test", "config", "set", "daemon.lease_timeout", "40"))
    assert "takes effect at `veglia daemon restart`" in restart.output
    time.sleep(1.5)  # the daemon looks at the configuration files twice a second
    pk = _submit_shell(run_cli, "-c", "flaky", "echo hello")
    node = load_node(pk)
    wait_for([node], lambda n: n.paused, timeout=90)
    deadline = time.monotonic() + 30
    while not smtp_server.messages:
        assert time.monotonic() < deadline, "no notification of the unreachable computer"
        time.sleep(0.2)
    recipients, message = smtp_server.messages[0]
    assert message["X-Veglia-Event"] == "computer_unreachable"
    assert recipients == ["new@example.org"]

    # The right port, then play: the job runs on the new settings, no daemon restart.
    ok(run_cli("-p", "test", "computer", "configure", "flaky", "-n", "--port", "2222"))
    ok(run_cli("-p", "test", "process", "play", "--all"))
    wait_for([node], lambda n: n.is_terminated, timeout=90)
    assert node.is_finished_ok, (node.process_state, node.exit_message)
    shown = ok(run_cli("-p", "test", "calcjob", "outputcat", str(pk), "stdout"))
    assert "hello" in shown.stdout


def test_tower_turned_on_under_a_running_daemon_reports_the_next_job(
    veglia_home, platform, daemon, run_cli
):
    from veglia.engine.runner import set_runner
    from veglia.orm.loading import load_node
    from veglia_fixtures.profiles import make_profile
    from veglia_fixtures.seqera_platform import TOKEN

    make_profile(
        **{
            "tower.enabled": "no",
            "tower.endpoint": platform.url,
            "tower.access_token": TOKEN,
            "tower.workspace_id": "42",
        }
    )
    try:
        daemon(1)
        ok(run_cli("-p", "test", "config", "set", "tower.enabled", "yes"))
        time.sleep(1.5)  # the daemon looks at the configuration files twice a second
        pk = _submit_shell(run_cli, "echo reported")
        wait_for([load_node(pk)], lambda n: n.is_terminated, timeout=60)
        deadline = time.monotonic() + 60
        while platform.tasks().get(pk, {}).get("status") != "COMPLETED":
            assert time.monotonic() < deadline, (platform.requests, platform.refusals)
            time.sleep(0.2)
    finally:
        set_runner(None)


# -- 2. submitting with the daemon stopped -----------------------------------------------
NO_DAEMON = "no daemon is running for profile 'test': start it with `veglia -p test daemon start`"


def _no_daemon_warnings(run_cli, pk: int) -> list[str]:
    """What a user sees of the missing daemon: submit, watch, list."""
    seen = []
    for args in (("process", "watch", str(pk), "--timeout", "1"), ("process", "list")):
        result = run_cli("-p", "test", *args)
        seen.append(result.output)
    return seen


@pytest.mark.parametrize("with_broker", [False, True], ids=["no-broker", "broker"])
def test_submitting_without_a_daemon_says_so(
    with_broker, request, veglia_home, run_cli, daemon, caplog, monkeypatch
):
    from veglia import engine, orm
    from veglia.engine import launch
    from veglia.engine.runner import set_runner
    from veglia.entry_points import CalculationFactory
    from veglia_fixtures.profiles import make_profile

    options = {"broker.url": request.getfixturevalue("rabbitmq_url")} if with_broker else {}
    make_profile(**options)
    try:
        submitted = ok(run_cli("-p", "test", "shell", "--submit", "echo hi"))
        assert "✔ Submitted process" in submitted.output
        assert f"Warning: {NO_DAEMON}" in submitted.output
        pk = int(SHELL_SUBMITTED.search(submitted.output).group(1))
        watched, listed = _no_daemon_warnings(run_cli, pk)
        assert NO_DAEMON in watched and "no daemon runs to take it up" in watched
        assert f"1 submitted process(es) wait, and {NO_DAEMON}" in listed
        # Counted from the rows when they hold every unfinished process (-a), asked for
        # when they may not (-l, -p): the same count either way.
        for args in (["-a"], ["-l", "5"], ["-p", "1"], ["-S", "waiting", "-S", "created"]):
            shown = ok(run_cli("-p", "test", "process", "list", *args)).output
            assert f"1 submitted process(es) wait, and {NO_DAEMON}" in shown, args

        # From Python too, once a minute at most.
        monkeypatch.setattr(launch, "_warned_at", float("-inf"))
        monkeypatch.setattr("veglia.engine.daemon.presence._answers", {})
        with caplog.at_level("WARNING", logger="veglia.engine"):
            node = engine.submit(CalculationFactory("core.shell"), command=orm.Str("echo py"))
            engine.submit(CalculationFactory("core.shell"), command=orm.Str("echo py"))
        warnings = [r.getMessage() for r in caplog.records if "no daemon" in r.getMessage()]
        assert warnings == [f"{NO_DAEMON}; the process waits until it runs"]

        # With the daemon running, not a word of it; the processes run.
        daemon(1)
        monkeypatch.setattr(launch, "_warned_at", float("-inf"))
        monkeypatch.setattr("veglia.engine.daemon.presence._answers", {})
        from veglia.orm.loading import load_node

        wait_for([load_node(pk), node], lambda n: n.is_finished_ok, timeout=60)
        if with_broker:  # seen from another host too: its workers consume the task queue
            from veglia.engine.daemon.presence import _task_consumers
            from veglia.manage import get_profile

            assert _task_consumers(get_profile()) == 1
        again = ok(run_cli("-p", "test", "shell", "--submit", "echo hi"))
        assert "no daemon" not in again.output
        assert "no daemon" not in ok(run_cli("-p", "test", "process", "list")).output
        caplog.clear()
        with caplog.at_level("WARNING", logger="veglia.engine"):
            engine.submit(CalculationFactory("core.shell"), command=orm.Str("echo py"))
        assert not [r for r in caplog.records if "no daemon" in r.getMessage()]
    finally:
        set_runner(None)


# -- 3. an unconfigured computer ---------------------------------------------------------
def test_an_unconfigured_computer_is_refused_at_submission(profile, run_cli, services_env):
    from veglia.orm.queries import list_processes

    ok(
        run_cli(
            "-p", "test", "computer", "setup", "-n", "--label", "x", "--hostname",
            services_env["SSH_HOST"], "--transport", "core.ssh", "--scheduler", "core.direct",
        )
    )  # fmt: skip
    refused = run_cli("-p", "test", "shell", "--submit", "-c", "x", "echo hi")
    assert refused.exit_code != 0
    assert "Computer 'x' is not configured" in refused.output
    assert "`veglia computer configure x`" in refused.output
    assert "Submitted" not in refused.output and not list_processes()  # nothing stored
    foreground = run_cli("-p", "test", "shell", "-c", "x", "echo hi")
    assert "`veglia computer configure x`" in foreground.output and not list_processes()


def test_a_local_computer_needs_no_configure(profile, run_cli, tmp_path):
    set_up = ok(
        run_cli(
            "-p", "test", "computer", "setup", "-n", "--label", "here", "--hostname",
            "localhost", "--transport", "core.local", "--scheduler", "core.direct",
            "--workdir", str(tmp_path / "work"), "--safe-interval", "0",
        )
    )  # fmt: skip
    assert "Next: `veglia computer test here`" in set_up.output
    listed = ok(run_cli("-p", "test", "computer", "list", "--raw")).stdout
    assert "here\tlocalhost\tcore.local\tcore.direct\tyes" in listed
    ran = ok(run_cli("-p", "test", "shell", "-c", "here", "echo local"))
    assert "local" in ran.stdout

    # One stored before this rule (no authinfo) is configured when first used.
    from veglia import orm
    from veglia.orm.computers import load_computer

    orm.Computer(
        label="older",
        hostname="localhost",
        transport_type="core.local",
        scheduler_type="core.direct",
        properties={"workdir": str(tmp_path / "older"), "safe_interval": 0.0},
    ).store()
    from veglia.manage import get_storage
    from veglia.storage.models import AuthInfo

    with get_storage().session() as session:
        session.query(AuthInfo).filter(AuthInfo.computer_id == load_computer("older").pk).delete()
    assert not load_computer("older").is_configured()
    ran = ok(run_cli("-p", "test", "shell", "-c", "older", "echo older"))
    assert "older" in ran.stdout and load_computer("older").is_configured()


# -- 4. a monitor kwarg of the wrong type; a monitor that faults at every fast poll -------
@pytest.fixture
def helper_monitors(profile, monkeypatch):
    """Monitors by import path allowed, with tests/monitor_helpers importable."""
    from pathlib import Path

    from veglia.config import Config

    Config().set_option("test", "monitors.allow_import_path", "yes")
    profile.options["monitors.allow_import_path"] = True
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


def test_a_monitor_kwarg_of_the_wrong_type_is_refused_in_the_builder(profile):
    from veglia import engine, orm
    from veglia.engine import InputValidationError
    from veglia.entry_points import CalculationFactory
    from veglia.orm.queries import list_processes

    ShellJob = CalculationFactory("core.shell")
    stall = {"entry_point": "core.stalled_output", "kwargs": {"path": "out.log", "seconds": "ten"}}
    expected = (
        "Monitor 'stall' (core.stalled_output): kwarg 'seconds' must be float, not str ('ten')"
    )
    builder = ShellJob.get_builder()
    with pytest.raises(InputValidationError, match=re.escape(expected)):
        builder.monitors = {"stall": stall}
    with pytest.raises(ValueError, match=re.escape(expected)):
        engine.submit(ShellJob, command=orm.Str("sleep 1"), monitors={"stall": stall})
    assert not list_processes()
    # The right types pass, an int for a float too; an optional one may be None.
    builder.monitors = {"stall": {**stall, "kwargs": {"path": "out.log", "seconds": 10}}}
    builder.monitors = {"guard": {"entry_point": "core.walltime_guard", "kwargs": {"fraction": 1}}}


def _job_with_a_raising_monitor(seconds: int):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    return engine.run_get_node(
        CalculationFactory("core.shell"),
        command=orm.Str(f"sleep {seconds}; echo fine"),
        monitors={"raises": {"entry_point": "monitor_helpers:raising"}},
    )[1]


def test_monitor_faults_count_over_time_and_process_show_names_them(
    helper_monitors, run_cli, monkeypatch
):
    from veglia.engine.calcjob import monitor_runner

    # Faulting at every poll (a tenth of a second here) for two seconds, under the default
    # window: not disabled, and `process show` says it keeps failing.
    node = _job_with_a_raising_monitor(2)
    state = node.get_attribute("monitor_state")["raises"]
    assert node.is_finished_ok and not state["disabled"] and state["failures"] > 3
    shown = ok(run_cli("-p", "test", "process", "show", str(node.pk))).stdout
    assert "monitor raises failing:" in shown
    assert "the last: raised RuntimeError: monitor bug" in shown

    # Faults spanning the window: disabled, and `process show` says so and why.
    monkeypatch.setattr(monitor_runner, "FAULT_WINDOW", 1.0)
    node = _job_with_a_raising_monitor(3)
    state = node.get_attribute("monitor_state")["raises"]
    assert node.is_finished_ok and state["disabled"]
    assert state["failures"] > 3  # max_failures (3) came long before the window was spanned
    shown = ok(run_cli("-p", "test", "process", "show", str(node.pk))).stdout
    assert re.search(
        r"monitor raises disabled: \d+ failures in a row over 1 s: raised RuntimeError", shown
    ), shown


# -- 5. a monitor stop that keeps the parser's exit code ------------------------------------
def test_a_job_a_monitor_stopped_says_so_even_with_exit_code_0(helper_monitors, run_cli):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    _, node = engine.run_get_node(
        CalculationFactory("core.shell"),
        command=orm.Str("echo out; sleep 30"),
        monitors={"keep": {"entry_point": "monitor_helpers:stop_and_keep"}},
    )
    assert node.exit_status == 0  # the parser's verdict, kept, but the command was killed
    state = "✔ Finished [0] (stopped by monitor keep)"
    listed = ok(run_cli("-p", "test", "process", "list", "-a", "--raw")).stdout
    assert f"{node.pk}\t" in listed and state in listed
    shown = ok(run_cli("-p", "test", "process", "show", str(node.pk))).stdout
    assert state in shown and "stop but keep" in shown
    assert state in ok(run_cli("-p", "test", "node", "show", str(node.pk))).stdout


# -- 6. computers cannot be changed: tests/test_computer_changes.py ------------------------------


# -- 7. a half-made profile --------------------------------------------------------------
class _Forwarder:
    """Listens on a port and passes each connection on to ``target``: the database server
    "started" on the port that setup could not reach."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:  # closed
                return
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()


def test_a_setup_that_cannot_reach_its_database_leaves_nothing_and_runs_again(
    postgres_database, run_cli, veglia_home
):
    from urllib.parse import urlsplit

    from veglia.config import Config

    real = urlsplit(postgres_database)
    port = _closed_port()
    url = real._replace(netloc=f"{real.username}@127.0.0.1:{port}").geturl()
    command = ("setup", "-n", "--profile-name", "pg", "--storage-url", url)

    failed = run_cli(*command)
    assert failed.exit_code == 4, failed.output
    message = " ".join(failed.output.split())
    assert f"Cannot reach the database at {url}" in message
    assert "Profile 'pg' was not saved: fix this, then run the same command again." in message
    config = Config()
    assert config.profile_names == [] and config.default_profile is None
    assert not config.profile_folder("pg").exists()
    listed = run_cli("profile", "list")
    assert "pg" not in listed.output
    # Asked one by one, the answers come back as the command that gives them again.
    asked = run_cli("setup", "--profile-name", "pg", "--storage-url", url, input="\n" * 40)
    assert asked.exit_code == 4 and Config().profile_names == []
    assert f"veglia setup -n --profile-name pg --storage-url {url}\n" in asked.output

    # The database answers on that port now: the very same command works.
    forwarder = _Forwarder(port, (real.hostname, real.port or 5432))
    try:
        again = ok(run_cli(*command))
        assert "Profile 'pg' is ready" in again.output
        assert "exists already" not in again.output
        assert ok(run_cli("-p", "pg", "computer", "list", "--raw")).stdout.startswith(
            "1\tlocalhost"
        )
    finally:
        forwarder.close()
