"""Who runs an active process: a lease row per process, renewed by its worker.

A daemon worker takes a process only through :func:`acquire`: one conditional statement
that succeeds when nobody holds the process, when the holder's heartbeat is older than
the lease timeout, or when the holder is a worker on this host whose process is gone. A
live lease is never taken, so a process never runs in two workers, on one host or many.
Heartbeats are on the database's clock, so hosts need not agree on the time.
"""

from __future__ import annotations

import functools
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from veglia.manage import get_storage
from veglia.orm.attributes import DAEMON
from veglia.storage.tables import nodes, process_leases
from veglia.storage.times import database_epoch

__all__ = [
    "Lease",
    "WorkerId",
    "acquire",
    "held_by_the_dead",
    "holder",
    "live_workers",
    "release",
    "renew",
    "this_worker",
    "unleased_active",
]

ACTIVE_STATES = ("created", "running", "waiting")


@dataclass(frozen=True)
class WorkerId:
    """A worker: its host, its pid, a token drawn when it started, and where its pid means
    something (the kernel boot and pid namespace: hosts, containers, may share a name)."""

    host: str
    pid: int
    token: str
    pid_space: str

    def __str__(self) -> str:
        return f"{self.host}/{self.pid}/{self.token}/{self.pid_space}"

    @staticmethod
    def token_of(worker: str) -> str:
        """The token of a worker written as ``str(WorkerId)`` (a lease's holder)."""
        return worker.split("/")[-2]


@functools.lru_cache(maxsize=1)
def _pid_space() -> str:
    import hashlib
    from pathlib import Path

    parts: list[str] = []
    readers: tuple[Callable[[], str], ...] = (
        lambda: Path("/proc/sys/kernel/random/boot_id").read_text(),
        lambda: os.readlink("/proc/self/ns/pid"),
    )
    for read in readers:
        try:
            parts.append(read())
        except OSError:
            parts.append(uuid.uuid4().hex)  # unknown: matches no other worker
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:10]


@functools.lru_cache(maxsize=1)
def _worker_for(pid: int) -> WorkerId:
    return WorkerId(socket.gethostname(), pid, uuid.uuid4().hex[:12], _pid_space())


def this_worker() -> WorkerId:
    """This process as a lease holder (a forked child gets an id of its own)."""
    return _worker_for(os.getpid())


@dataclass(frozen=True)
class Lease:
    process_id: int
    worker: str
    host: str
    pid: int
    #: Seconds since the holder last renewed it, on the database's clock.
    age: float
    live: bool


def _now() -> Any:
    """The database's clock in epoch seconds, as an SQL expression."""
    return database_epoch(get_storage().engine.dialect.name)


def local_holder_gone(worker: str, pid: int) -> bool:
    """A worker of this host that no longer runs: no need to wait for its lease to expire."""
    if not worker.endswith(f"/{_pid_space()}"):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            status = handle.read()
    except OSError:
        return True
    return status.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]  # a zombie runs nothing


@functools.lru_cache(maxsize=2)
def _insert_lease(dialect: str) -> Any:
    """The lease for a process none holds, built once (a worker takes one for every job)."""
    now = _now()
    columns = ("process_id", "worker", "host", "pid")
    return (
        get_storage()
        .insert(process_leases)
        .values(**{name: sa.bindparam(name) for name in columns}, heartbeat=now, acquired=now)
        .on_conflict_do_nothing()
    )


_RELEASE = sa.delete(process_leases).where(
    process_leases.c.process_id == sa.bindparam("pk"),
    process_leases.c.worker == sa.bindparam("worker"),
)


def acquire(pk: int, worker: WorkerId, timeout: float) -> bool:
    """Take the lease on process ``pk`` for ``worker``; False when another worker holds it."""
    values = {
        "process_id": pk,
        "worker": str(worker),
        "host": worker.host,
        "pid": worker.pid,
    }
    storage = get_storage()
    with storage.connection() as connection:
        inserted = connection.execute(_insert_lease(storage.engine.dialect.name), values)
        if inserted.rowcount == 1:
            return True
        now = _now()
        row = connection.execute(
            sa.select(
                process_leases.c.worker,
                process_leases.c.host,
                process_leases.c.pid,
                (process_leases.c.heartbeat < now - timeout).label("expired"),
            ).where(process_leases.c.process_id == pk)
        ).first()
        if row is None:  # released in between: try again from the start
            return acquire(pk, worker, timeout)
        mine = row.worker == str(worker)
        if not (mine or row.expired or local_holder_gone(row.worker, row.pid)):
            return False
        # Compare and swap on the holder seen: of two workers taking over, one wins.
        taken = connection.execute(
            sa.update(process_leases)
            .where(process_leases.c.process_id == pk, process_leases.c.worker == row.worker)
            .values(**values, heartbeat=now, acquired=process_leases.c.acquired if mine else now)
        )
        return taken.rowcount == 1


