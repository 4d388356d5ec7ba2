"""Every ```bash and ```python block of README.md and docs/*.md runs, page by page.

Each page is one test, on a veglia home of its own with the venv's ``veglia`` first on PATH,
in an empty working folder (whose ``.venv/bin`` links to this venv's programs, so the
README's ``.venv/bin/veglia`` works). A page that does not run ``veglia presto`` itself
gets a profile made by it first. Its blocks run in order and share state, as a reader going
down the page would:

- bash blocks run with ``bash -e -o pipefail``, one after the other in the same folder; the
  variables and functions a block sets, and where it ``cd``-ed, carry over to the next;
- python blocks run in one Python session per page (globals carry over); a traceback names
  the page and its line.

A block that must not run is marked on the line before its fence, with the reason::

    <!-- docs-test: skip (needs a real cluster) -->

and is listed, with its reason, as a skipped test. Whatever a page started (a daemon) is
stopped when its test ends. See docs/development.md.

A page of PACKAGE_PAGES shows a plugin package: a block whose first line is ``# PATH`` (a
``.py`` or ``.toml`` file, then maybe ``, continued`` or ``: what it is``) is that file of
the package (blocks of one file are joined), not run on its own. The test writes the
package in the page's working folder, installs it with ``pip install -e`` before the page
runs, and uninstalls it afterwards.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("bash", "python")
#: Pages that show a plugin package, and the name of its folder (and distribution).
PACKAGE_PAGES = {"docs/plugins.md": "mylab-veglia"}
PACKAGE_FILE = re.compile(r"^# (?P<path>[\w./-]+\.(?:py|toml))(?:[,:].*)?$")
SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")
BLOCK_TIMEOUT = 120.0  # seconds one block may take

# The services a page's examples talk to; missing, the page skips (fails under CI=true).
PAGE_SERVICES = {
    "README.md": ["rabbitmq_url"],
    "docs/getting-started.md": ["rabbitmq_url"],
    "docs/daemon.md": ["rabbitmq_url"],
}


@dataclass
class Block:
    page: str  # relative to the checkout
    line: int  # of the first line of code
    language: str
    source: str
    skip: str | None  # the reason, when marked not to run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def package_file(self) -> str | None:
        """The file of the page's plugin package this block is, if it is one."""
        if self.page not in PACKAGE_PAGES:
            return None
        match = PACKAGE_FILE.match(self.source.split("\n", 1)[0])
        return match["path"] if match else None

    @property
    def runs(self) -> bool:
        return self.language in LANGUAGES and not self.skip and not self.package_file


def read_blocks(path: Path) -> list[Block]:
    """The fenced bash and python blocks of a Markdown page, with their skip marks."""
    page = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    skip: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        mark = SKIP.match(line)
        opening = FENCE.match(line)
        if mark:
            if skip is not None:
                raise AssertionError(f"{page}:{index + 1}: two skip marks in a row")
            skip = mark["reason"].strip()
        elif opening:
            indent, fence = opening["indent"], opening["fence"]
            language = (opening["info"].split() or [""])[0]
            body = []
            index += 1
            while index < len(lines) and not (
                lines[index].strip().startswith(fence) and not lines[index].strip()[len(fence) :]
            ):
                body.append(lines[index][len(indent) :] if lines[index].strip() else "")
                index += 1
            if language in (*LANGUAGES, "toml"):
                source = textwrap.dedent("\n".join(body)) + "\n"
                blocks.append(Block(page, index - len(body) + 1, language, source, skip))
            elif skip is not None:
                raise AssertionError(f"{page}: a skip mark before a ```{language} block")
            skip = None
        elif skip is not None:
            raise AssertionError(
                f"{page}:{index + 1}: a skip mark must be on the line before a block's fence"
            )
        index += 1
    return blocks


ALL_BLOCKS = {str(page.relative_to(ROOT)): read_blocks(page) for page in PAGES}
SKIPPED = [block for blocks in ALL_BLOCKS.values() for block in blocks if block.skip]


