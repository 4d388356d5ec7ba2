"""The elements of pipeline setups' sources, and the run each one got: the records the
daemon's intake keeps, and what ``pipeline show`` reads of them.

An element is recorded once per content: the unique ``(setup name, key)`` of its row, the
key being the sha256 of its identity and checksum, is what keeps two workers, or two
daemon hosts, from recording it twice. A row then goes ``new`` -> ``starting`` (claimed by
one worker, a compare-and-set on its state) -> ``started`` (its run exists, and names the
row in its ``pipeline_run`` attribute, in the commit that stores it), or ``refused`` when no
run could be made of it (``problem`` says why), or ``superseded`` when its content changed
before it started. A claim whose worker died before its run
was stored goes back to ``new``; one whose run was stored is marked ``started``.

An edit of a setup does not run again the elements earlier versions ran: it applies to the
elements seen from then on (and to changed content).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import PIPELINE_RUN
from veglia.storage import tables
from veglia.storage.times import as_utc, database_epoch, utcnow

if TYPE_CHECKING:
    from veglia.datasources import Element, Listing
    from veglia.pipeline_setups import PipelineSetup

__all__ = [
    "ELEMENT_KINDS",
    "ElementRow",
    "ListedElement",
    "Progress",
    "SourceState",
    "active_runs",
    "claim_new",
    "element_key",
    "list_elements",
    "listing_digest",
    "mark_notified_done",
    "mark_refused",
    "mark_started",
    "pipeline_progress",
    "record_listing",
    "record_source_error",
    "release_claims",
    "rewind_stale_claims",
    "run_element",
    "source_state",
]

ACTIVE_STATES = ("created", "running", "waiting")
#: Rows inserted per statement: well under SQLite's 32,766 bound parameters.
INSERT_CHUNK = 500


def element_key(identity: str, checksum: str) -> str:
    """The unique key of an element's content: the same identity and checksum, the same key."""
    return hashlib.sha256(f"{identity}\0{checksum}".encode()).hexdigest()


@dataclass(frozen=True)
class ElementRow:
    """A recorded element (what a worker needs to start its run)."""

    id: int
    setup_name: str
    identity: str
    checksum: str
    files: tuple[str, ...]
    metadata: dict[str, str]
    state: str
    process_id: int | None = None
    problem: str | None = None


def _now() -> Any:
    return database_epoch(get_storage().engine.dialect.name)


def _row(row: Any) -> ElementRow:
    return ElementRow(
        id=row.id,
        setup_name=row.setup_name,
        identity=row.identity,
        checksum=row.checksum,
        files=tuple(row.files or ()),
        metadata=dict(row.element_metadata or {}),
        state=row.state,
        process_id=row.process_id,
        problem=row.problem,
    )


# -- what a listing found ----------------------------------------------------------------------
def record_listing(setup: PipelineSetup, listing: Listing) -> int:
    """Record the listing's elements that are new (by identity and content) for the setup's
    name, and what the listing said; returns how many were new."""
    table = tables.pipeline_elements
    storage = get_storage()
    wanted = {element_key(e.identity, e.checksum): e for e in listing.elements}
    with storage.connection() as connection:
        known = set(
            connection.scalars(sa.select(table.c.key).where(table.c.setup_name == setup.name))
        )
        new = [_values(setup, key, e) for key, e in wanted.items() if key not in known]
        for start in range(0, len(new), INSERT_CHUNK):
            # Another host may record the same element meanwhile: its row stands.
            connection.execute(
                storage.insert(table).on_conflict_do_nothing(), new[start : start + INSERT_CHUNK]
            )
        # An element not started yet whose content changed since (or is being written
        # again) never runs as it was: its new content is another row.
        current = {e.identity for e in listing.elements} | set(listing.waiting)
        stale = [
            row.id
            for row in connection.execute(
                sa.select(table.c.id, table.c.identity, table.c.key).where(
                    table.c.setup_name == setup.name, table.c.state == "new"
                )
            )
            if row.identity in current and row.key not in wanted
        ]
        for start in range(0, len(stale), INSERT_CHUNK):
            connection.execute(
                sa.update(table)
                .where(table.c.id.in_(stale[start : start + INSERT_CHUNK]), table.c.state == "new")
                .values(state="superseded")
            )
    _write_source(
        setup.name,
        error=None,
        problems=list(listing.problems),
        waiting=list(listing.waiting),
        listed=len(listing.elements),
    )
    return len(new)


