"""The ``python3`` programs veglia runs on a computer (``veglia.python_program``), as the two
that use one see them: the monitors' batched reads and the file data sources. A computer
without ``python3``, or whose shell prints a greeting, is this machine with its commands run
in another environment (bash reads ``BASH_ENV`` first, as a login script would be)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from veglia import DataSourceFactory
from veglia.exceptions import DataSourceError, TransportError
from veglia.file_reads import python_command, read_requests
from veglia.plugins.transports.local import LocalTransport
from veglia.transports import Transport


class Computer(LocalTransport):
    """This machine, read as a remote one (through commands), its commands run with ``env``."""

    read_files = Transport.read_files

    def __init__(self, **env: str) -> None:
        super().__init__()
        self.env = {**os.environ, **env}
        self.commands: list[str] = []

    def exec_command(self, command, *, workdir=None, stdin=None, timeout=None):
        self.commands.append(command)
        return self._run_bash(command, cwd=workdir, stdin=stdin, timeout=timeout, env=self.env)


@pytest.fixture
def no_python(tmp_path: Path) -> Computer:
    (tmp_path / "empty-bin").mkdir()
    return Computer(PATH=str(tmp_path / "empty-bin"))


@pytest.fixture
def greeting(tmp_path: Path) -> Computer:
    # Unset: the commands it runs (a python3 that is a shell script) would greet again.
    (tmp_path / "bashrc").write_text("echo 'Welcome to the cluster'\nunset BASH_ENV\n")
    return Computer(BASH_ENV=str(tmp_path / "bashrc"))


def test_monitors_read_file_by_file_where_there_is_no_python(no_python, tmp_path):
    (tmp_path / "out.log").write_bytes(b"abc")
    payload = {"requests": [{"path": str(tmp_path / "out.log"), "mode": "new"}]}
    for _ in range(2):
        answer = no_python.read_files(payload)
        assert answer[0][0][5:] == read_requests(payload)[0][0][5:] == [0, "YWJj"]
    assert no_python.commands == [python_command()]  # asked once, then per file


@pytest.mark.parametrize(
    ("computer", "error", "message"),
    [
        (
            "no_python",
            DataSourceError,
            "python3 is not found on localhost, and the file data sources run it "
            "there to list and hash files: install python3 (3.6 or later) on that computer.",
        ),
        (
            "greeting",
            TransportError,
            "The data source's list command on localhost gave output that is not the expected "
            "JSON (does a login script print to stdout?): 'Welcome to the cluster\\n{",
        ),
    ],
)
def test_a_data_source_says_what_is_wrong_with_the_computer(
    computer, error, message, request, tmp_path
):
    source = DataSourceFactory("core.folder")({"path": str(tmp_path)})
    with pytest.raises(error) as raised:
        source.elements(request.getfixturevalue(computer))
    assert str(raised.value).startswith(message)


def test_monitors_name_a_greeting_on_stdout_as_the_likely_cause(greeting, tmp_path):
    (tmp_path / "out.log").write_bytes(b"abc")
    payload = {"requests": [{"path": str(tmp_path / "out.log")}]}
    with pytest.raises(TransportError) as raised:
        greeting.read_files(payload)
    assert str(raised.value).startswith(
        "Reading the watched files on localhost gave output that is not the expected JSON "
        "(does a login script print to stdout?): 'Welcome to the cluster\\n["
    )