# -- running one page ---------------------------------------------------------------------
PYTHON_SESSION = r"""
import json, os, sys, traceback

commands = os.fdopen(int(sys.argv[1]), "r")
replies = os.fdopen(int(sys.argv[2]), "w")
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
for command in commands:
    block = json.loads(command)
    code = "\n" * (block["line"] - 1) + block["source"]  # tracebacks give the page's lines
    try:
        exec(compile(code, block["path"], "exec"), namespace)
        ok = True
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)  # from the page
        ok = False
    sys.stdout.flush()
    sys.stderr.flush()
    replies.write(json.dumps(ok) + "\n")
    replies.flush()
"""

BASH_PROLOGUE = """\
if [ -f "$DOCS_TEST_STATE" ]; then source "$DOCS_TEST_STATE"; fi
set -e -o pipefail
"""
# What a block left for the next: its variables (not those of a fresh bash), its
# functions, and its working folder.
BASH_EPILOGUE = """
{
    for __name in $(compgen -v | grep -vxF -f "$DOCS_TEST_BASELINE" | grep -v '^BASH'); do
        declare -p "$__name" 2>/dev/null || true
    done
    declare -f
    printf 'cd %q\\n' "$PWD"
} > "$DOCS_TEST_STATE"
"""


class PageRun:
    """The shell and Python sessions of one page; output goes to files, so that a daemon a
    block starts cannot hold a pipe open."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.cwd = folder / "work"
        self.cwd.mkdir(parents=True)
        # The README's `.venv/bin/veglia`: links to this venv's programs, so that nothing a
        # page does to its .venv can touch the venv running the tests.
        bin_dir = self.cwd / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        for program in Path(sys.executable).parent.iterdir():
            (bin_dir / program.name).symlink_to(program)
        self.out = folder / "out.txt"
        self.state = folder / "state.sh"
        self.baseline = folder / "baseline.txt"
        self.env["DOCS_TEST_STATE"] = str(self.state)
        self.env["DOCS_TEST_BASELINE"] = str(self.baseline)
        variables = subprocess.run(
            ["bash", "-c", "compgen -v"], env=self.env, capture_output=True, text=True
        )
        self.baseline.write_text(variables.stdout + "__name\nPIPESTATUS\n_\n")
        self.python: subprocess.Popen | None = None

    def _output_since(self, offset: int) -> str:
        text = self.out.read_bytes()[offset:].decode(errors="replace")
        return text if len(text) < 6000 else "...\n" + text[-6000:]

    def run(self, block: Block) -> None:
        offset = self.out.stat().st_size if self.out.exists() else 0
        start = time.monotonic()
        ok = self._bash(block) if block.language == "bash" else self._python(block)
        print(f"{block.where}: {time.monotonic() - start:.1f} s")  # shown by pytest -rP
        if not ok:
            pytest.fail(
                f"the {block.language} block at {block.where} failed:\n"
                f"{textwrap.indent(block.source, '    ')}\n"
                f"--- its output ---\n{self._output_since(offset)}",
                pytrace=False,
            )

    def _bash(self, block: Block) -> bool:
        script = self.folder / "block.sh"
        script.write_text(BASH_PROLOGUE + block.source + BASH_EPILOGUE)
        with self.out.open("ab") as out:
            process = subprocess.Popen(
                ["bash", str(script)],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                return process.wait(timeout=BLOCK_TIMEOUT) == 0
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                out.write(f"\n[timed out after {BLOCK_TIMEOUT:.0f} s]\n".encode())
                return False

    def _python(self, block: Block) -> bool:
        if self.python is None:
            commands_read, self._commands = os.pipe()
            self._replies, replies_write = os.pipe()
            with self.out.open("ab") as out:
                self.python = subprocess.Popen(
                    [sys.executable, "-c", PYTHON_SESSION, str(commands_read), str(replies_write)],
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    pass_fds=(commands_read, replies_write),
                )
            os.close(commands_read)
            os.close(replies_write)
        command = {"path": str(ROOT / block.page), "line": block.line, "source": block.source}
        os.write(self._commands, (json.dumps(command) + "\n").encode())
        ready, _, _ = select.select([self._replies], [], [], BLOCK_TIMEOUT)
        reply = os.read(self._replies, 100) if ready else b""
        if not reply:
            self.python.kill()
            self.python.wait()
            self.python = None
            with self.out.open("a") as out:
                out.write(f"\n[no answer after {BLOCK_TIMEOUT:.0f} s, or the session died]\n")
            return False
        return json.loads(reply) is True

    def close(self) -> None:
        """End the Python session and stop the daemon of every profile the page made."""
        if self.python is not None:
            os.close(self._commands)
            try:
                self.python.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.python.kill()
                self.python.wait()
            os.close(self._replies)
        home = Path(self.env["VEGLIA_HOME"])
        running = {pid.parents[2].name for pid in home.glob("profiles/*/daemon/*/supervisor.pid")}
        for name in sorted(running):
            subprocess.run(
                ["veglia", "-p", name, "daemon", "stop"],
                env=self.env,
                cwd=self.cwd,
                capture_output=True,
                timeout=120,
            )


def makes_its_profile(blocks: list[Block]) -> bool:
    return any(block.runs and re.search(r"\bveglia presto\b", block.source) for block in blocks)


def install_package(page: str, folder: Path) -> str | None:
    """Write the page's plugin package in ``folder`` and ``pip install -e`` it; its name."""
    name = PACKAGE_PAGES.get(page)
    if name is None:
        return None
    root = folder / name
    for block in ALL_BLOCKS[page]:
        if block.package_file:
            path = root / block.package_file
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as file:
                file.write(block.source + "\n")
    for package in root.iterdir():
        if package.is_dir():
            (package / "__init__.py").touch()  # as the page says: empty
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "-e", str(root)], check=True, timeout=300)
    return name


