"""Right-sizing: a job's memory and wall-time requests against the history of similar jobs
(profile option ``resources.right_size``: off, warn, lower or apply; option ``right_size``
turns it off for one job)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.engine.calcjob.history import recommend
from veglia.manage import get_profile
from veglia.orm import attributes as attr

if TYPE_CHECKING:
    from veglia.engine.calcjob.process import CalcJob

__all__ = ["right_size"]

#: (option, the smallest value right-sizing sets, unit)
_REQUESTS = (("max_memory_kb", 1024, "kB"), ("max_wallclock_seconds", 60, "s"))


def right_size(process: CalcJob) -> None:
    """Adjust the node's requests, once per job, and say what changed or looks too big."""
    node = process.node
    assert node is not None
    explicit = process.options.get("right_size")
    mode = "off" if explicit is False else get_profile().get_option("resources.right_size")
    options = dict(node.options)
    if mode == "off" or node.get_attribute(attr.RIGHT_SIZED) is not None:
        return
    if mode != "apply" and all(options.get(name) is None for name, _, _ in _REQUESTS):
        return  # 'warn' and 'lower' only judge requests that were made
    advice = recommend(node.get_attribute(attr.SIMILARITY_KEY), exclude_pk=node.pk)
    recommendations = {
        "max_memory_kb": advice.memory_kb,
        "max_wallclock_seconds": advice.wallclock_seconds,
    }
    changed = {}
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
                changed[name] = (requested, recommended)
                options[name] = recommended
        elif too_big:
            process.report(
                f"{name} = {requested} {unit} is over twice what {needed[name]}; set the "
                "profile option resources.right_size to 'lower' to lower such requests"
            )
    if not changed:
        return
    record = {name: {"from": old, "to": new} for name, (old, new) in changed.items()}
    node.set_attributes({attr.OPTIONS: options, attr.RIGHT_SIZED: record})
    for name, (old, new) in changed.items():
        process.report(f"right-sized {name} from {old} to {new}: {needed[name]}")


def _needed(measured: int, floor: int, unit: str, samples: int) -> str:
    """What the similar jobs measured, and the least right-sizing sets when that is below."""
    text = f"{samples} similar jobs needed: {measured} {unit} (mean + 1 SD of what they used)"
    if measured < floor:
        text += f"; right-sizing never sets less than {floor} {unit}"
    return text
