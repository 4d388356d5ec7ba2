#!/usr/bin/env python3
"""How fast ``veglia web`` answers on a database of 100,000 nodes, and what live pages cost it.

Fills a fresh profile (SQLite by default, or PostgreSQL) with about N nodes in bulk, as
``db_scale.py`` does (``db_fill.py``), plus one running workflow that called 2,000 calc jobs
over the last day and, on one of its finished jobs, a resource trace of 2,000 samples; then
starts the real app (``create_app``) under uvicorn in a subprocess, and:

1. asks each page and its ``/api`` answer (the overview, the process search with and
   without filters, the big workflow, the traced job, node pages) a few times, at least a
   second apart so the live hub's cache never answers, and prints the server's own time
   (the ``Server-Timing`` header, from the request to the first byte: the load and the
   rendering), best and median, the size of the answer, and the SQL statements it made
   (a ``before_cursor_execute`` listener in the server);
2. opens 50 live streams (``/live/...``, 10 on each of 5 views) for some seconds while a
   writer changes processes of the workflow and the traced job five times a second, and
   prints, per view, the hub's rounds, the loads and SQL statements a second (the hub reads
   each kind of view at most once a second however many watch it; one load is several
   statements), the updates the streams received, and the CPU the server spent;
3. the same streams with no writer (quiet, ``--quiet`` seconds, counted once the views
   caught up): only the change probe reads the database, one statement a second;
4. one stream on each of 50 different job pages while a writer changes ten of them, five
   changes a second: one round of job loads a second, loading only the jobs changed;
5. how long a change takes to reach a watching page's stream.

    python bench/web.py                           # 100,000 nodes, SQLite
    python bench/web.py --backend postgresql -n 100000
    python bench/web.py --smoke                   # 3,000 nodes, one repeat, 5 s live

Figures (docs/performance.md, "The web view", has them all), 100,000 nodes, median of 3,
server time, on a 2-core machine (AMD EPYC), SQLite / PostgreSQL:

    answer                                   page ms     /api ms      SQL
    overview                                 139 /  82   123 / 67      13
    processes finished, 30 d, 2000 rows      172 / 128   124 / 100      1
    workflow of 2,000 steps                  116 / 166   130 / 163      5
    job with a trace of 2,000 samples         71 / 53     31 / 38       9
    node page of the 2,000-step workflow      92 / 106    91 / 105      3
    (the others 8 to 47 ms)

    50 live streams, 20 s, 5 writes/s: each kind of view read 0.85 to 1.0 rounds a second;
    statements a second: overview 11.7, workflow 4.3 / 4.0, job 8.6, node 2.9, search 2.0,
    the probe 1.95; server CPU 44 % / 25 % of one core.
    quiet, 30 s: no load; 1.10 / 1.13 statements a second in all (the probe).
    50 streams on 50 different jobs, 10 of them changing 5 times a second: 1.00 round and
    5.0 loads a second (the jobs changed), 45 statements a second.
    A change reached its stream in 0.54 / 0.69 s median, 0.92 / 0.95 s at most.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from db_scale import PROFILE  # noqa: E402
from machine import bench_profile, describe  # noqa: E402

#: Calc jobs the big workflow called, and samples in the traced job's trace.
WORKFLOW_STEPS = 2000
TRACE_SAMPLES = 2000
#: Live streams on each watched view.
STREAMS_PER_VIEW = 10
#: Seconds between two asks of one view: more than the hub's interval, so each is a load.
SPACING = 1.1


# -- the server (a subprocess: its CPU and statements are its own) -------------------------------
class Statements:
    """Every SQL statement the server makes, by the view whose load made it."""

    def __init__(self) -> None:
        import sqlalchemy as sa

        self.lock = threading.Lock()
        self.local = threading.local()
        self.total = 0
        self.by_view: Counter[str] = Counter()
        self.loads: Counter[str] = Counter()
        self.load_seconds: Counter[str] = Counter()
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._seen)

    def _seen(self, *_: Any) -> None:
        with self.lock:
            self.total += 1
            self.by_view[getattr(self.local, "view", "other")] += 1

    def counted(self, name: str, load: Any) -> Any:
        def load_counted(params: dict[str, Any]) -> dict[str, Any]:
            self.local.view = name
            start = time.perf_counter()
            try:
                return load(params)
            finally:
                self.local.view = "other"
                with self.lock:
                    self.loads[name] += 1
                    self.load_seconds[name] += time.perf_counter() - start

        return load_counted

    def as_dict(self) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with self.lock:
            return {
                "total": self.total,
                "by_view": dict(self.by_view),
                "loads": dict(self.loads),
                "load_seconds": dict(self.load_seconds),
                "cpu": usage.ru_utime + usage.ru_stime,
            }


def serve(port: int, token: str) -> None:
    """The app of profile PROFILE on 127.0.0.1:port, each page's load counted; its counts at
    ``/_bench/stats``, and each answer's statements in an ``x-bench-sql`` header."""
    import uvicorn
    from starlette.datastructures import MutableHeaders

    import veglia
    from veglia.plugins.web import pages
    from veglia.plugins.web.app import WebSettings, create_app

    veglia.load_profile(PROFILE)
    statements = Statements()
    pages.PAGES[:] = [
        dataclasses.replace(page, load=statements.counted(page.name, page.load))
        for page in pages.PAGES
    ]
    app = create_app(WebSettings(PROFILE, token, secrets.token_urlsafe(32)))

    async def probe(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/_bench/stats":
            hub = app.state.hub
            counts = {**statements.as_dict(), "rounds": dict(hub.rounds), "probes": hub.probes}
            body = json.dumps(counts).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return
        before = statements.total

        async def send_counted(message: Any) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["x-bench-sql"] = str(statements.total - before)
            await send(message)

        await app(scope, receive, send_counted)

    uvicorn.run(
        probe, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )


# -- the client ------------------------------------------------------------------------------
def machine(backend: str) -> str:
    database = "SQLite (WAL)"
    if backend == "postgresql":
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres") as connection:
            row = connection.execute("SHOW server_version").fetchone()
        database = f"PostgreSQL {row[0] if row else '?'}"
    return describe(database)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclasses.dataclass
class Fixture:
    """What the filled database holds that the bench asks for."""

    workflow: int
    steps: int
    job: int
    active_steps: list[int]
    finished_steps: list[int]
    data: int
    counts: dict[str, int]


def fill(nodes: int) -> Fixture:
    """The profile's database filled: ``nodes`` nodes with the big workflow (of
    :data:`WORKFLOW_STEPS` steps, fewer in a small database), the traced job."""
    import sqlalchemy as sa
    from db_fill import Filler

    from veglia.manage import get_storage
    from veglia.orm.attributes import STARTED_AT, SUBMITTED_AT, TRACE_RECORD
    from veglia.storage.models import Link, Node

    engine = get_storage().engine
    filler = Filler(engine)
    steps_made = min(WORKFLOW_STEPS, nodes // 50)
    counts = filler.fill(nodes - steps_made * 6)
    workflow = filler.workflow(steps_made)
    with engine.begin() as connection:
        steps = connection.execute(
            sa.select(Node.id, Node.process_state, Node.attributes)
            .join(Link, Link.output_id == Node.id)
            .where(Link.input_id == workflow, Link.link_type == "call")
            .order_by(Node.id)
        ).all()
        finished = [row for row in steps if row.process_state == "finished"]
        job, _, attributes = finished[len(finished) // 2]
        # A trace as the core.trace sampler leaves it: t ms, cpu % x10, rss kB, mem %.
        start_ms = int((time.time() - 3 * 3600) * 1000)
        series = [
            [start_ms + 5000 * i, 950 + i % 50, 200_000 + 40 * i, 1.5, None, None]
            for i in range(TRACE_SAMPLES)
        ]
        record = dict(attributes[TRACE_RECORD])
        record["extras"] = {"trace": {"series": series}}
        # Started steps draw a running span on the timeline.
        for pk, _, step_attributes in steps:
            started = {**step_attributes, STARTED_AT: step_attributes[SUBMITTED_AT] + 30}
            if pk == job:
                started[TRACE_RECORD] = record
            connection.execute(sa.update(Node).where(Node.id == pk).values(attributes=started))
        data = connection.scalar(
            sa.select(Link.input_id).where(Link.output_id == job, Link.link_type == "input")
        )
        if engine.dialect.name == "postgresql":
            connection.execute(sa.text("ANALYZE"))
    active = [row.id for row in steps if row.process_state in ("created", "waiting", "running")]
    ended = [row.id for row in finished if row.id != job]
    return Fixture(workflow, len(steps), job, active, ended, data, counts)


def pages_to_time(fixture: Fixture) -> list[tuple[str, str]]:
    return [
        ("overview", "/"),
        ("processes (active)", "/processes"),
        ("processes state=all", "/processes?state=all"),
        ("processes label=job-4*", "/processes?state=all&label=job-4*"),
        ("processes finished, 30 d, 2000", "/processes?state=finished&past_days=30&limit=2000"),
        (f"workflow ({fixture.steps} steps)", f"/workflow/{fixture.workflow}"),
        (f"job (trace of {TRACE_SAMPLES})", f"/job/{fixture.job}"),
        ("node (the job)", f"/node/{fixture.job}"),
        ("node (an input, depth 2)", f"/node/{fixture.data}?depth=2"),
        ("node (the workflow)", f"/node/{fixture.workflow}"),
    ]


def api_of(path: str) -> str:
    return "/api" if path == "/" else "/api" + path


def logged_in(base_url: str, token: str) -> Any:
    import httpx

    client = httpx.Client(base_url=base_url, timeout=120, follow_redirects=True)
    client.get("/", params={"token": token}).raise_for_status()
    return client


def server_ms(response: Any) -> float:
    return float(response.headers["server-timing"].split("dur=")[1])


def time_pages(client: Any, fixture: Fixture, repeat: int) -> None:
    """Each page and its API answer, ``repeat`` times, each ask of a view a load."""
    urls = pages_to_time(fixture)
    last: dict[str, float] = {}
    times: dict[str, list[float]] = {}
    sql: dict[str, int] = {}
    size: dict[str, int] = {}
    for round_ in range(repeat + 1):  # the first round warms templates and caches
        for variant in ("page", "api"):
            for _, path in urls:
                wait = last.get(path, 0) + SPACING - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # the hub's cache must have expired
                url = path if variant == "page" else api_of(path)
                response = client.get(url)
                last[path] = time.monotonic()
                response.raise_for_status()
                if round_:
                    times.setdefault(url, []).append(server_ms(response))
                    sql[url] = int(response.headers["x-bench-sql"])
                    size[url] = len(response.content)
    print(f"\n{'answer':44} {'best ms':>8} {'median':>8} {'SQL':>5} {'KiB':>7}")
    for name, path in urls:
        for variant, url in (("", path), (" /api", api_of(path))):
            found = times[url]
            print(
                f"{(name + variant)[:44]:44} {min(found):8.1f} {statistics.median(found):8.1f} "
                f"{sql[url]:5d} {size[url] / 1024:7.0f}"
            )


class Writer(threading.Thread):
    """Changes processes five times a second: an active step of the workflow between
    waiting and running, and the traced job's label; or, given ``labelled``, the label of
    each of those jobs in turn."""

    def __init__(self, fixture: Fixture, labelled: list[int] | None = None) -> None:
        super().__init__(daemon=True)
        self.fixture = fixture
        self.labelled = labelled
        self.stop = threading.Event()
        self.writes = 0

    def run(self) -> None:
        import sqlalchemy as sa

        from veglia.manage import get_storage
        from veglia.storage.models import Node

        engine = get_storage().engine
        steps = self.fixture.active_steps
        while not self.stop.wait(0.2):
            now = sa.func.current_timestamp()
            pk = steps[self.writes % len(steps)]
            state = "running" if self.writes % 2 else "waiting"
            with engine.begin() as connection:
                if self.labelled:
                    labelled = self.labelled[self.writes % len(self.labelled)]
                    connection.execute(
                        sa.update(Node)
                        .where(Node.id == labelled)
                        .values(label=f"changed-{self.writes}", mtime=now)
                    )
                    self.writes += 1
                    continue
                connection.execute(
                    sa.update(Node).where(Node.id == pk).values(process_state=state, mtime=now)
                )
                connection.execute(
                    sa.update(Node)
                    .where(Node.id == self.fixture.job)
                    .values(label=f"traced-{self.writes}", mtime=now)
                )
            self.writes += 1


async def watch(
    base_url: str, cookies: Any, streams: list[tuple[str, str]], seconds: float, settle: float
) -> tuple[Counter, dict[str, Any], dict[str, Any], float]:
    """The streams (view name, page path) for ``settle`` then ``seconds`` seconds: the
    updates each view's streams got in the last ``seconds`` (the first, the view as it is,
    left out), the server's counts when those began and ended, and how long they lasted."""
    import httpx

    updates: Counter[str] = Counter()

    async def stream(client: httpx.AsyncClient, name: str, path: str) -> None:
        live = "/live" if path == "/" else "/live" + path
        first = True
        async with client.stream("GET", live) as response:
            async for line in response.aiter_lines():
                if line == "event: update":
                    if not first:
                        updates[name] += 1
                    first = False

    limits = httpx.Limits(max_connections=len(streams) + 5)
    async with httpx.AsyncClient(
        base_url=base_url, cookies=cookies, timeout=None, limits=limits
    ) as client:
        tasks = [asyncio.create_task(stream(client, name, path)) for name, path in streams]
        await asyncio.sleep(settle)
        settled = Counter(updates)
        before = (await client.get("/_bench/stats")).json()
        start = time.perf_counter()
        done, _ = await asyncio.wait(tasks, timeout=seconds)
        elapsed = time.perf_counter() - start
        after = (await client.get("/_bench/stats")).json()
        for task in tasks:
            task.cancel()
        for task in done:
            task.result()  # a stream that ended early is a failure
        await asyncio.gather(*tasks, return_exceptions=True)
    updates.subtract(settled)
    return updates, before, after, elapsed


def time_live(client: Any, fixture: Fixture, seconds: float, writing: bool = True) -> None:
    """The live streams for ``seconds``, with the writer (busy) or without (quiet: counted
    from 6 s after the streams opened: the probe reads a write under 5 s old as a change)."""
    views = {
        "overview": "/",
        "processes": "/processes",
        "workflow": f"/workflow/{fixture.workflow}",
        "job": f"/job/{fixture.job}",
        "node": f"/node/{fixture.job}",
    }
    writer = Writer(fixture)
    if writing:
        writer.start()
    streams = [(name, path) for name, path in views.items() for _ in range(STREAMS_PER_VIEW)]
    updates, before, after, elapsed = asyncio.run(
        watch(str(client.base_url), client.cookies, streams, seconds, 0 if writing else 6)
    )
    if writing:
        writer.stop.set()
        writer.join()
    print(
        f"\n{'busy' if writing else 'quiet'}: {STREAMS_PER_VIEW * len(views)} live streams for "
        f"{elapsed:.1f} s, {writer.writes / elapsed:.1f} writes/s:"
    )
    print_live_counts(views, STREAMS_PER_VIEW, updates, before, after, elapsed)


def print_live_counts(
    views: Iterable[str],
    streams: int,
    updates: Counter,
    before: dict[str, Any],
    after: dict[str, Any],
    elapsed: float,
) -> None:
    """Per view: its rounds of loads, loads and statements a second, and its streams'
    updates; then the probe's statements and the server's CPU."""
    print(f"{'view':12} {'streams':>8} {'rounds/s':>9} {'loads/s':>8} {'SQL/s':>7} "
          f"{'SQL/load':>9} {'ms/load':>8} {'updates/stream/s':>17}")  # fmt: skip
    for name in views:

        def grew(field: str, name: str = name) -> float:
            return after[field].get(name, 0) - before[field].get(name, 0)

        loads = grew("loads")
        print(
            f"{name:12} {streams:8d} {grew('rounds') / elapsed:9.2f} {loads / elapsed:8.2f} "
            f"{grew('by_view') / elapsed:7.2f} {grew('by_view') / max(loads, 1):9.1f} "
            f"{1000 * grew('load_seconds') / max(loads, 1):8.1f} "
            f"{updates[name] / streams / elapsed:17.2f}"
        )
    other = after["by_view"].get("other", 0) - before["by_view"].get("other", 0)
    total = after["total"] - before["total"]
    cpu = after["cpu"] - before["cpu"]
    probes = after["probes"] - before["probes"]
    print(f"statements a second in all {total / elapsed:.2f}, outside loads (the change probe, "
          f"{probes / elapsed:.2f} probes/s) {other / elapsed:.2f}; server CPU {cpu:.1f} s "
          f"({100 * cpu / elapsed:.0f} % of one core)")  # fmt: skip


def time_many_jobs(client: Any, fixture: Fixture, seconds: float) -> None:
    """One stream on each of 50 different job pages for ``seconds``, while a writer changes
    the label of one of the first 10 five times a second: the job kind's rounds (at most
    one a second) and its loads (only the jobs changed)."""
    watched = fixture.finished_steps[:50]
    writer = Writer(fixture, labelled=watched[:10])
    writer.start()
    streams = [("job", f"/job/{pk}") for pk in watched]
    started = time.perf_counter()
    updates, before, after, elapsed = asyncio.run(
        watch(str(client.base_url), client.cookies, streams, seconds, 2)
    )
    writer.stop.set()
    writer.join()
    writes_per_second = writer.writes / (time.perf_counter() - started)
    print(
        f"\nmany jobs: {len(streams)} live streams on {len(watched)} different jobs for "
        f"{elapsed:.1f} s, {writes_per_second:.1f} writes/s (labels of 10 of them):"
    )
    print_live_counts(["job"], len(streams), updates, before, after, elapsed)


async def _update_latencies(base_url: str, cookies: Any, job: int, count: int) -> list[float]:
    import random

    import httpx
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.storage.models import Node

    engine = get_storage().engine
    latencies = []
    async with (
        httpx.AsyncClient(base_url=base_url, cookies=cookies, timeout=30) as client,
        client.stream("GET", f"/live/job/{job}") as response,
    ):
        lines = response.aiter_lines()
        for index in range(count):
            # At a random point of the hub's one-second cycle, as a real change comes.
            await asyncio.sleep(random.uniform(0.5, 1.5))
            marker = f"latency-{index}-{secrets.token_hex(4)}"
            with engine.begin() as connection:
                connection.execute(
                    sa.update(Node)
                    .where(Node.id == job)
                    .values(label=marker, mtime=sa.func.current_timestamp())
                )
            written = time.perf_counter()
            async for line in lines:
                if line.startswith("data:") and marker in line:
                    latencies.append(time.perf_counter() - written)
                    break
    return latencies


def time_update_latency(client: Any, fixture: Fixture, count: int) -> None:
    """How long a change takes to reach a watching page: a write of the job's label, then
    the stream's update that holds it (the hub's wait, the load, the rendering)."""
    latencies = asyncio.run(
        _update_latencies(str(client.base_url), client.cookies, fixture.job, count)
    )
    print(
        f"\na change on a watched job page reached its stream in {statistics.median(latencies):.2f}"
        f" s median, {max(latencies):.2f} s at most ({len(latencies)} changes)"
    )


def bench(backend: str, nodes: int, repeat: int, seconds: float, quiet: float) -> None:
    postgresql = backend == "postgresql"
    with bench_profile("veglia-webbench-", name=PROFILE, broker=False, postgresql=postgresql):
        server = None
        try:
            # Lazy: the profile (VEGLIA_HOME) must exist before veglia reads its config.
            import veglia

            veglia.load_profile(PROFILE)
            fixture = fill(nodes)
            print(f"\n== {machine(backend)}")
            print(f"{fixture.counts}; workflow {fixture.workflow}, job {fixture.job}")
            port, token = free_port(), secrets.token_hex(16)  # never "-...": argv of --serve
            server = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(port), token], env=os.environ.copy()
            )
            base_url = f"http://127.0.0.1:{port}"
            client = wait_for_server(base_url, token, server)
            try:
                time_pages(client, fixture, repeat)
                time_live(client, fixture, seconds)
                time_live(client, fixture, quiet, writing=False)
                time_many_jobs(client, fixture, seconds)
                time_update_latency(client, fixture, 3 if repeat == 1 else 10)
            finally:
                client.close()
        finally:
            if server is not None:
                server.terminate()
                server.wait(30)


def wait_for_server(base_url: str, token: str, server: subprocess.Popen) -> Any:
    import httpx

    deadline = time.monotonic() + 60
    while True:
        try:
            return logged_in(base_url, token)
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the bench's web server did not start") from None
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="sqlite")
    parser.add_argument("-n", "--nodes", type=int, default=100_000)
    parser.add_argument("-r", "--repeat", type=int, default=3)
    parser.add_argument("--watch", type=float, default=20.0, help="Seconds of live streams.")
    parser.add_argument(
        "--quiet", type=float, default=10.0, help="Seconds of live streams with no writer."
    )
    parser.add_argument("--smoke", action="store_true", help="3,000 nodes, one repeat, 5 s.")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "TOKEN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return
    if args.smoke:
        args.nodes, args.repeat, args.watch = 3000, 1, 5.0
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    for backend in backends:
        bench(backend, args.nodes, args.repeat, args.watch, args.quiet)


if __name__ == "__main__":
    main()
