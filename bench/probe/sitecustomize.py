"""Counters for bench/throughput.py, loaded into every veglia process it starts.

The bench puts this folder first on PYTHONPATH and sets ``VEGLIA_BENCH_PROBE`` to a folder;
each Python process then counts its SQL statements and commits and the AMQP messages it
publishes and acknowledges, and writes them there as ``<pid>.json`` when it exits. With
``VEGLIA_BENCH_SQL`` set, the record also counts each statement's text and
the veglia functions it came from, and where each commit came from. With
``VEGLIA_BENCH_PROFILE`` set too, it also writes a cProfile of itself (``<pid>.prof``).
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

    def _install() -> None:
        import aiormq.channel
        import sqlalchemy as sa
        from sqlalchemy import event

        def statement(_conn, _cursor, text, *_args, **_kwargs):
            COUNTS["statements"] += 1
            if _statements is not None:
                key = " ".join(text.split())[:100] + " @ " + " < ".join(_veglia_callers(3))
                _statements[key] = _statements.get(key, 0) + 1

        def commit(*_args, **_kwargs):
            COUNTS["commits"] += 1
            if _statements is not None:
                key = "COMMIT from " + " < ".join(_veglia_callers())
                _statements[key] = _statements.get(key, 0) + 1

        event.listen(sa.engine.Engine, "before_cursor_execute", statement)
        event.listen(sa.engine.Engine, "commit", commit)

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
        with open(os.path.join(_folder, f"{pid}.json"), "w") as handle:
            json.dump(record, handle)
        if _profiler is not None:
            _profiler.disable()
            _profiler.dump_stats(os.path.join(_folder, f"{pid}.prof"))

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
