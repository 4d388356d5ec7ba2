"""The recorded nvidia-smi of tests/data/nvidia-smi on a computer's jobs' PATH."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The replaying nvidia-smi and its scenarios (see the README there for their sources).
FAKE_NVSMI = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi"


def replay_gpu(computer: Any, scenario: Path, state: Path, **properties: Any) -> Any:
    """Save ``computer`` with its jobs running the fake ``nvidia-smi`` replaying
    ``scenario`` (a folder of N.csv recordings; ``state`` counts the calls), and
    ``properties`` set besides."""
    computer.properties.update(properties)
    computer.properties["prepend_text"] = (
        f"export PATH={FAKE_NVSMI}:$PATH VEGLIA_FAKE_NVSMI_SCENARIO={scenario} "
        f"VEGLIA_FAKE_NVSMI_STATE={state}"
    )
    return computer.save()
