"""The contract every registered monitor keeps, built-in or from another package.

veglia.testing.contracts.MonitorContract, run over every ``veglia.monitors`` entry point
(docs/monitors.md); veglia's own monitors are also listed in docs/monitors.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from veglia.testing.contracts import MonitorContract

DOCS = Path(__file__).resolve().parent.parent / "docs" / "monitors.md"


class TestMonitors(MonitorContract):
    entry_points = "*"

    def test_builtin_monitors_are_in_the_monitor_docs(self, monitor):
        name, function = monitor
        if not function.__module__.startswith("veglia."):
            pytest.skip(f"{name} is not veglia's own")
        assert f"| `{name}` |" in DOCS.read_text(), f"add {name} to the table in docs/monitors.md"
