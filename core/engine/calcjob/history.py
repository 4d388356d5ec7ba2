"""What finished jobs tell about new ones: peak memory, run time, queue waits, durations.

Jobs are *similar* when they share a ``similarity_key``: by default the calculation, the
code and the computer (see :meth:`CalcJob.similarity_key`; ``core.shell`` adds its command
line when it has no code). The figures come from the
``usage`` each job recorded (a plugin's measurement through ``collect_trace``, the batch
system's accounting such as SLURM's ``sacct``, or the job script's ``/usr/bin/time``
measurement), and from the times the engine
records on every job.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import (
    CODE,
    MEMORY_AFTER_OOM_KB,
    SIMILARITY_KEY,
    STARTED_AT,
    SUBMITTED_AT,
    USAGE,
)
from veglia.orm.queries import has_attribute
from veglia.storage.attribute_text import attribute_text
from veglia.storage.tables import nodes

__all__ = [
    "FINISHED_OK",
    "Distribution",
    "Recommendation",
    "code_usage",
    "memory_needed_after_oom",
    "recommend",
    "similar_durations",
    "similar_durations_of",
    "similar_usage",
    "similar_waits",
]

#: Fewer finished jobs than this give no recommendation: the spread would mean nothing.
MIN_SAMPLES = 3
HISTORY_LIMIT = 500


@dataclass(frozen=True)
class Distribution:
    """Summary of one measured quantity over similar jobs."""

    count: int
    mean: float
    stdev: float
    minimum: float
    maximum: float
    median: float

    @classmethod
    def of(cls, values: list[float]) -> Distribution | None:
        if not values:
            return None
        return cls(
            count=len(values),
            mean=statistics.fmean(values),
            stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
            minimum=min(values),
            maximum=max(values),
            median=statistics.median(values),
        )

    @property
    def recommended(self) -> float:
        """Mean plus one standard deviation: most similar jobs fit, few ask far too much."""
        return self.mean + self.stdev


@dataclass(frozen=True)
class Recommendation:
    """Requests suggested by the history of similar jobs (None: too few samples)."""

    samples: int
    memory_kb: int | None
    wallclock_seconds: int | None


def _rows(where: list[Any], columns: list[Any], limit: int = HISTORY_LIMIT) -> list[Any]:

    query = sa.select(*columns).where(*where).order_by(nodes.c.id.desc()).limit(limit)
    # A Core connection, not an ORM session: the rows are plain values, and a session's
    # set-up was most of a look-up's time (a workflow's progress makes one per kind of step).
    with get_storage().connection() as connection:
        return list(connection.execute(query).all())


def similar_usage(key: str, exclude_pk: int | None = None) -> list[dict[str, Any]]:
    """``usage`` of the similar jobs that finished successfully, newest first."""

    where = [
        nodes.c.node_type == "process.calcjob",
        nodes.c.process_state == "finished",
        nodes.c.exit_status == 0,
        attribute_text(nodes.c.attributes, SIMILARITY_KEY) == key,
    ]
    if exclude_pk is not None:
        where.append(nodes.c.id != exclude_pk)
    rows = _rows(where, [nodes.c.attributes[USAGE]])
    return [row[0] for row in rows if isinstance(row[0], dict)]


def recommend(key: str, exclude_pk: int | None = None) -> Recommendation:
    """Memory and wall time to ask for: mean + 1 SD of what similar jobs used."""
    usage = similar_usage(key, exclude_pk)
    memory = Distribution.of([u["peak_memory_kb"] for u in usage if u.get("peak_memory_kb")])
    runtime = Distribution.of([u["runtime_seconds"] for u in usage if u.get("runtime_seconds")])
    enough = len(usage) >= MIN_SAMPLES
    return Recommendation(
        samples=len(usage),
        memory_kb=math.ceil(memory.recommended) if enough and memory else None,
        wallclock_seconds=math.ceil(runtime.recommended) if enough and runtime else None,
    )


def memory_needed_after_oom(key: str) -> float | None:
    """The mean memory that similar jobs, once killed for memory, finally finished with."""

    rows = _rows(
        [
            nodes.c.node_type == "process.workflow",
            nodes.c.process_state == "finished",
            nodes.c.exit_status == 0,
            attribute_text(nodes.c.attributes, SIMILARITY_KEY) == key,
        ],
        [nodes.c.attributes[MEMORY_AFTER_OOM_KB]],
    )
    values = [row[0] for row in rows if isinstance(row[0], int | float)]
    return statistics.fmean(values) if values else None


def similar_waits(key: str) -> Distribution | None:
    """Seconds similar jobs spent queued before they started."""

    rows = _rows(
        [
            nodes.c.node_type == "process.calcjob",
            attribute_text(nodes.c.attributes, SIMILARITY_KEY) == key,
            has_attribute(STARTED_AT),
        ],
        [nodes.c.attributes[SUBMITTED_AT], nodes.c.attributes[STARTED_AT]],
    )
    waits = [float(b) - float(a) for a, b in rows if a is not None and b is not None]
    return Distribution.of(waits)


#: A successful run, with its constants written into the SQL rather than bound: the
#: partial indexes of the successful runs (migration 0014) serve only a condition that
#: implies theirs, which PostgreSQL cannot tell from bound values in the generic plan of a
#: statement prepared after a few runs (the daemon's, the web view's).
FINISHED_OK = (
    nodes.c.process_state == sa.literal("finished", literal_execute=True),
    nodes.c.exit_status == sa.literal(0, literal_execute=True),
)


def _similar(process_type: str | None, key: str | None) -> list[Any]:
    """The successful runs of a type (with a similarity key), which the indexes
    ``ix_nodes_finished_ok_type`` and ``_key`` give newest first."""
    where = [nodes.c.process_type == process_type, *FINISHED_OK]
    if key is not None:
        where.append(attribute_text(nodes.c.attributes, SIMILARITY_KEY) == key)
    return where


def similar_durations(
    process_type: str, key: str | None = None, limit: int = HISTORY_LIMIT
) -> Distribution | None:
    """Seconds from creation to end of the ``limit`` latest similar processes that finished
    successfully."""
    rows = _rows(_similar(process_type, key), [nodes.c.ctime, nodes.c.mtime], limit)
    return Distribution.of([(end - start).total_seconds() for start, end in rows])


def similar_durations_of(
    kinds: Iterable[tuple[str | None, str | None]], limit: int = HISTORY_LIMIT
) -> dict[tuple[str | None, str | None], Distribution | None]:
    """:func:`similar_durations` of each kind (process type, similarity key), in one
    statement: a workflow's estimate asks for every kind of its running steps at once."""
    kinds = list(dict.fromkeys(kinds))
    if not kinds:
        return {}
    parts = [
        sa.select(sa.literal(index).label("kind"), nodes.c.ctime, nodes.c.mtime)
        .where(*_similar(*kind))
        .order_by(nodes.c.id.desc())
        .limit(limit)
        .subquery()
        for index, kind in enumerate(kinds)
    ]
    # Each part wrapped: SQLite allows no LIMIT on a member of a UNION itself.
    query = sa.union_all(*(sa.select(part) for part in parts))
    found: dict[int, list[float]] = {index: [] for index in range(len(kinds))}
    with get_storage().connection() as connection:
        for index, start, end in connection.execute(query):
            found[index].append((end - start).total_seconds())
    return {kind: Distribution.of(found[index]) for index, kind in enumerate(kinds)}


def code_usage(code_pk: int) -> dict[str, list[dict[str, Any]]]:
    """``usage`` of the successful jobs of a code, by similarity key."""

    rows = _rows(
        [
            nodes.c.node_type == "process.calcjob",
            nodes.c.process_state == "finished",
            nodes.c.exit_status == 0,
            nodes.c.attributes[CODE]["pk"].as_integer() == code_pk,
        ],
        [nodes.c.attributes[SIMILARITY_KEY], nodes.c.attributes[USAGE]],
    )
    grouped: dict[str, list[dict[str, Any]]] = {}
    for key, usage in rows:
        if isinstance(usage, dict):
            grouped.setdefault(str(key), []).append(usage)
    return grouped
