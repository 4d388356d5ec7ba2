"""The transport contract: structure from the class, behaviour where it can be opened."""

from __future__ import annotations

import inspect
import posixpath
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from veglia.exceptions import TransportError, TransportTimeoutError
from veglia.testing.contracts._select import select
from veglia.testing.transport import FakeTransport
from veglia.transports import AuthOption, FileStat, Transport


def _returning(cls: type[Transport]) -> Callable[[], type[Transport]]:
    return lambda: cls


class TransportContract:
    """What the engine relies on from a ``veglia.transports`` entry point.

    Every named class must be a complete, documented :class:`~veglia.transports.Transport`
    subclass that declares its connection parameters and refuses others. Then, on a
    transport :meth:`open_transport` opens, the files, trees, links, commands, timeouts
    and errors behave as ``core.local`` and ``core.ssh`` do. Subclass it in a test module::

        class TestMyTransport(TransportContract):
            entry_points = "mylab.*"

            def open_transport(self, cls, folder, request):
                with cls("testhost", username="ci") as transport:
                    transport.cwd = f"/tmp/contract-{folder.parent.name}"
                    transport.makedirs(transport.cwd)
                    yield transport
                    transport.rmtree(transport.cwd)
    """

    #: A name or fnmatch pattern of the ``veglia.transports`` entry points to check, or a
    #: tuple of them.
    entry_points: ClassVar[str | Sequence[str]] = ()
    #: Transport classes that are no entry point, by a name for the test ids.
    others: ClassVar[Mapping[str, type[Transport]]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "transport_class" not in metafunc.fixturenames:
            return
        owner = type(self).__name__
        found: dict[str, Callable[[], Any]] = {
            ep.name: ep.load for ep in select("veglia.transports", self.entry_points, owner)
        }
        found.update((name, _returning(cls)) for name, cls in self.others.items())
        if not found:
            pytest.fail(f"{owner}: set entry_points to the transports to check", pytrace=False)
        metafunc.parametrize(
            "transport_class", list(found.values()), ids=list(found), indirect=True
        )

    @pytest.fixture
    def transport_class(self, request: pytest.FixtureRequest) -> type[Transport]:
        made: type[Transport] = request.param()
        return made

    def open_transport(
        self, cls: type[Transport], folder: Path, request: pytest.FixtureRequest
    ) -> Iterator[Transport]:
        """Yield an open ``cls`` whose cwd is an empty folder, then clean up (a generator).

        ``folder`` is an empty local folder of the test's own; ``request`` gives other
        fixtures (``request.getfixturevalue``). This default opens ``FakeTransport`` in
        ``folder`` and skips every other class: override it to open yours.
        """
        if not issubclass(cls, FakeTransport):
            pytest.skip(
                f"{type(self).__name__} cannot open {cls.__qualname__} here: override "
                "open_transport(cls, folder, request) to open it on a test host"
            )
        with cls(root=str(folder / "fake")) as fake:
            fake.cwd = str(fake.root / "remote")
            fake.makedirs(fake.cwd)
            yield fake

    @pytest.fixture
    def transport(
        self, transport_class: type[Transport], tmp_path: Path, request: pytest.FixtureRequest
    ) -> Iterator[Transport]:
        folder = tmp_path / "transport"
        folder.mkdir()
        yield from self.open_transport(transport_class, folder, request)

    @pytest.fixture
    def local(self, tmp_path: Path) -> Path:
        """A folder on this machine, the other side of copies."""
        folder = tmp_path / "local"
        folder.mkdir()
        return folder

    # -- structure ---------------------------------------------------------------------
    def test_a_transport_is_a_complete_documented_transport_subclass(
        self, transport_class: type[Transport]
    ) -> None:
        cls = transport_class
        assert inspect.isclass(cls) and issubclass(cls, Transport), (
            f"{cls!r} is no subclass of veglia.transports.Transport"
        )
        assert not inspect.isabstract(cls), f"unimplemented: {sorted(cls.__abstractmethods__)}"
        assert inspect.getdoc(cls) != inspect.getdoc(Transport), "document the transport class"
        for method in sorted(Transport.__abstractmethods__):
            base = inspect.getattr_static(Transport, method)
            if isinstance(base, property):
                assert isinstance(inspect.getattr_static(cls, method), property), method
                continue
            wanted = inspect.signature(base).parameters
            missing = set(wanted) - set(inspect.signature(getattr(cls, method)).parameters)
            assert not missing, f"{cls.__name__}.{method} does not take {sorted(missing)}"

    def test_connection_parameters_are_declared_and_others_refused(
        self, transport_class: type[Transport]
    ) -> None:
        cls = transport_class
        options = cls.auth_options
        assert all(isinstance(option, AuthOption) for option in options)
        names = [option.name for option in options]
        assert len(names) == len(set(names)), f"{cls.__name__} declares a parameter twice"
        for option in options:
            assert option.description, f"{cls.__name__}: describe {option.name}"
        transport = cls("localhost")  # made without connecting
        assert not transport.is_open
        transport.close()  # harmless on a transport never opened
        with pytest.raises(TransportError, match="does not accept no_such_option"):
            cls("localhost", no_such_option=1)

    # -- behaviour: where open_transport can open it -----------------------------------
    @staticmethod
    def _fifo(transport: Transport, path: str) -> None:
        code, _, err = transport.exec_command(f"mkfifo {path}", workdir=transport.cwd)
        assert code == 0, err

    def test_files_round_trip(self, transport: Transport, local: Path) -> None:
        source = local / "in.txt"
        source.write_bytes(b"line 1\nline 2\n")
        transport.putfile(source, "in.txt")
        info = transport.stat("in.txt")
        assert isinstance(info, FileStat) and info.is_file and not info.is_dir
        assert info.size == 14 and abs(info.mtime - time.time()) < 300
        assert transport.read_bytes("in.txt") == b"line 1\nline 2\n"
        assert transport.read_bytes("in.txt", offset=7) == b"line 2\n"
        assert transport.read_bytes("in.txt", offset=7, size=4) == b"line"
        assert transport.read_bytes("in.txt", offset=100) == b""
        transport.getfile("in.txt", local / "back.txt")
        assert (local / "back.txt").read_bytes() == source.read_bytes()
        transport.write_bytes("out.txt", b"first")
        transport.write_bytes("out.txt", b"2nd")  # overwritten, not appended
        assert transport.read_bytes("out.txt") == b"2nd"
        transport.write_bytes(posixpath.join(transport.cwd, "abs.txt"), b"")
        assert transport.listdir() == transport.listdir(".") == ["abs.txt", "in.txt", "out.txt"]
        assert transport.stat("abs.txt").size == 0
        assert transport.exists("in.txt") and transport.isfile("in.txt")
        assert not transport.isdir("in.txt") and not transport.is_real_dir("in.txt")

    def test_trees_round_trip(self, transport: Transport, local: Path) -> None:
        tree = local / "tree"
        (tree / "sub" / "deeper").mkdir(parents=True)
        (tree / "a.txt").write_text("a")
        (tree / "sub" / "deeper" / "b.txt").write_text("b")
        transport.put(tree, "copy")
        assert transport.listdir("copy") == ["a.txt", "sub"]
        assert transport.isdir("copy/sub/deeper") and transport.is_real_dir("copy/sub")
        transport.get("copy", local / "back")
        assert (local / "back" / "sub" / "deeper" / "b.txt").read_text() == "b"
        transport.put(tree / "a.txt", "single.txt")  # put and get take files too
        transport.get("single.txt", local / "single.txt")
        assert (local / "single.txt").read_text() == "a"

    def test_stat_follows_links_and_lstat_does_not(self, transport: Transport) -> None:
        transport.write_bytes("target.txt", b"t")
        transport.makedirs("folder")
        transport.symlink("target.txt", "file-link")
        transport.symlink("folder", "folder-link")
        assert transport.stat("file-link").is_file and transport.lstat("file-link").is_symlink
        assert (
            transport.lstat("target.txt").is_file and not transport.lstat("target.txt").is_symlink
        )
        assert transport.isdir("folder-link") and not transport.is_real_dir("folder-link")
        assert transport.is_real_dir("folder") and transport.is_real_dir(".")
        assert not transport.is_real_dir("missing") and not transport.exists("missing")
        for method in (transport.stat, transport.lstat):
            with pytest.raises(TransportError, match="missing"):
                method("missing")

    def test_only_regular_files_are_read(self, transport: Transport, local: Path) -> None:
        """A job's folder is not trusted: a link may lead anywhere, a FIFO would block."""
        transport.write_bytes("target.txt", b"t")
        transport.symlink("target.txt", "link.txt")
        self._fifo(transport, "pipe")
        for name in ("link.txt", "pipe"):
            with pytest.raises(TransportError, match="not a regular file"):
                transport.read_bytes(name)
            with pytest.raises(TransportError, match="not a regular file"):
                transport.getfile(name, local / name)
            assert not (local / name).exists()

    def test_get_regular_copies_regular_files_and_names_the_rest(
        self, transport: Transport, local: Path
    ) -> None:
        transport.makedirs("out/sub")
        transport.write_bytes("out/a.txt", b"a")
        transport.write_bytes("out/sub/b.txt", b"b")
        transport.symlink("a.txt", "out/link.txt")
        transport.symlink("/", "out/root-link")
        self._fifo(transport, "out/sub/pipe")
        skipped = transport.get_regular("out", local / "out")
        assert sorted(skipped) == ["out/link.txt", "out/root-link", "out/sub/pipe"]
        copied = sorted(str(p.relative_to(local)) for p in (local / "out").rglob("*"))
        assert copied == ["out/a.txt", "out/sub", "out/sub/b.txt"]
        assert transport.get_regular("out/a.txt", local / "one.txt", "a") == []
        assert (local / "one.txt").read_bytes() == b"a"
        assert transport.get_regular("out/link.txt", local / "no.txt", "link") == ["link"]
        assert not (local / "no.txt").exists()

    def test_commands(self, transport: Transport) -> None:
        code, out, err = transport.exec_command("pwd; echo oops >&2; exit 3", workdir=transport.cwd)
        assert (code, out.strip(), err.strip()) == (3, transport.cwd, "oops")
        transport.makedirs("sub")
        assert transport.exec_command("pwd", workdir="sub")[1].strip() == transport.path("sub")
        assert transport.exec_command("cat", stdin=b"from stdin") == (0, "from stdin", "")
        assert transport.exec_command("echo \"$((6 * 7))\" 'it''s'")[1] == "42 its\n"
        assert transport.exec_command("printf 'é\\n'")[1] == "é\n"
        assert transport.whoami() == transport.exec_command("whoami")[1].strip()

    def test_home_is_the_commands_home_and_a_real_folder(self, transport: Transport) -> None:
        home = transport.home()
        assert home.startswith("/") and transport.is_real_dir(home)
        assert transport.exec_command('printf "%s" "$HOME"')[1] == home

    def test_a_command_past_its_timeout_is_stopped(self, transport: Transport) -> None:
        started = time.monotonic()
        with pytest.raises(TransportTimeoutError, match="timeout of 1"):
            transport.exec_command("sleep 30", timeout=1)
        assert time.monotonic() - started < 20
        assert transport.exec_command("true")[0] == 0  # still usable afterwards

    def test_an_error_quotes_a_long_command_cut_short_in_one_line(
        self, transport: Transport
    ) -> None:
        """A ``python3 -c`` program is kilobytes: the error names its first line, cut short."""
        program = "# a program that sleeps\nimport time\n" + "x = 1\n" * 500 + "time.sleep(30)\n"
        with pytest.raises(TransportTimeoutError) as raised:
            transport.exec_command(f"python3 -c {shlex.quote(program)}", timeout=1)
        assert str(raised.value) == (
            f"`python3 -c '# a program that sleeps...` on {transport.hostname} ran past its "
            "timeout of 1 s."
        )
        long_line = "echo " + "a" * 300 + "; sleep 30"
        with pytest.raises(TransportTimeoutError) as raised:
            transport.exec_command(long_line, timeout=1)
        assert f"`{long_line[:77]}...` on {transport.hostname}" in str(raised.value)

    def test_remove_makedirs_and_rmtree(self, transport: Transport) -> None:
        transport.write_bytes("target.txt", b"t")
        transport.symlink("target.txt", "link.txt")
        transport.remove("link.txt")  # the link, not what it points to
        assert transport.listdir() == ["target.txt"]
        transport.remove("target.txt")
        with pytest.raises(TransportError, match=r"missing\.txt"):
            transport.remove("missing.txt")
        transport.makedirs("a/b/c")
        transport.makedirs("a/b/c")  # exist_ok by default
        with pytest.raises(TransportError):
            transport.makedirs("a/b", exist_ok=False)
        transport.write_bytes("a/b/c/file.txt", b"x")
        transport.rmtree("a")
        assert transport.listdir() == []
        transport.rmtree("a")  # gone already: no error

    def test_missing_paths_raise_transport_errors(self, transport: Transport, local: Path) -> None:
        with pytest.raises(TransportError, match=r"missing\.txt"):
            transport.getfile("missing.txt", local / "x")
        assert not (local / "x").exists()
        with pytest.raises(TransportError, match=r"missing\.txt"):
            transport.read_bytes("missing.txt")
        with pytest.raises(TransportError, match="missing"):
            transport.listdir("missing")
        transport.write_bytes("file.txt", b"")
        with pytest.raises(TransportError):
            transport.listdir("file.txt")

    def test_paths_are_relative_to_cwd(self, transport: Transport) -> None:
        assert transport.path("a/../b.txt") == posixpath.join(transport.cwd, "b.txt")
        assert transport.path("/x/y") == "/x/y"
        assert transport.cwd in transport.gotocomputer_command(".")

    def test_a_transport_can_be_closed_and_opened_again(self, transport: Transport) -> None:
        transport.close()
        assert not transport.is_open
        transport.open()
        assert transport.is_open
        assert transport.exec_command("true")[0] == 0
        transport.write_bytes("after.txt", b"x")
        assert transport.read_bytes("after.txt") == b"x"
