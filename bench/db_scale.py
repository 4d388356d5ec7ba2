#!/usr/bin/env python3
"""How the CLI and the daemon's queries fare on a database of 100,000 nodes.

Fills a fresh profile (SQLite, PostgreSQL, or both) with about N nodes in bulk (see
``db_fill.py``: calc jobs in every state with their attributes, inputs, outputs, links, logs,
file records, workflows calling some of them, groups, leases), then times:

- the CLI, run whole as a user runs it (``veglia process list``, ``process list -a -l 50``,
  ``process list -a`` to a pipe, as a pager reads it, ``process show PK``, ``node show PK``):
  best and median wall time and the CPU time of the command (children's rusage);
- the daemon's recurring queries (the worker's look for submitted processes, the
  reconciler's stranded processes, lease renewal, live workers, the child watcher, control
  requests, outage marks, the caching and right-sizing look-ups): best wall time and CPU;

and prints, for each command and daemon query, the number of SQL statements it made and
the plan the database chose for each (SQLite ``EXPLAIN QUERY PLAN``, PostgreSQL
``EXPLAIN``), flagging full scans of ``nodes`` and ``links``.

    python bench/db_scale.py                       # 100,000 nodes, SQLite and PostgreSQL
    python bench/db_scale.py --backend sqlite -n 60000
    python bench/db_scale.py --smoke               # 3,000 nodes, both, one repeat

Before and after (commit b8eed10 and the next) with 100,000 nodes: 16,666 calc jobs and
1,667 workflows, 2 % of them active, 18,333 processes in all. The machine (2 cores) was
shared, at a load of 8 to 16, so wall times were 3 to 6 times the CPU times and are not
given; CPU is that of the whole ``veglia`` process (children's rusage), median of 3, in s.
The database server's own time is not in it (PostgreSQL's plans are printed instead).

    command                           SQLite before/after   PostgreSQL before/after  SQL
    process list (367 active)              1.02 / 0.88           1.21 / 0.92          3
    process list -a -l 50                  0.79 / 0.92*          1.02 / 1.06*         3
    process list -a (18,333 rows)         11.57 / 1.60          13.23 / 1.73          3
    process list -a -P pk,state --raw      2.00 / 1.40           2.59 / 1.55          3
    process show (calc job)                1.08 / 0.83           1.18 / 1.05          6
    node show                              1.03 / 0.90           1.16 / 1.04          5
    (* the load rose between the runs; interleaved A/B below)

    The same on SQLite, before and after run in turn (3 times each, median CPU), so both
    saw the same load: process list 1.31 / 1.01, -a -l 50 1.02 / 0.83, -a 13.21 / 1.51,
    -a -P pk,state --raw 2.10 / 1.37, process show 1.09 / 0.85, process show of a running
    workflow 1.22 / 0.94, node show 1.06 / 0.91.

    daemon query, wall ms          SQLite before/after   PostgreSQL before/after  SQL
    right-sizing: similar jobs           320 / 0.6             29 / 0.9             1
    caching: a job with no equal         290 / 1.5            (all rows) / 1.2      1
    (CPU in this process, SQLite: 40 ms / 1.5 ms a look-up, both; 42 / 3.6 ms for the
    usage of 330 similar jobs. PostgreSQL before: ``Index Scan using pk_nodes`` filtering
    every row; a miss reads the whole table.)
    the others (worker, reconcile, leases, child watcher, control, outages): 1 to 2
    statements each, on the primary key or the (process_state, node_type) index, under
    5 ms CPU on both databases before and after.

Where the time went, and what changed:

- ``process list -a`` spent 9.5 s of its 11.6 in rich laying out 18,333 rows, and most of
  the rest decoding every job's whole attributes (trace record, last job info: about 2 KB
  each) for the few its columns show. Long tables are now laid out by veglia (the same
  text), and the list reads only the attributes its columns name (``ListColumn.reads``).
- Every command imported Alembic and read the migration scripts to check the schema
  (0.15 to 0.2 s); the recorded revision is now compared with ``SCHEMA_HEAD`` first.
- The caching and right-sizing look-ups filtered on a JSON attribute with the key as a
  bound parameter, so no index could serve them: SQLite read every finished calc job
  through (process_state, node_type), PostgreSQL walked the primary key. Migration 0006
  indexes ``cache_hash`` and ``similarity_key`` as expressions, and the look-ups write the
  same expression (``veglia.storage.attribute_text``): SQLite ``SEARCH nodes USING INDEX
  ix_nodes_cache_hash (<expr>=?)``, PostgreSQL ``Index Scan using ix_nodes_cache_hash``.
- ``process show`` of a running workflow asked the history once per running step (N+1);
  now once per kind of step.
- The plans of ``process list``/``show``, ``node show`` and the daemon's queries use
  indexes throughout; the one full scan left is PostgreSQL's parallel sequential scan of
  ``nodes`` and ``links`` for ``process list -a``, which returns a fifth of the table and
  is the cheapest plan for that (it chooses ``Index Scan Backward using ix_nodes_ctime``
  with ``-l``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")
PROFILE = "dbscale"


def _cli_commands(process: int, workflow: int, data: int) -> list[tuple[str, list[str]]]:
    return [
        ("process list", ["process", "list"]),
        ("process list -a -l 50", ["process", "list", "-a", "-l", "50"]),
        ("process list -a (all, piped)", ["process", "list", "-a"]),
        ("process list -a -P pk,state --raw", ["process", "list", "-a", "-P", "pk,state", "--raw"]),
        (f"process show {process}", ["process", "show", str(process)]),
        (f"process show {workflow} (active workflow)", ["process", "show", str(workflow)]),
        (f"node show {data}", ["node", "show", str(data)]),
    ]


def time_cli(args: list[str], repeat: int) -> tuple[float, float, float]:
    """(best wall, median wall, median CPU) of ``veglia -p dbscale ARGS``, output to a pipe."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([VEGLIA, "-p", PROFILE, *args], check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), statistics.median(walls), statistics.median(cpus)