def _values(setup: PipelineSetup, key: str, element: Element) -> dict[str, Any]:
    return {
        "setup_name": setup.name,
        "setup_id": setup.pk,
        "identity": element.identity,
        "checksum": element.checksum,
        "key": key,
        "files": list(element.files),
        "element_metadata": dict(element.metadata),
        "state": "new",
        "seen": utcnow(),
    }


def record_source_error(name: str, error: str) -> None:
    """The source of ``name`` could not be listed: ``pipeline show`` says why."""
    _write_source(name, error=error)


def _write_source(name: str, **values: Any) -> None:
    table = tables.pipeline_sources
    values["polled"] = utcnow()
    storage = get_storage()
    with storage.connection() as connection:
        updated = connection.execute(
            sa.update(table).where(table.c.setup_name == name).values(**values)
        )
        if not updated.rowcount:
            defaults = {"problems": [], "waiting": [], "listed": 0}
            connection.execute(
                storage.insert(table)
                .values(setup_name=name, **{**defaults, **values})
                .on_conflict_do_nothing()
            )


# -- starting runs -----------------------------------------------------------------------------
def active_runs(name: str) -> int:
    """The runs of setup ``name`` not ended yet, claims about to become runs included."""
    table, nodes = tables.pipeline_elements, tables.nodes
    query = (
        sa.select(sa.func.count())
        .select_from(table)
        .outerjoin(nodes, nodes.c.id == table.c.process_id)
        .where(
            table.c.setup_name == name,
            (table.c.state == "starting")
            | ((table.c.state == "started") & nodes.c.process_state.in_(ACTIVE_STATES)),
        )
    )
    with get_storage().connection() as connection:
        return int(connection.scalar(query) or 0)


def claim_new(setup: PipelineSetup, limit: int | None, worker: str) -> list[ElementRow]:
    """Claim for ``worker`` up to ``limit`` (None: all) of the setup's new elements, oldest
    first, for its version ``setup``; an element another worker claimed meanwhile is not."""
    table = tables.pipeline_elements
    query = (
        sa.select(table.c.id)
        .where(table.c.setup_name == setup.name, table.c.state == "new")
        .order_by(table.c.id)
    )
    if limit is not None:
        query = query.limit(limit)
    claimed: list[ElementRow] = []
    with get_storage().connection() as connection:
        ids = list(connection.scalars(query))
        for start in range(0, len(ids), INSERT_CHUNK):
            # Compare and set: of two workers claiming at once, each row goes to one.
            rows = connection.execute(
                sa.update(table)
                .where(table.c.id.in_(ids[start : start + INSERT_CHUNK]), table.c.state == "new")
                .values(state="starting", claimed_by=worker, claimed_at=_now(), setup_id=setup.pk)
                .returning(*table.c)
            ).all()
            claimed += sorted((_row(row) for row in rows), key=lambda row: row.id)
    return claimed


def mark_started(started: Sequence[tuple[int, int]], worker: str) -> None:
    """The runs of claimed elements exist: ``(element id, process pk)`` pairs, one commit."""
    if not started:
        return
    table = tables.pipeline_elements
    with get_storage().connection() as connection:
        connection.execute(
            sa.update(table)
            .where(
                table.c.id == sa.bindparam("element"),
                table.c.claimed_by == worker,
                table.c.state == "starting",
            )
            .values(state="started", process_id=sa.bindparam("process")),
            [{"element": element, "process": process} for element, process in started],
        )


def mark_refused(element_id: int, problem: str, worker: str) -> None:
    """No run could be made of a claimed element (a file went missing, an input does not
    fit): it stays refused, with why, until its content changes."""
    table = tables.pipeline_elements
    with get_storage().connection() as connection:
        connection.execute(
            sa.update(table)
            .where(table.c.id == element_id, table.c.claimed_by == worker)
            .values(state="refused", problem=problem)
        )


def release_claims(element_ids: Iterable[int], worker: str) -> None:
    """Give claims back (new again) that this worker will not start now (it stops)."""
    table = tables.pipeline_elements
    with get_storage().connection() as connection:
        connection.execute(
            sa.update(table)
            .where(
                table.c.id.in_(list(element_ids)),
                table.c.claimed_by == worker,
                table.c.state == "starting",
            )
            .values(state="new", claimed_by=None, claimed_at=None)
        )


def run_element(process_id: int) -> int | None:
    """The element row a run names (its ``pipeline_run`` attribute), if it is a run."""
    nodes = tables.nodes
    with get_storage().connection() as connection:
        value = connection.scalar(
            sa.select(nodes.c.attributes[PIPELINE_RUN]).where(nodes.c.id == process_id)
        )
    return int(value["element"]) if isinstance(value, dict) and "element" in value else None