def uninstall_package(name: str | None) -> None:
    if name is not None:
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        subprocess.run([*pip, "uninstall", "-y", name], check=True, timeout=300)


RUNNABLE_PAGES = [
    pytest.param(
        page,
        marks=[
            *([pytest.mark.services] if page in PAGE_SERVICES else []),
            # Its package goes into the venv: every test would see its entry points.
            *([pytest.mark.exclusive] if page in PACKAGE_PAGES else []),
        ],
    )
    for page, blocks in ALL_BLOCKS.items()
    if any(block.runs for block in blocks)
]


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_page_examples_run(page: str, veglia_home: Path, tmp_path: Path, request):
    for fixture in PAGE_SERVICES.get(page, []):
        request.getfixturevalue(fixture)
    blocks = [block for block in ALL_BLOCKS[page] if block.runs]
    bin_dir = str(Path(sys.executable).parent)
    env = {key: value for key, value in os.environ.items() if not key.startswith("VEGLIA_")}
    env.update(
        VEGLIA_HOME=str(veglia_home),
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        VIRTUAL_ENV=sys.prefix,
        COLUMNS="200",
    )
    run = PageRun(tmp_path / "page", env)
    package = None
    try:
        package = install_package(page, run.cwd)
        if not makes_its_profile(ALL_BLOCKS[page]):
            presto = subprocess.run(
                ["veglia", "presto"], env=env, cwd=run.cwd, capture_output=True, text=True
            )
            assert presto.returncode == 0, presto.stdout + presto.stderr
        for block in blocks:
            run.run(block)
    finally:
        run.close()
        uninstall_package(package)


@pytest.mark.parametrize("block", SKIPPED, ids=[block.where for block in SKIPPED])
def test_skipped_blocks_say_why(block: Block):
    pytest.skip(f"{block.where} ({block.language}) is marked not to run: {block.skip}")


