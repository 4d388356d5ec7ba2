"""The README's test command runs tests in parallel (pytest-xdist): the SLURM tests must
still share one worker, and the tests that change what others use must be left for the run
that comes after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def _pytest(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.stdout + result.stderr


def test_slurm_tests_run_on_one_worker_of_a_parallel_run(tmp_path: Path) -> None:
    # Grouped, xdist names each test with its group (a pytest that drops the groups, as
    # 9.2 does with xdist 3.8, would not): SKIPPED or PASSED, the name is there.
    output = _pytest(
        "-n", "2", "--dist", "loadgroup", "-v", f"--basetemp={tmp_path}",
        "tests/test_services.py::test_sinfo_shows_both_partitions",
        "tests/test_services.py::test_job_submitted_over_ssh_runs_as_the_ssh_user",
    )  # fmt: skip
    lines = [line for line in output.splitlines() if "test_services.py::" in line]
    assert len(lines) >= 2, output
    assert all("@slurm" in line for line in lines), output


def test_tests_that_stop_rabbitmq_or_install_packages_wait_for_the_exclusive_run() -> None:
    output = _pytest("--co", "-q", "-m", "exclusive")
    assert "test_broker_restart.py::test_broker_restart_under_load" in output
    assert "test_plugins.py::test_external_package_is_discovered" in output
    assert "test_docs.py::test_page_examples_run[docs/plugins.md]" in output
    assert "test_scheduler_direct.py" not in output
