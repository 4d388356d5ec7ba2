"""Right-sizing: a job's memory and wall-time requests against the history of similar jobs
(profile option ``resources.right_size``: off, warn, lower or apply; option ``right_size``
turns it off for one job).

What to change is worked out here, from the job's options and the history; ``CalcJob``
applies it to its node and reports it (``CalcJob._right_size``), once per job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veglia.engine.calcjob.history import recommend

__all__ = ["Review", "review"]

#: (option, the smallest value right-sizing sets, unit)
_REQUESTS = (("max_memory_kb", 1024, "kB"), ("max_wallclock_seconds", 60, "s"))


@dataclass
class Review:
    """What right-sizing makes of a job's requests."""

    #: The job's options with the requests changed.
    options: dict[str, Any]
    #: option -> (requested, recommended), for each request changed.
    changed: dict[str, tuple[Any, int]] = field(default_factory=dict)
    #: Report lines on requests too big but left alone.
    warnings: list[str] = field(default_factory=list)
    #: Report lines on the requests changed.
    changes: list[str] = field(default_factory=list)

    @property
    def record(self) -> dict[str, dict[str, Any]]:
        """The node's ``right_sized`` attribute."""
        return {name: {"from": old, "to": new} for name, (old, new) in self.changed.items()}


def review(options: dict[str, Any], mode: str, similarity_key: str, exclude_pk: int) -> Review:
    """The requests in ``options`` against similar jobs' history, in ``mode`` (not off)."""
    options = dict(options)
    result = Review(options)
    if mode != "apply" and all(options.get(name) is None for name, _, _ in _REQUESTS):
        return result  # 'warn' and 'lower' only judge requests that were made
    advice = recommend(similarity_key, exclude_pk=exclude_pk)
    recommendations = {
        "max_memory_kb": advice.memory_kb,
        "max_wallclock_seconds": advice.wallclock_seconds,
    }
    needed = {}
    for name, floor, unit in _REQUESTS:
        measured = recommendations[name]
        if measured is None:
            continue
        needed[name] = _needed(measured, floor, unit, advice.samples)
        recommended = max(measured, floor)
        requested = options.get(name)
        too_big = requested is not None and requested > 2 * recommended
        if mode == "apply" or (too_big and mode == "lower"):
            if requested != recommended:
                result.changed[name] = (requested, recommended)
                options[name] = recommended
        elif too_big:
            result.warnings.append(
                f"{name} = {requested} {unit} is over twice what {needed[name]}; set the "
                "profile option resources.right_size to 'lower' to lower such requests"
            )
    result.changes = [
        f"right-sized {name} from {old} to {new}: {needed[name]}"
        for name, (old, new) in result.changed.items()
    ]
    return result


def _needed(measured: int, floor: int, unit: str, samples: int) -> str:
    """What the similar jobs measured, and the least right-sizing sets when that is below."""
    text = f"{samples} similar jobs needed: {measured} {unit} (mean + 1 SD of what they used)"
    if measured < floor:
        text += f"; right-sizing never sets less than {floor} {unit}"
    return text