def test_the_readme_commands_are_run():
    """.ci/run runs the README's install and test blocks (the venv, the test suite); here the
    install block's first job runs, so a skip mark may leave out only the venv part."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    for name in ("install", "test"):
        assert f"<!-- {name} -->" in readme and f"<!-- /{name} -->" in readme, name
        assert f"readme_block {name}" in ci, name
    install = readme.split("<!-- install -->")[1].split("<!-- /install -->")[0]
    blocks = [b for b in ALL_BLOCKS["README.md"] if b.source.strip() in install]
    assert all("veglia" not in b.source for b in blocks if b.skip), blocks
    assert any("veglia shell" in b.source for b in blocks if not b.skip), blocks


def test_skip_marks_belong_to_a_block(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: skip (needs a cluster) -->\n\n```bash\ntrue\n```\n")
    with pytest.raises(AssertionError, match="line before a block"):
        read_blocks(page)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_blocks_of_a_page_share_variables_and_folder(veglia_home: Path, tmp_path: Path):
    env = {**os.environ, "VEGLIA_HOME": str(veglia_home)}
    run = PageRun(tmp_path / "page", env)
    try:
        run.run(Block("README.md", 1, "bash", "PK=42\nmkdir sub && cd sub\n", None))
        run.run(Block("README.md", 1, "bash", 'test "$PK" = 42 && test "${PWD##*/}" = sub\n', None))
        run.run(Block("README.md", 1, "python", "x = 1\n", None))
        run.run(Block("README.md", 1, "python", "assert x == 1\n", None))
        with pytest.raises(pytest.fail.Exception, match="README.md:1 failed"):
            run.run(Block("README.md", 1, "bash", "false\necho after\n", None))
    finally:
        run.close()


def test_every_veglia_command_of_the_verdi_table_exists():
    """docs/cli.md's "From verdi" table names only commands veglia has (or says "not yet")."""
    import click

    from veglia.cli.main import cli

    text = (ROOT / "docs" / "cli.md").read_text()
    table = text.split("## From verdi", 1)[1].split("\n## ", 1)[0]
    missing = []
    for row in table.splitlines():
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) < 2 or "not yet" in cells[1]:
            continue
        for code in re.findall(r"`(veglia [^`]+)`", cells[1]):
            words = code.split()[1:]
            group = cli.get_command(None, words[0])
            if group is None:
                missing.append(code)
                continue
            rest = " ".join(words[1:])
            if not isinstance(group, click.Group) or not rest:
                continue
            parent = group
            for number, part in enumerate(rest.split(" / ")):
                names = [w for w in part.split() if not w.startswith(("-", "[", "<", "("))]
                names = [w for w in names if not w.isupper()]
                # "repo ls / cat": an alternative of one word is a sibling of the last one.
                here = parent if number and len(names) == 1 else group
                for name in names:
                    if not isinstance(here, click.Group):
                        break  # a command: the words after it are its arguments
                    found = here.get_command(None, name)
                    if found is None:
                        missing.append(f"{code}: {name}")
                        break
                    parent, here = here, found
    assert not missing, missing


