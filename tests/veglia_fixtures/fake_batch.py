"""A batch system's list command faked by a Python script first on the PATH, for the tests
of polls too large for the ids to go on the command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def fake_batch_command(
    directory: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    options: list[str | None],
    body: str,
) -> Path:
    """Put the command ``name`` in ``directory``, first on the PATH: a Python script that
    checks its first arguments are ``options`` (None: any one), appends how many arguments
    follow them (the ids) to ``calls.log``, the path returned, then runs ``body`` (Python,
    with ``json``, ``sys``, ``here`` = ``directory`` and ``ids`` at hand)."""
    script = directory / name
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "from pathlib import Path\n"
        "here = Path(__file__).parent\n"
        f"options = {options!r}\n"
        "given = sys.argv[1 : 1 + len(options)]\n"
        "assert all(o in (None, g) for o, g in zip(options, given, strict=True)), sys.argv\n"
        "ids = sys.argv[1 + len(options) :]\n"
        "with open(here / 'calls.log', 'a') as log:\n"
        "    log.write(f'{len(ids)}\\n')\n" + body
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}:{os.environ['PATH']}")
    return directory / "calls.log"
