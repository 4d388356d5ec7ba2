"""Counters for bench/throughput.py, loaded into every veglia process it starts.

The bench puts this folder first on PYTHONPATH and sets ``VEGLIA_BENCH_PROBE`` to a folder;
each Python process then counts its SQL statements and commits, the AMQP messages it
publishes and acknowledges, and the CPU time of its garbage collections, and writes them
there as ``<pid>.json`` when it exits. With ``VEGLIA_BENCH_SQL`` set, the record also
counts each statement's text and the veglia functions it came from, and where each commit
came from. With ``VEGLIA_BENCH_PROFILE`` set too, it also writes a cProfile of itself
(``<pid>.prof``). With ``VEGLIA_BENCH_LOCKS`` set, it times SQLite's write lock: how long
each transaction held it, and how long statements waited; it listens to SQLAlchemy's
events for that, which slows every statement, so such a run's speed is not veglia's.
Nothing here is part of veglia: without the variable this module does nothing.
"""

import os

if os.environ.get("VEGLIA_BENCH_PROBE"):
    import atexit
    import json
    import sys

    COUNTS = {"statements": 0, "commits": 0, "published": 0, "acked": 0}
    _folder = os.environ["VEGLIA_BENCH_PROBE"]
    _profiler = None
    # VEGLIA_BENCH_SQL=1: also count each statement's text (the first 160 characters).
    _statements = {} if os.environ.get("VEGLIA_BENCH_SQL") else None

    def _veglia_callers(depth: int = 4) -> list:
        """The innermost veglia functions on the stack (outside its storage package)."""
        frame, found = sys._getframe(2), []
        while frame is not None and len(found) < depth:
            name = frame.f_code.co_filename
            if ("/core/" in name or "/plugins/" in name) and "/storage/" not in name:
                found.append(f"{os.path.basename(name)}:{frame.f_code.co_name}")
            frame = frame.f_back
        return found

    # VEGLIA_BENCH_LOCKS=1: how long each transaction held SQLite's write lock (from the end
    # of its first write, when it has the lock, to its commit) and how long statements
    # waited beyond their own CPU time.
    _locks = {} if os.environ.get("VEGLIA_BENCH_LOCKS") else None

    def _install_lock_timing(event, sa) -> None:
        import time

        first_write = {}
        started = {}

        def add(kind, key, seconds, cpu=None):
            empty = [0, 0.0] if cpu is None else [0, 0.0, 0.0]
            entry = _locks.setdefault(kind, {}).setdefault(key, empty)
            entry[0] += 1
            entry[1] += seconds
            if cpu is not None:
                entry[2] += cpu

        def before(conn, _cursor, text, *_args):
            key = id(conn.connection.dbapi_connection)
            started[key] = (time.perf_counter(), time.thread_time())

        def after(conn, _cursor, text, *_args):
            key = id(conn.connection.dbapi_connection)
            if key not in first_write and text.lstrip()[:6].upper() in _WRITES:
                # Held from here: the first write has the lock (waiting for it is a wait).
                caller = " < ".join(_veglia_callers(3))
                first_write[key] = (time.perf_counter(), time.thread_time(), caller)
            wall, cpu = started.pop(key, (None, None))
            if wall is not None:
                waited = (time.perf_counter() - wall) - (time.thread_time() - cpu)
                if waited > 0.0005:
                    where = " < ".join(_veglia_callers(3))
                    add("waits", " ".join(text.split())[:60] + " @ " + where, waited)

        def end(conn):
            first = first_write.pop(id(conn.connection.dbapi_connection), None)
            if first is not None:
                wall, cpu, caller = first
                add("holds", caller, time.perf_counter() - wall, time.thread_time() - cpu)

        event.listen(sa.engine.Engine, "before_cursor_execute", before)
        event.listen(sa.engine.Engine, "after_cursor_execute", after)
        event.listen(sa.engine.Engine, "commit", end)
        event.listen(sa.engine.Engine, "rollback", end)

        # The commits themselves: SQLite writes the WAL there (and checkpoints it into the
        # database file now and then, with fsyncs).
        from sqlalchemy.engine.default import DefaultDialect

        do_commit = DefaultDialect.do_commit

        def timed_commit(self, dbapi_connection):
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return do_commit(self, dbapi_connection)
            finally:
                wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
                add("commits", "over 5 ms" if wall > 0.005 else "up to 5 ms", wall, cpu)

        DefaultDialect.do_commit = timed_commit

    _WRITES = ("INSERT", "UPDATE", "DELETE")

    def _install() -> None:
        import aiormq.channel
        import sqlalchemy as sa
        from sqlalchemy import event
        from sqlalchemy.engine.default import DefaultDialect

        def statement(text):
            COUNTS["statements"] += 1
            if _statements is not None:
                key = " ".join(text.split())[:100] + " @ " + " < ".join(_veglia_callers(3))
                _statements[key] = _statements.get(key, 0) + 1

        def commit():
            COUNTS["commits"] += 1
            if _statements is not None:
                key = "COMMIT from " + " < ".join(_veglia_callers())
                _statements[key] = _statements.get(key, 0) + 1

        # Counted where SQLAlchemy hands each statement and commit to the driver, not
        # through its events: a listener puts every statement on SQLAlchemy's slower path
        # (about 25 us each here), which veglia itself never takes.
        def counting(name, count):
            original = getattr(DefaultDialect, name)

            def wrapper(self, cursor_or_connection, *args, **kwargs):
                count(*args[:1])  # the statement's text; a commit has none
                return original(self, cursor_or_connection, *args, **kwargs)

            setattr(DefaultDialect, name, wrapper)

        for name in ("do_execute", "do_executemany", "do_execute_no_params"):
            counting(name, statement)
        counting("do_commit", commit)
        if _locks is not None:
            _install_lock_timing(event, sa)

        def counted(name, key):
            original = getattr(aiormq.channel.Channel, name)

            async def wrapper(self, *args, **kwargs):
                COUNTS[key] += 1
                return await original(self, *args, **kwargs)

            setattr(aiormq.channel.Channel, name, wrapper)

        counted("basic_publish", "published")
        counted("basic_ack", "acked")

    def _dump() -> None:
        if not os.path.isdir(_folder):  # the bench has read and removed it
            return
        pid = os.getpid()
        record = {"pid": pid, "argv": sys.orig_argv, **COUNTS}
        if _statements is not None:
            record["sql"] = _statements
        if _locks is not None:
            record["locks"] = _locks
        with open(os.path.join(_folder, f"{pid}.json"), "w") as handle:
            json.dump(record, handle)
        if _profiler is not None:
            _profiler.disable()
            _profiler.dump_stats(os.path.join(_folder, f"{pid}.prof"))

    def _time_garbage_collection() -> None:
        """CPU time in Python's cyclic garbage collector, by generation."""
        import gc
        import time

        spent = COUNTS["gc"] = {"0": [0, 0.0], "1": [0, 0.0], "2": [0, 0.0]}
        started = [0.0]

        def collection(phase, info):
            if phase == "start":
                started[0] = time.thread_time()
            else:
                entry = spent[str(info["generation"])]
                entry[0] += 1
                entry[1] += time.thread_time() - started[0]

        gc.callbacks.append(collection)

    _time_garbage_collection()
    try:
        _install()
    except ImportError:  # a Python without veglia's dependencies: nothing to count
        COUNTS["uncounted"] = 1
    if os.environ.get("VEGLIA_BENCH_PROFILE") and "worker" in sys.orig_argv:
        import cProfile
        import time

        _profiler = cProfile.Profile(time.thread_time)  # CPU, not waits
        _profiler.enable()
    atexit.register(_dump)