def rewind_stale_claims(
    name: str, stale_seconds: float, is_gone: Any = lambda worker: False
) -> int:
    """Claims of setup ``name`` whose worker is gone (``is_gone(worker)``, or silent for
    ``stale_seconds``): marked started when their run was stored, else new again. Returns
    how many went back to new."""
    table, nodes = tables.pipeline_elements, tables.nodes
    with get_storage().connection() as connection:
        claims = connection.execute(
            sa.select(
                table.c.id,
                table.c.claimed_by,
                (table.c.claimed_at < _now() - stale_seconds).label("stale"),
            ).where(table.c.setup_name == name, table.c.state == "starting")
        ).all()
        rewound = 0
        for claim in claims:
            if not (claim.stale or is_gone(claim.claimed_by)):
                continue
            run = connection.scalar(
                sa.select(nodes.c.id)
                .where(
                    nodes.c.attributes[(PIPELINE_RUN, "element")].as_integer() == claim.id,
                    nodes.c.node_type.like("process.%"),
                )
                .limit(1)
            )
            mine = (table.c.id == claim.id) & (table.c.claimed_by == claim.claimed_by)
            if run is not None:
                connection.execute(
                    sa.update(table).where(mine).values(state="started", process_id=run)
                )
                continue
            rewound += connection.execute(
                sa.update(table)
                .where(mine, table.c.state == "starting")
                .values(state="new", claimed_by=None, claimed_at=None)
            ).rowcount
    return rewound


# -- what pipeline show says -------------------------------------------------------------------
@dataclass(frozen=True)
class SourceState:
    """What the last look at a setup's source found."""

    polled: datetime | None = None
    error: str | None = None
    problems: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    listed: int = 0
    notified_done: str | None = None


def source_state(name: str) -> SourceState:
    table = tables.pipeline_sources
    with get_storage().connection() as connection:
        row = connection.execute(sa.select(table).where(table.c.setup_name == name)).first()
    if row is None:
        return SourceState()
    return SourceState(
        polled=as_utc(row.polled) if row.polled is not None else None,
        error=row.error,
        problems=tuple(row.problems or ()),
        waiting=tuple(row.waiting or ()),
        listed=row.listed,
        notified_done=row.notified_done,
    )


@dataclass(frozen=True)
class Progress:
    """Where a setup's elements stand.

    ``seen``: every element recorded (one per content); ``to_start``: waiting for a run (a
    cap, or the next look); ``running``; ``done`` (finished, exit status 0); ``failed``
    (finished otherwise, excepted or killed; and refused), each failed one as
    ``(identity, process pk or None, problem)``; ``seconds_per_run``: the mean time of the
    done runs, from creation to end.
    """

    seen: int = 0
    to_start: int = 0
    running: int = 0
    done: int = 0
    failed_total: int = 0
    #: The first ``failed_limit`` failures.
    failed: tuple[tuple[str, int | None, str], ...] = ()
    seconds_per_run: float | None = None
    #: The estimated seconds to finish ``to_start + running``.
    eta_seconds: float | None = None

    @property
    def all_ended(self) -> bool:
        return self.seen > 0 and self.to_start == 0 and self.running == 0


def _kind_of() -> Any:
    """What an element counts as (one of :data:`ELEMENT_KINDS`), as an SQL expression over
    its row joined to its run's node."""
    table, nodes = tables.pipeline_elements, tables.nodes
    return sa.case(
        (table.c.state == "superseded", "superseded"),
        (table.c.state.in_(("new", "starting")), "to_start"),
        (table.c.state == "refused", "failed"),
        (nodes.c.process_state.is_(None) | nodes.c.process_state.in_(ACTIVE_STATES), "running"),
        ((nodes.c.process_state == "finished") & (nodes.c.exit_status == 0), "done"),
        else_="failed",
    ).label("kind")


def _seconds_between(start: Any, end: Any) -> Any:
    if get_storage().engine.dialect.name == "postgresql":
        return sa.func.extract("epoch", end - start)
    return (sa.func.julianday(end) - sa.func.julianday(start)) * 86400.0


