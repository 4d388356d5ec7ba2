"""veglia.testing.contracts as a plugin package uses it: its own pytest, its own entry
points, the package installed with pip (into a folder of the test's, on PYTHONPATH, so
veglia's environment is left as it was)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

FAKE_COMPUTER = Path(__file__).parent / "plugin_packages" / "veglia-fake-computer"


def _install(package: Path, site: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "install",
            "--no-deps",
            "--target",
            str(site),
            str(package),
        ],
        check=True,
        timeout=300,
    )


def _pytest(package: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """The package's own test run, in its folder, as its author would start it."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs"],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_plugin_package_passes_the_contracts_on_its_own_entry_points(tmp_path):
    package = tmp_path / FAKE_COMPUTER.name
    shutil.copytree(FAKE_COMPUTER, package)
    _install(package, tmp_path / "site")
    result = _pytest(package, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    # Every check ran: the fake transport is one the contract can open itself.
    assert re.fullmatch(r"\d+ passed in .*", result.stdout.strip().splitlines()[-1]), result.stdout


def _broken_package(root: Path, pattern: str) -> Path:
    """A scheduler that reads garbage as an empty listing, and its contract test."""
    package = root / "veglia-lenient"
    (package / "tests").mkdir(parents=True)
    (package / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "veglia-lenient"
        version = "0.1.0"

        [project.entry-points."veglia.schedulers"]
        "lenient.scheduler" = "veglia_lenient:LenientScheduler"

        [tool.setuptools]
        py-modules = ["veglia_lenient"]
        """)
    )
    (package / "veglia_lenient.py").write_text(
        textwrap.dedent('''\
        from veglia.testing import FakeScheduler


        class LenientScheduler(FakeScheduler):
            """Keeps the lines it recognises: garbage becomes an empty listing."""

            def parse_joblist_output(self, retval, stdout, stderr):
                return []
        ''')
    )
    (package / "tests" / "test_contracts.py").write_text(
        textwrap.dedent(f"""\
        from veglia.testing.contracts import SchedulerContract


        class TestLenient(SchedulerContract):
            entry_points = {pattern!r}
        """)
    )
    return package


def test_a_broken_plugin_fails_the_contract_saying_what_to_fix(tmp_path):
    package = _broken_package(tmp_path, "lenient.*")
    _install(package, tmp_path / "site")
    result = _pytest(package, tmp_path / "site")
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("4 failed, 5 passed")
    assert (
        "LenientScheduler.parse_joblist_output(0, 'aaa', '') returned []: a job missing "
        "from a listing counts as finished, so raise SchedulerError on output it cannot "
        "read or a failed command"
    ) in result.stdout


def test_a_pattern_that_matches_no_entry_point_fails_instead_of_checking_nothing(tmp_path):
    package = _broken_package(tmp_path, "lenient_typo.*")
    _install(package, tmp_path / "site")
    result = _pytest(package, tmp_path / "site")
    assert result.returncode != 0
    assert (
        "TestLenient: no veglia.schedulers entry point matches 'lenient_typo.*' (installed: "
    ) in result.stdout
    assert "lenient.scheduler" in result.stdout and "install your package" in result.stdout