# -- a journey through a terminal ----------------------------------------------------------------
class Terminal:
    """A program in a tmux pane, driven as a person would: wait for a prompt on the screen,
    type the answer, press Enter. The tmux server is this test's own (its own socket)."""

    def __init__(self, command: list[str], env: dict[str, str], socket: str) -> None:
        self.tmux = ["tmux", "-L", socket]
        self.lines = 0
        shell = f'{shlex.join(command)}; echo "[exit $?]"; sleep 600'
        size = ["-x", "220", "-y", "50"]
        subprocess.run(
            [*self.tmux, "-f", "/dev/null", "new-session", "-d", "-s", "journey", *size, shell],
            env=env,
            check=True,
            timeout=30,
        )

    def screen(self) -> list[str]:
        """Every line the pane showed, wrapped lines joined, trailing empty ones dropped."""
        text = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-J", "-S", "-", "-t", "journey"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
        return text.rstrip().splitlines()

    def expect(self, prompt: str, timeout: float = 60.0) -> None:
        """Wait until a new last line is the prompt ``prompt`` (it starts with it and ends
        with a colon, as click's prompts do)."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.screen()
            last = lines[-1].strip() if lines else ""
            if len(lines) > self.lines and last.startswith(prompt) and last.endswith(":"):
                self.lines = len(lines)
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no prompt {prompt!r}; the screen:\n" + "\n".join(lines))
            time.sleep(0.1)

    def answer(self, prompt: str, text: str) -> None:
        self.expect(prompt)
        if text:
            subprocess.run([*self.tmux, "send-keys", "-t", "journey", "-l", text], check=True)
        subprocess.run([*self.tmux, "send-keys", "-t", "journey", "Enter"], check=True)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = "\n".join(self.screen())
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} on the screen:\n{screen}")
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True, timeout=30)


def test_pipeline_create_of_two_steps_through_a_terminal(profile, veglia_home: Path, tmp_path):
    """docs/pipelines.md's "Asked for each part", typed into `veglia pipeline create` in a
    terminal (tmux): two steps, one wrong choice explained and asked again."""
    if shutil.which("tmux") is None:
        from veglia_fixtures.services import service_missing

        service_missing("tmux is not installed (Debian package `tmux`)")
    from veglia.pipeline_setups import load_pipeline_setup

    runs = tmp_path / "runs"
    runs.mkdir()
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("VEGLIA_", "TMUX"))
    }
    env.update(VEGLIA_HOME=str(veglia_home), TERM="xterm", COLUMNS="200")
    veglia = str(Path(sys.executable).parent / "veglia")
    terminal = Terminal([veglia, "pipeline", "create"], env, f"veglia-test-{os.getpid()}")
    try:
        for prompt, text in [
            ("data source", "core.folder"),
            ("path", str(runs)),
            ("glob", "*.txt"),
            ("group_by", ""),
            ("settled", "5"),
            ("computer", ""),  # where the source is read: localhost
            ("process", "core.shell"),
            ("input_port", ""),  # files
            ("computer", ""),
            ("fixed input", "command = 'sort *.txt > sorted.txt'"),
            ("fixed input", "outputs = ['sorted.txt']"),
            ("fixed input", ""),
            ("option", ""),
            ("max_active", "2"),
            ("Add a step after it", "y"),
            ("process", "core.arithmetic.add"),  # not offered: explained, asked again
            ("process", "core.shell"),
            ("input_port", ""),
            ("computer", ""),
            ("fixed input", "command = 'uniq -c sorted.txt > counts.txt'"),
            ("fixed input", "outputs = ['counts.txt']"),
            ("fixed input", ""),
            ("option", "max_wallclock_seconds = 600"),
            ("option", ""),
            ("Add a step after it", "n"),
            ("name", "sort-then-count"),
            ("Enable it now", "y"),
        ]:
            terminal.answer(prompt, text)
        screen = terminal.wait_for("[exit ")
    finally:
        terminal.close()
    assert "[exit 0]" in screen, screen
    assert "'core.arithmetic.add' is not one of the processes offered" in screen
    assert "Please answer again." in screen
    assert "Created pipeline setup 'sort-then-count' version 1 (enabled)" in screen
    setup = load_pipeline_setup("sort-then-count")
    assert setup.process == "core.chain" and setup.max_active == 2 and setup.enabled
    steps = setup.inputs["steps"]
    assert [step["inputs"]["command"] for step in steps] == [
        "sort *.txt > sorted.txt",
        "uniq -c sorted.txt > counts.txt",
    ]
    assert steps[1]["options"] == {"computer": "localhost", "max_wallclock_seconds": 600}