def pipeline_progress(name: str, parallel: int | None = None, failed_limit: int = 50) -> Progress:
    """The counts of setup ``name``'s elements, its first ``failed_limit`` failures, and the
    estimated time to finish: the runs left times the mean time of a done run, over how many
    run at once (``parallel``: the setup's cap, else as many as run now). Counted in the
    database: a setup of 10,000 elements reads a few rows."""
    table, nodes = tables.pipeline_elements, tables.nodes
    kind = _kind_of()
    joined = table.outerjoin(nodes, nodes.c.id == table.c.process_id)
    duration = sa.case((kind == "done", _seconds_between(nodes.c.ctime, nodes.c.mtime)))
    query = (
        sa.select(kind, sa.func.count(), sa.func.avg(duration))
        .select_from(joined)
        .where(table.c.setup_name == name)
        .group_by(kind)
    )
    with get_storage().connection() as connection:
        counts = {row[0]: (int(row[1]), row[2]) for row in connection.execute(query)}
    count = {k: counts.get(k, (0, None))[0] for k in ELEMENT_KINDS}
    failed: list[tuple[str, int | None, str]] = []
    if count["failed"] and failed_limit > 0:
        listed, _ = list_elements(name, "failed", limit=failed_limit)
        failed = [(e.identity, e.process_id, e.problem or "") for e in listed]
    mean = counts.get("done", (0, None))[1]
    mean = float(mean) if mean is not None else None
    to_start, running = count["to_start"], count["running"]
    eta = None
    if mean is not None:
        eta = mean * (to_start + running) / max(1, parallel or running or 1)
    return Progress(
        seen=sum(count.values()) - count["superseded"],
        to_start=to_start,
        running=running,
        done=count["done"],
        failed_total=count["failed"],
        failed=tuple(failed),
        seconds_per_run=mean,
        eta_seconds=eta,
    )


#: What an element is counted as in :class:`Progress` (``superseded`` ones are not counted).
ELEMENT_KINDS = ("to_start", "running", "done", "failed", "superseded")


@dataclass(frozen=True)
class ListedElement:
    """An element as the web view lists it: its kind (one of :data:`ELEMENT_KINDS`), its
    run and why it failed."""

    id: int
    identity: str
    kind: str
    #: Its row's state (new, starting, started, refused, superseded).
    state: str
    seen: datetime | None
    process_id: int | None
    node_type: str | None
    process_state: str | None
    exit_status: int | None
    #: Why it failed or was refused (None unless its kind is failed).
    problem: str | None


def list_elements(
    name: str, kind: str | None = None, limit: int = 100, offset: int = 0
) -> tuple[list[ListedElement], int]:
    """Setup ``name``'s elements of ``kind`` (None: all), oldest first, ``limit`` of them
    from ``offset``, and how many there are: each counted as :func:`pipeline_progress`
    counts it, so a page of 10,000 elements reads only its own."""
    table, nodes = tables.pipeline_elements, tables.nodes
    kind_of = _kind_of()
    where = [table.c.setup_name == name]
    if kind is not None:
        where.append(kind_of == kind)
    joined = table.outerjoin(nodes, nodes.c.id == table.c.process_id)
    query = (
        sa.select(
            table.c.id,
            table.c.identity,
            table.c.state,
            table.c.seen,
            table.c.problem,
            table.c.process_id,
            nodes.c.node_type,
            nodes.c.process_state,
            nodes.c.exit_status,
            nodes.c.exit_message,
            kind_of,
        )
        .select_from(joined)
        .where(*where)
        .order_by(table.c.id)
        .limit(limit)
        .offset(offset)
    )
    count = sa.select(sa.func.count()).select_from(joined).where(*where)
    with get_storage().connection() as connection:
        rows = connection.execute(query).all()
        total = int(connection.scalar(count) or 0)
    listed = []
    for row in rows:
        problem = None
        if row.kind == "failed":
            problem = (
                row.problem or "no run could be made"
                if row.state == "refused"
                else row.exit_message or _ended_how(row.process_state, row.exit_status)
            )
        listed.append(
            ListedElement(
                id=row.id,
                identity=row.identity,
                kind=row.kind,
                state=row.state,
                seen=as_utc(row.seen) if row.seen is not None else None,
                process_id=row.process_id,
                node_type=row.node_type,
                process_state=row.process_state,
                exit_status=row.exit_status,
                problem=problem,
            )
        )
    return listed, total


def _ended_how(state: str | None, exit_status: int | None) -> str:
    if state == "finished":
        return f"finished with exit status {exit_status}"
    return f"{state or 'unknown'}"


def listing_digest(keys: Sequence[str]) -> str:
    """One digest for a listing's elements, to notify once per complete set."""
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


def mark_notified_done(name: str, digest: str) -> bool:
    """Record that ``digest``'s completion was told; False when it was already (by this or
    another worker)."""
    table = tables.pipeline_sources
    with get_storage().connection() as connection:
        updated = connection.execute(
            sa.update(table)
            .where(
                table.c.setup_name == name,
                (table.c.notified_done.is_(None)) | (table.c.notified_done != digest),
            )
            .values(notified_done=digest)
        )
    return updated.rowcount == 1
