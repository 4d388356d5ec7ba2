"""Issue 15's trap 6: a computer can be changed, relabelled, duplicated and deleted, and the
hint of `veglia computer test` names a command that works. Through the CLI, as a user."""

from __future__ import annotations

import re
import shlex
import time

import pytest
from click.shell_completion import ShellComplete

from veglia_fixtures.profiles import wait_for

SUBMITTED = re.compile(r"Submitted process (\d+)")


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def _cli(run_cli, *args: str, input: str | None = None):
    return run_cli("-p", "test", *args, input=input)


def _submit(run_cli, *args: str) -> int:
    result = ok(_cli(run_cli, "shell", "--submit", *args))
    return int(SUBMITTED.search(result.output).group(1))


def _setup_local(run_cli, label: str, *flags: str) -> None:
    ok(
        _cli(
            run_cli, "computer", "setup", "-n", "-L", label, "-H", "localhost",
            "-T", "core.local", "-S", "core.direct", *flags,
        )
    )  # fmt: skip


def test_the_hint_of_computer_test_is_a_command_that_works(profile, run_cli):
    # The trap: the hint said `computer setup -w`, which is refused because the label exists.
    _setup_local(run_cli, "scratchy", "-w", "/proc/veglia-work")
    failed = _cli(run_cli, "computer", "test", "scratchy")
    assert failed.exit_code == 1, failed.output
    hint = re.search(r"hint: .*`(veglia computer [^`]+)`", failed.output).group(1)
    assert hint == "veglia computer set scratchy -w '{home}/veglia-work'"
    refused = _cli(run_cli, "computer", "setup", "-n", "-L", "scratchy", "-H", "x", "-T",
                   "core.local", "-S", "core.direct")  # fmt: skip
    assert "exists already; pick another, or change that one with `veglia computer set " \
        "scratchy`" in refused.output  # fmt: skip

    ok(_cli(run_cli, *shlex.split(hint)[1:]))
    passed = ok(_cli(run_cli, "computer", "test", "scratchy"))
    assert "Computer 'scratchy' is ready for jobs." in passed.output
    shown = ok(_cli(run_cli, "computer", "show", "scratchy")).stdout
    assert re.search(r"workdir\s+\{home\}/veglia-work\s", shown)


def test_set_changes_what_is_given_and_a_running_daemon_uses_it(profile, daemon, run_cli):
    from veglia.orm.loading import load_node

    daemon(1)
    first = _submit(run_cli, "echo greeting=$GREETING")
    wait_for([load_node(first)], lambda n: n.is_terminated, timeout=60)
    # The worker has used localhost; its settings change under it.
    changed = ok(
        _cli(
            run_cli, "computer", "set", "localhost", "--prepend-text", "export GREETING=changed",
            "-D", "edited", "--minimum-poll-interval", "0.2",
        )
    )  # fmt: skip
    assert "prepend_text: '' -> 'export GREETING=changed'" in changed.output
    assert "description: 'This machine, through the local transport' -> 'edited'" in (
        changed.output
    )
    time.sleep(1.5)  # a worker takes a computer's settings as current for a second
    second = _submit(run_cli, "echo greeting=$GREETING")
    wait_for([load_node(second)], lambda n: n.is_terminated, timeout=60)
    outputs = [
        ok(_cli(run_cli, "calcjob", "outputcat", str(pk), "stdout")).stdout.strip()
        for pk in (first, second)
    ]
    assert outputs == ["greeting=", "greeting=changed"]

    shown = ok(_cli(run_cli, "computer", "show", "localhost")).stdout
    assert re.search(r"description\s+edited", shown)
    reset = ok(_cli(run_cli, "computer", "set", "localhost", "--reset", "prepend_text"))
    assert "prepend_text: 'export GREETING=changed' -> default ''" in reset.output
    bad = _cli(run_cli, "computer", "set", "localhost", "--mpirun-command", "mpirun {x}")
    assert bad.exit_code == 3 and "may only use the placeholder" in bad.output
    unknown = _cli(run_cli, "computer", "set", "localhost", "--reset", "colour")
    assert unknown.exit_code == 3 and "--reset colour: not a property" in unknown.output
    nothing = _cli(run_cli, "computer", "set", "localhost")
    assert nothing.exit_code == 0 and "Nothing changed on 'localhost'" in nothing.output


def test_a_new_transport_drops_the_connection_options(profile, run_cli, services_env):
    _setup_local(run_cli, "remote-later")
    listed = ok(_cli(run_cli, "computer", "list", "--raw")).stdout
    assert re.search(r"remote-later\s.*\syes", listed)
    moved = ok(_cli(run_cli, "computer", "set", "remote-later", "-T", "core.ssh", "-H",
                    services_env["SSH_HOST"]))  # fmt: skip
    assert "Next: `veglia computer configure remote-later`" in moved.output
    listed = ok(_cli(run_cli, "computer", "list", "--raw")).stdout
    assert re.search(r"remote-later\s.*core\.ssh\s.*\sno", listed)
    wrong = _cli(run_cli, "computer", "set", "remote-later", "-T", "core.nope")
    assert wrong.exit_code == 3 and "'core.nope' is not an installed transport" in wrong.output