def renew(worker: WorkerId, pks: Iterable[int]) -> set[int]:
    """Renew ``worker``'s leases; the processes among ``pks`` it still holds.

    Every lease of the worker is renewed in one statement, whatever their number (a worker
    may hold 100,000 dehydrated processes: a list of their ids would pass SQLite's limit
    on a statement's parameters); a lease it holds on a process not in ``pks`` would go
    with it, but it has none (each is released when its process leaves the worker).
    """
    wanted = set(pks)
    if not wanted:
        return set()
    with get_storage().connection() as connection:
        connection.execute(
            sa.update(process_leases)
            .where(process_leases.c.worker == str(worker))
            .values(heartbeat=_now())
        )
        held = connection.scalars(
            sa.select(process_leases.c.process_id).where(process_leases.c.worker == str(worker))
        )
        return wanted.intersection(held)


def release(pk: int, worker: WorkerId) -> None:
    with get_storage().connection() as connection:
        connection.execute(_RELEASE, {"pk": pk, "worker": str(worker)})


def holder(pk: int, timeout: float) -> Lease | None:
    """The lease on process ``pk``, if there is one (live or not)."""
    now = _now()
    with get_storage().connection() as connection:
        row = connection.execute(
            sa.select(
                process_leases.c.worker,
                process_leases.c.host,
                process_leases.c.pid,
                (now - process_leases.c.heartbeat).label("age"),
            ).where(process_leases.c.process_id == pk)
        ).first()
    if row is None:
        return None
    gone = local_holder_gone(row.worker, row.pid)
    age = float(row.age)
    return Lease(pk, row.worker, row.host, row.pid, age, live=age <= timeout and not gone)


def live_workers(timeout: float) -> int:
    """How many workers, on any host, renewed a lease within ``timeout`` seconds."""
    query = sa.select(sa.func.count(sa.distinct(process_leases.c.worker))).where(
        process_leases.c.heartbeat >= _now() - timeout
    )
    with get_storage().connection() as connection:
        return int(connection.scalar(query) or 0)


def unleased_active(timeout: float) -> list[int]:
    """Active daemon processes that no live worker holds (a lease expired, or held by a
    worker of this host that is gone): stranded, unless a task for them waits in the
    broker."""
    never, dead = _unheld_active(timeout)
    return sorted([*never, *dead])


def held_by_the_dead(timeout: float) -> list[int]:
    """Active daemon processes whose lease is held by a worker that stopped (its lease
    expired, or it was of this host and is gone): stranded for sure, whatever waits in the
    broker, since a worker acknowledges a dehydrated process's task."""
    return sorted(_unheld_active(timeout)[1])


def _unheld_active(timeout: float) -> tuple[list[int], list[int]]:
    """Active daemon processes with no lease, and those whose holder stopped."""
    now = _now()
    leased = sa.select(process_leases.c.process_id)
    active = sa.and_(
        nodes.c.process_state.in_(ACTIVE_STATES), nodes.c.attributes[DAEMON].as_boolean().is_(True)
    )
    with get_storage().connection() as connection:
        never = connection.scalars(
            sa.select(nodes.c.id).where(active, nodes.c.id.not_in(leased))
        ).all()
        held = connection.execute(
            sa.select(
                process_leases.c.process_id,
                process_leases.c.worker,
                process_leases.c.pid,
                (process_leases.c.heartbeat < now - timeout).label("expired"),
            )
            .join(nodes, nodes.c.id == process_leases.c.process_id)
            .where(active)
        ).all()
    # One look at each holder, not at each of the hundreds of processes it holds.
    holders = {(worker, pid) for _, worker, pid, expired in held if not expired}
    gone = {holder for holder in holders if local_holder_gone(*holder)}
    dead = [pk for pk, worker, pid, expired in held if expired or (worker, pid) in gone]
    return list(never), dead