class Recorder:
    """The SQL statements an engine runs while ``recording``."""

    def __init__(self) -> None:
        import sqlalchemy as sa

        self.recording = False
        self.statements: list[tuple[str, Any]] = []
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if self.recording:
            self.statements.append((statement, parameters))

    def run(self, call: Callable[[], Any]) -> list[tuple[str, Any]]:
        self.statements, self.recording = [], True
        try:
            call()
        finally:
            self.recording = False
        return self.statements


def explain(engine: Any, statement: str, parameters: Any) -> list[str]:
    """The database's plan for one statement, one line per step."""
    postgres = engine.dialect.name == "postgresql"
    prefix = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
    if not statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "WITH")):
        return []
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(prefix + statement, parameters).all()
        connection.rollback()
    if postgres:
        return [row[0] for row in rows]
    return [f"{'  ' * (row[1] > 0)}{row[3]}" for row in rows]


def is_full_scan(line: str) -> bool:
    """A plan step reading every row of a big table."""
    text = line.strip()
    for table in ("nodes", "links", "logs", "repository_files"):
        if text.startswith(f"SCAN {table}") and "USING" not in text:
            return True
        if f"Seq Scan on {table}" in text:
            return True
    return False


def cli_in_process(args: list[str]) -> Callable[[], Any]:
    def call() -> None:
        from click.testing import CliRunner

        from veglia.cli.main import cli

        result = CliRunner().invoke(cli, ["-p", PROFILE, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output

    return call


def daemon_queries() -> list[tuple[str, Callable[[], Any]]]:
    """The queries a running daemon makes again and again, as its code makes them."""
    import sqlalchemy as sa

    from veglia.engine.calcjob import caching, history
    from veglia.engine.daemon import leases
    from veglia.engine.daemon.child_watcher import ChildWatcher
    from veglia.engine.daemon.control import apply_database_requests
    from veglia.engine.daemon.outages import OutageWatcher
    from veglia.manage import get_storage
    from veglia.orm.queries import active_process_pks
    from veglia.storage.models import ProcessLease

    with get_storage().session() as session:
        held = session.execute(sa.select(ProcessLease.process_id, ProcessLease.worker)).all()
    worker = held[0][1] if held else "nobody"
    mine = [pk for pk, holder in held if holder == worker]
    active = {pk: type("P", (), {"paused": True})() for pk in mine}
    held_here = set(mine)

    class Holder:
        def __str__(self) -> str:
            return worker

    return [
        ("worker: submitted processes (0.5 s)", lambda: active_process_pks(daemon=True)),
        ("reconcile: stranded (5 s)", lambda: leases.unleased_active(30.0)),
        ("leases: renew a worker's", lambda: leases.renew(Holder(), mine)),  # type: ignore[arg-type]
        ("presence: live workers", lambda: leases.live_workers(30.0)),
        ("child watcher: ended children", lambda: ChildWatcher()._terminated(mine)),
        (
            "control requests (no broker)",
            lambda: apply_database_requests(None, held_here.__contains__, lambda *_: None),
        ),
        ("outages: paused for an outage", lambda: OutageWatcher(active)._paused_for_outage()),
        ("caching: find an equal job", lambda: caching.find_cached("f" * 64, 0)),
        ("right-sizing: similar jobs", lambda: history.similar_usage("core.shell||x|1")),
    ]


def time_call(call: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(best wall, median CPU) of an in-process call."""
    walls, cpus = [], []
    for _ in range(repeat):
        cpu, start = time.process_time(), time.perf_counter()
        call()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), statistics.median(cpus)


def bench(backend: str, nodes: int, repeat: int, plans: bool) -> None:
    postgresql = backend == "postgresql"
    with bench_profile("veglia-dbscale-", name=PROFILE, broker=False, postgresql=postgresql):
        # Lazy: the profile (VEGLIA_HOME) must exist before veglia reads its config.
        import sqlalchemy as sa
        from db_fill import Filler

        import veglia
        from veglia.manage import get_storage
        from veglia.storage.models import Node

        veglia.load_profile(PROFILE)
        engine = get_storage().engine
        counts = Filler(engine).fill(nodes)
        with engine.connect() as connection:
            processes = connection.scalar(
                sa.select(sa.func.count()).where(Node.node_type.like("process%"))
            )
            job = connection.scalar(
                sa.select(sa.func.max(Node.id)).where(Node.node_type == "process.calcjob")
            )
            workflow = connection.scalar(
                sa.select(sa.func.max(Node.id)).where(Node.node_type == "process.workflow")
            )
            data = connection.scalar(
                sa.select(sa.func.max(Node.id)).where(Node.node_type == "data.str")
            )
            schema = connection.scalar(sa.text("SELECT version_num FROM alembic_version"))
        print(f"\n== {backend}: {counts} ({processes} processes), schema {schema}")
        recorder = Recorder()
        print(f"{'CLI command':42} {'best s':>7} {'median':>7} {'CPU s':>7} {'SQL':>5}")
        rows = []
        for name, args in _cli_commands(job, workflow, data):
            best, median, cpu = time_cli(args, repeat)
            statements = recorder.run(cli_in_process(args))
            print(f"{name:42} {best:7.3f} {median:7.3f} {cpu:7.3f} {len(statements):5d}")
            rows.append((name, statements))
        print(f"{'daemon query':42} {'best s':>7} {'':>7} {'CPU s':>7} {'SQL':>5}")
        for name, call in daemon_queries():
            best, cpu = time_call(call, repeat)
            statements = recorder.run(call)
            print(f"{name:42} {best:7.4f} {'':>7} {cpu:7.4f} {len(statements):5d}")
            rows.append((name, statements))
        if plans:
            print_plans(engine, rows)


def print_plans(engine: Any, rows: list[tuple[str, list[tuple[str, Any]]]]) -> None:
    print("\nPlans (!! marks a full scan of a big table):")
    shown: set[str] = set()
    for name, statements in rows:
        for statement, parameters in statements:
            if statement in shown:
                continue
            shown.add(statement)
            plan = explain(engine, statement, parameters)
            if not plan:
                continue
            flat = " ".join(statement.split())
            print(f"\n[{name}] {flat[:300]}{'...' if len(flat) > 300 else ''}")
            for line in plan:
                print(f"  {'!!' if is_full_scan(line) else '  '} {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("-n", "--nodes", type=int, default=100_000)
    parser.add_argument("-r", "--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="3,000 nodes, one repeat.")
    parser.add_argument("--no-plans", action="store_true", help="Do not print query plans.")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    if args.smoke:
        args.nodes, args.repeat = 3000, 1
    sys.path.insert(0, str(Path(__file__).parent))
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    for backend in backends:
        bench(backend, args.nodes, args.repeat, plans=not args.no_plans)


if __name__ == "__main__":
    main()
