"""`veglia monitor list/show` and `veglia plugin list monitors` with broken monitor entry
points installed beside the good ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from veglia.exceptions import CliExit


def _installed_by_hand(site: Path, name: str, entry_points: dict[str, str]) -> None:
    """A distribution as pip leaves it (its dist-info), with ``veglia.monitors`` entries."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[veglia.monitors]\n{lines}")


@pytest.fixture
def broken_monitors(tmp_path: Path) -> dict[str, str]:
    """Monitors that fail to import, are not callable, or are registered twice; the
    environment that installs them."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "bad_import.py").write_text("import not_a_module_anywhere\n")
    (site / "bad_values.py").write_text(
        "VALUE = 3\n\ndef one(node, transport):\n    '''One.'''\n\n"
        "def two(node, transport):\n    '''Two.'''\n"
    )
    _installed_by_hand(
        site,
        "badmon",
        {
            "bad.import": "bad_import:watch",
            "bad.notcallable": "bad_values:VALUE",
            "dup.twice": "bad_values:one",
        },
    )
    _installed_by_hand(site, "badmon2", {"dup.twice": "bad_values:two"})
    return {"PYTHONPATH": str(site)}


def test_monitor_list_lists_the_good_monitors_and_says_why_a_bad_one_is_not(
    run_cli, broken_monitors
):
    listed = run_cli("monitor", "list", "--raw", env=broken_monitors)
    assert listed.exit_code == 0, listed.output
    rows = dict(line.split("\t", 1) for line in listed.stdout.splitlines())
    assert rows["core.file_pattern"].startswith("path (required), pattern (required, regular")
    assert rows["bad.import"] == (
        "-\tnot usable: Plugin 'bad.import' in 'veglia.monitors' (bad_import:watch) failed to "
        "import: ModuleNotFoundError: No module named 'not_a_module_anywhere'. Reinstall or "
        "fix the package that provides it."
    )
    assert rows["bad.notcallable"] == (
        "-\tnot usable: Plugin 'bad.notcallable' in 'veglia.monitors' is 3, not a monitor function."
    )
    assert rows["dup.twice"] == (
        "-\tnot usable: Plugin 'dup.twice' in group 'veglia.monitors' is registered more than "
        "once (bad_values:one, bad_values:two). Uninstall one of the packages."
    )
    assert len([line for line in listed.stdout.splitlines() if line.startswith("dup.")]) == 1


def test_monitor_show_of_a_non_callable_says_it_is_no_monitor_function(run_cli, broken_monitors):
    shown = run_cli("monitor", "show", "bad.notcallable", env=broken_monitors)
    assert shown.exit_code == CliExit.PLUGIN, shown.output
    assert "Plugin 'bad.notcallable' in 'veglia.monitors' is 3, not a monitor function." in (
        shown.stderr
    )
    assert "Unexpected" not in shown.output and "bad_values:VALUE" not in shown.stdout


def test_plugin_list_flags_a_monitor_registered_twice(run_cli, broken_monitors):
    listed = run_cli("plugin", "list", "monitors", "--raw", env=broken_monitors)
    assert listed.exit_code == 0, listed.output
    loaded = [row.split("\t") for row in listed.stdout.splitlines()]
    twice = [row for row in loaded if row[1] == "dup.twice"]
    assert sorted(row[2] for row in twice) == ["bad_values:one", "bad_values:two"]
    assert all(
        row[4] == "registered more than once: uninstall one of the packages" for row in twice
    )
    assert {row[4] for row in loaded if row[1] == "core.file_pattern"} == {"when used"}


GREP = '''
from veglia.plugin_api import Regex


def grep(node, transport, *, path: str = "x", pattern: Regex, n: int = 1, files=None):
    """Stops the job when PATTERN matches.

    :param pattern: what to look for.
    """
'''


def test_a_regex_keyword_is_shown_as_one_and_files_is_no_keyword(run_cli, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "mylab_grep.py").write_text(GREP)
    _installed_by_hand(site, "mylab-grep", {"mylab.grep": "mylab_grep:grep"})
    env = {"PYTHONPATH": str(site)}

    shown = run_cli("plugin", "show", "monitors", "mylab.grep", env=env)
    assert shown.exit_code == 0, shown.output
    assert (
        "signature: mylab.grep(node, transport, *, path: str = 'x', pattern: str (regular "
        "expression), n: int = 1, files=None)\n" in shown.stdout
    ), shown.stdout
    kwargs = "path='x', pattern (required, regular expression), n=1"
    listed = run_cli("monitor", "list", "--raw", env=env).stdout.splitlines()
    assert f"mylab.grep\t{kwargs}\tStops the job when PATTERN matches." in listed
    shown = run_cli("monitor", "show", "mylab.grep", env=env).stdout
    assert f"kwargs: {kwargs}\n" in shown
