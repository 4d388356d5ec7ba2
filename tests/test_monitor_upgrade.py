"""A monitor plugin upgraded under a running daemon: the job's provenance names the version
whose code ran its monitor (the daemon's old one), not the one installed at submission."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory, clear_cache
from veglia_fixtures.profiles import wait_for

MODULE = '''
def stop(node, transport):
    """Stops the job at once, saying which version of the package it is."""
    return "stopped by {version}"
'''


def _install(site: Path, version: str) -> None:
    """``vtest-monitor`` at ``version`` as pip leaves it: the module and its dist-info (the
    other version's removed, as an upgrade removes it)."""
    for old in site.glob("vtest_monitor-*.dist-info"):
        shutil.rmtree(old)
    (site / "vtest_monitor.py").write_text(MODULE.format(version=version))
    info = site / f"vtest_monitor-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vtest-monitor\nVersion: {version}\n"
    )
    (info / "entry_points.txt").write_text("[veglia.monitors]\nvtest.stop = vtest_monitor:stop\n")


@pytest.mark.services
def test_the_provenance_names_the_version_the_daemon_ran(
    broker_profile, daemon, tmp_path, monkeypatch
):
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "0.1.0")
    monkeypatch.setenv("PYTHONPATH", str(site))  # the daemon's
    monkeypatch.syspath_prepend(str(site))  # this process's, which checks the builder
    daemon(1)  # its worker loads 0.1.0 at its first job

    first = engine.submit(
        CalculationFactory("core.shell"),
        command=orm.Str("sleep 30"),
        monitors={"stop": {"entry_point": "vtest.stop"}},
    )
    wait_for([first], lambda n: n.is_terminated, timeout=60)
    assert "stopped by 0.1.0" in (first.exit_message or "")

    _install(site, "0.2.0")  # upgraded; the daemon is not restarted
    clear_cache()  # this process, as a new `veglia` command, reads 0.2.0 at submission
    second = engine.submit(
        CalculationFactory("core.shell"),
        command=orm.Str("sleep 30"),
        monitors={"stop": {"entry_point": "vtest.stop"}},
    )
    wait_for([second], lambda n: n.is_terminated, timeout=60)
    assert "stopped by 0.1.0" in (second.exit_message or "")  # the daemon's code
    assert second.get_attribute("monitor_provenance")["stop"]["version"] == "0.1.0"
    assert any(
        "monitor stop runs version 0.1.0 of its package here (0.2.0 was recorded before)"
        in log.message
        for log in second.logs
    ), [log.message for log in second.logs]
