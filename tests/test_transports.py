"""One contract for every transport: core.local on this machine, core.ssh on the loopback sshd."""

from __future__ import annotations

import posixpath
import shlex
import shutil
import subprocess
import uuid

import pytest

from veglia.exceptions import (
    HostKeyError,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
)
from veglia.plugins.transports.local import LocalTransport
from veglia.plugins.transports.ssh import SshTransport
from veglia_fixtures.services import service_missing


@pytest.fixture(params=["core.local", "core.ssh"])
def transport(request, tmp_path):
    """An open transport and a fresh remote folder as its cwd."""
    if request.param == "core.local":
        with LocalTransport() as local:
            local.cwd = str(tmp_path / "remote")
            local.makedirs(local.cwd)
            yield local
        return
    ssh = request.getfixturevalue("ssh_transport")
    home = request.getfixturevalue("services_env")["SSH_USER_HOME"]
    ssh.cwd = posixpath.join(home, f"veglia-test-{uuid.uuid4().hex[:8]}")
    ssh.makedirs(ssh.cwd)
    yield ssh
    ssh.rmtree(ssh.cwd)


def test_files_round_trip(transport, tmp_path):
    local = tmp_path / "in.txt"
    local.write_bytes(b"line 1\nline 2\n")
    transport.putfile(local, "in.txt")
    assert transport.isfile("in.txt") and not transport.isdir("in.txt")
    assert transport.stat("in.txt").size == 14
    assert transport.read_bytes("in.txt") == b"line 1\nline 2\n"
    assert transport.read_bytes("in.txt", offset=7) == b"line 2\n"
    assert transport.read_bytes("in.txt", offset=7, size=4) == b"line"
    transport.getfile("in.txt", tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_bytes() == local.read_bytes()
    transport.write_bytes("out.txt", b"x")
    assert transport.listdir(".") == ["in.txt", "out.txt"]
    transport.remove("out.txt")
    assert not transport.exists("out.txt")


def test_trees_round_trip(transport, tmp_path):
    tree = tmp_path / "tree"
    (tree / "sub" / "deeper").mkdir(parents=True)
    (tree / "a.txt").write_text("a")
    (tree / "sub" / "deeper" / "b.txt").write_text("b")
    transport.put(tree, "copy")
    assert transport.isdir("copy/sub/deeper")
    transport.get("copy", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "deeper" / "b.txt").read_text() == "b"
    transport.rmtree("copy")
    assert not transport.exists("copy")
    transport.rmtree("copy")  # gone already: no error


def test_symlink_is_made_but_never_read_through(transport, tmp_path):
    transport.write_bytes("target.txt", b"t")
    transport.symlink("target.txt", "link.txt")
    assert transport.lstat("link.txt").is_symlink and transport.stat("link.txt").is_file
    # A job's folder is not trusted: a link there may lead anywhere (or to /dev/zero).
    with pytest.raises(TransportError, match="not a regular file"):
        transport.read_bytes("link.txt")
    with pytest.raises(TransportError, match="not a regular file"):
        transport.getfile("link.txt", tmp_path / "copy")


def test_commands(transport):
    code, out, err = transport.exec_command("pwd; echo oops >&2; exit 3", workdir=transport.cwd)
    assert (code, out.strip(), err.strip()) == (3, transport.cwd, "oops")
    code, out, _ = transport.exec_command("cat", stdin=b"from stdin")
    assert (code, out) == (0, "from stdin")
    code, out, _ = transport.exec_command("echo \"$((6 * 7))\" 'it''s'")
    assert out.strip() == "42 its"
    assert transport.whoami()


def test_command_timeout(transport):
    with pytest.raises(TransportTimeoutError, match="timeout of 1"):
        transport.exec_command("sleep 30", timeout=1)
    assert transport.exec_command("true")[0] == 0  # still usable afterwards


def test_missing_paths_raise_transport_errors(transport, tmp_path):
    with pytest.raises(TransportError, match="missing.txt"):
        transport.getfile("missing.txt", tmp_path / "x")
    with pytest.raises(TransportError):
        transport.stat("missing.txt")
    with pytest.raises(TransportError):
        transport.listdir("missing")
    assert not (tmp_path / "x").exists()


def test_unknown_parameters_are_refused():
    with pytest.raises(TransportError, match="does not accept colour"):
        SshTransport("localhost", colour="red")


def test_ssh_refuses_an_unknown_host_key(services_env, ssh_params, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/known_hosts
    params = {**ssh_params, "known_hosts": None}
    with pytest.raises(HostKeyError, match=r"ssh-keyscan -p 2222 127\.0\.0\.1"):
        SshTransport(services_env["SSH_HOST"], **params).open()


def test_ssh_refuses_a_changed_host_key(services_env, ssh_params, tmp_path):
    forged = tmp_path / "known_hosts"
    import paramiko

    key = paramiko.Ed25519Key.from_private_key_file(services_env["SSH_KEY"])
    forged.write_text(f"[127.0.0.1]:{ssh_params['port']} ssh-ed25519 {key.get_base64()}\n")
    with pytest.raises(HostKeyError, match="has changed"):
        SshTransport(services_env["SSH_HOST"], **{**ssh_params, "known_hosts": str(forged)}).open()


def test_ssh_wrong_port_is_a_connection_error(services_env, ssh_params):
    with pytest.raises(TransportConnectionError, match="Cannot connect") as caught:
        SshTransport(services_env["SSH_HOST"], **{**ssh_params, "port": 1}).open()
    assert "Errno None" not in str(caught.value)  # paramiko's error has no errno
    assert "Unable to connect to port 1" in str(caught.value)


def test_ssh_through_a_jump_host(services_env, ssh_params):
    jump = f"{services_env['SSH_USER']}@{services_env['SSH_HOST']}:{ssh_params['port']}"
    with SshTransport(services_env["SSH_HOST"], **ssh_params, proxy_jump=jump) as transport:
        assert transport.whoami() == services_env["SSH_USER"]


def test_ssh_closed_connection_is_reported(ssh_transport):
    ssh_transport.close()
    with pytest.raises(TransportConnectionError, match="not open"):
        ssh_transport.exec_command("true")
    ssh_transport.open()
    assert ssh_transport.exec_command("true")[0] == 0


# -- gotocomputer: the ssh command line reaches the host as the transport does -------------------
def _gotocomputer(transport: SshTransport, workdir: str, commands: str):
    """Run `veglia calcjob gotocomputer`'s command with ``commands`` on its stdin: the shell
    it opens reads them instead of a terminal."""
    if shutil.which("ssh") is None:
        service_missing("the OpenSSH client `ssh` is not installed")
    command = transport.gotocomputer_command(workdir)
    return subprocess.run(
        ["bash", "-c", command], input=commands, capture_output=True, text=True, timeout=60
    )


def test_gotocomputer_uses_the_known_hosts_and_the_jump_host(services_env, ssh_params, tmp_path):
    host, user, home = (
        services_env["SSH_HOST"],
        services_env["SSH_USER"],
        services_env["SSH_USER_HOME"],
    )
    known = services_env["SSH_KNOWN_HOSTS"]
    transport = SshTransport(host, **ssh_params)
    args = shlex.split(transport.gotocomputer_command(home))
    assert args[:4] == ["ssh", "-t", "-p", str(ssh_params["port"])]
    for option in (
        f"UserKnownHostsFile=~/.ssh/known_hosts {known}",
        "StrictHostKeyChecking=yes",
        "IdentityAgent=none",
        "ConnectTimeout=10",
    ):
        assert args[args.index(option) - 1] == "-o"
    assert args[-3:] == ["--", f"{user}@{host}", f"cd {home} && exec bash -l"]
    shell = _gotocomputer(transport, home, "pwd; whoami\n")
    assert shell.stdout.split() == [home, user], shell.stderr

    # Through a jump host: ssh's -J would reach it without the key and the known_hosts.
    jump = f"{user}@{host}:{ssh_params['port']}"
    jumped = SshTransport(host, **ssh_params, proxy_jump=jump)
    args = shlex.split(jumped.gotocomputer_command(home))
    assert "-J" not in args
    proxy = shlex.split(next(a for a in args if a.startswith("ProxyCommand=")).split("=", 1)[1])
    assert proxy[:3] == ["ssh", "-p", str(ssh_params["port"])]
    assert f"UserKnownHostsFile=~/.ssh/known_hosts {known}" in proxy
    assert proxy[-4:] == ["-W", "%h:%p", "--", f"{user}@{host}"]
    shell = _gotocomputer(jumped, home, "pwd; whoami\n")
    assert shell.stdout.split() == [home, user], shell.stderr

    # A known_hosts holding another key for the host: refused, as the transport refuses it.
    import paramiko

    other = paramiko.Ed25519Key.from_private_key_file(services_env["SSH_KEY"])
    forged = tmp_path / "known_hosts"
    forged.write_text(f"[{host}]:{ssh_params['port']} ssh-ed25519 {other.get_base64()}\n")
    refused = _gotocomputer(
        SshTransport(host, **{**ssh_params, "known_hosts": str(forged)}), home, "whoami\n"
    )
    assert refused.returncode != 0 and user not in refused.stdout
    assert "Host key verification failed" in refused.stderr


def test_gotocomputer_without_host_key_checking_says_so_to_ssh():
    transport = SshTransport("cluster", port=22, host_key_checking=False, keepalive_interval=0)
    args = shlex.split(transport.gotocomputer_command("/w"))
    assert "StrictHostKeyChecking=no" in args
    assert not any(a.startswith(("UserKnownHostsFile", "ServerAliveInterval")) for a in args)