def test_what_active_jobs_depend_on_cannot_change_under_them(profile, run_cli):
    pk = _submit(run_cli, "echo waiting")  # no daemon: it stays created, active
    refusals = {
        "relabel": ("computer", "relabel", "localhost", "here"),
        "delete": ("computer", "delete", "localhost", "-f"),
        "change the transport or scheduler of": (
            "computer", "set", "localhost", "-S", "core.slurm",
        ),
    }  # fmt: skip
    for doing, args in refusals.items():
        refused = _cli(run_cli, *args)
        assert refused.exit_code == 1, refused.output
        assert (
            f"Refusing to {doing} computer 'localhost': process {pk} (core.shell, created) "
            f"uses it and has not ended. Wait until it ends (`veglia process list`), or kill "
            f"it (`veglia process kill {pk}`), then run this again."
        ) in " ".join(refused.output.split())
    assert ok(_cli(run_cli, "computer", "show", "localhost"))
    # What a job reads at its next step is allowed; it says the active job will use it.
    moved = ok(_cli(run_cli, "computer", "set", "localhost", "--append-text", "echo done"))
    assert "1 active job(s) on it use the new settings from their next step" in moved.output

    ok(_cli(run_cli, "process", "kill", str(pk)))
    ok(_cli(run_cli, "computer", "relabel", "localhost", "here"))
    assert ok(_cli(run_cli, "computer", "list", "--raw")).stdout.split()[1] == "here"


def test_relabel_and_duplicate(profile, run_cli, services_env, ssh_params):
    ok(
        _cli(
            run_cli, "computer", "setup", "-n", "-L", "cluster", "-H", services_env["SSH_HOST"],
            "-T", "core.ssh", "-S", "core.direct", "--queues", "short:time=1h", "-w",
            f"{services_env['SSH_USER_HOME']}/veglia-work",
        )
    )  # fmt: skip
    ok(
        _cli(
            run_cli, "computer", "configure", "cluster", "-n", "--port",
            services_env["SSH_PORT"], "--username", services_env["SSH_USER"],
            "--key-filename", services_env["SSH_KEY"], "--known-hosts",
            services_env["SSH_KNOWN_HOSTS"], "--no-look-for-keys", "--no-allow-agent",
        )
    )  # fmt: skip
    ok(_cli(run_cli, "code", "create", "-L", "echo", "-Y", "cluster", "-X", "/bin/echo"))

    relabelled = ok(_cli(run_cli, "computer", "relabel", "cluster", "hpc"))
    assert "Computer 'cluster' is now 'hpc'; its codes are now CODE@hpc." in relabelled.output
    assert "echo@hpc" in ok(_cli(run_cli, "code", "list")).stdout
    taken = _cli(run_cli, "computer", "relabel", "hpc", "localhost")
    assert taken.exit_code == 3 and "A computer labelled 'localhost' exists already" in (
        taken.output
    )
    assert _cli(run_cli, "computer", "show", "cluster").exit_code == 4

    # The copy keeps the setup and the connection options; flags change what they name.
    made = ok(_cli(run_cli, "computer", "duplicate", "hpc", "hpc-long", "--queues",
                   "long:time=2d"))  # fmt: skip
    assert "Next: `veglia computer test hpc-long`" in made.output
    shown = ok(_cli(run_cli, "computer", "show", "hpc-long")).stdout
    assert re.search(r"queues\s+long:time=172800s", shown)
    assert re.search(rf"workdir\s+{services_env['SSH_USER_HOME']}/veglia-work", shown)
    assert re.search(rf"username\s+{services_env['SSH_USER']}\s", shown)
    assert "is ready for jobs" in ok(_cli(run_cli, "computer", "test", "hpc-long")).output
    assert "echo@hpc-long" not in ok(_cli(run_cli, "code", "list")).stdout
    bare = ok(_cli(run_cli, "computer", "duplicate", "hpc", "hpc-bare",
                   "--no-copy-configuration"))  # fmt: skip
    assert "Next: `veglia computer configure hpc-bare`" in bare.output


def test_delete_shows_the_codes_and_nodes_then_deletes_them(profile, run_cli):
    from veglia.orm.loading import load_node

    _setup_local(run_cli, "old-box")
    ok(_cli(run_cli, "code", "create", "-L", "echo", "-Y", "old-box", "-X", "/bin/echo"))
    ran = ok(_cli(run_cli, "shell", "-c", "old-box", "echo bye"))
    pk = int(re.search(r"Process (\d+) finished", ran.output).group(1))
    kept = _submit(run_cli, "-c", "localhost", "echo stays")

    dry = ok(_cli(run_cli, "computer", "delete", "old-box", "--dry-run"))
    assert "its 1 code and the nodes below" in dry.stdout and "echo@old-box" in dry.stdout
    assert re.search(rf"^{pk}\s+CalcJobNode", dry.stdout, re.M)
    assert "Dry run: nothing was deleted." in dry.stdout
    declined = _cli(run_cli, "computer", "delete", "old-box", input="n\n")
    assert declined.exit_code == 1
    assert ok(_cli(run_cli, "computer", "show", "old-box"))

    done = ok(_cli(run_cli, "computer", "delete", "old-box", input="y\n"))
    assert "Deleted computer 'old-box', 1 code, " in done.output
    assert _cli(run_cli, "computer", "show", "old-box").exit_code == 4
    assert "echo@old-box" not in ok(_cli(run_cli, "code", "list")).stdout
    assert _cli(run_cli, "node", "show", str(pk)).exit_code == 4
    assert load_node(kept).process_state == "created"  # another computer's job stays


@pytest.mark.parametrize("command", ["set", "relabel", "duplicate", "delete"])
def test_the_new_commands_complete_computer_labels(profile, command):
    from veglia.cli.main import cli

    complete = ShellComplete(cli, {}, "veglia", "_VEGLIA_COMPLETE")
    offered = complete.get_completions(["computer", command], "lo")
    assert [(item.value, item.help) for item in offered] == [("localhost", "localhost")]
