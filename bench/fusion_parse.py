#!/usr/bin/env python3
"""The cost of reading, parsing and attaching a Fusion GPU block, per job.

Times the Fusion plugin's ``collect_trace`` on the spec's example ``.fusion/trace.json``
(through the local transport: stat, read, parse, check, attach) against a bare
``json.loads`` of the same bytes, and prints both and their ratio.

    python bench/fusion_parse.py [-n 5000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from machine import describe

from veglia.engine.calcjob.trace import TraceRecord
from veglia.plugins.fusion.hooks import collect_trace
from veglia.plugins.transports.local import LocalTransport

EXAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "fusion" / "trace.json"


class _Node:
    def __init__(self) -> None:
        self.options = {"fusion": True}

    def get_attribute(self, key, default=None):
        return default

    def add_log(self, *args, **kwargs):
        raise AssertionError("the example trace must not be refused")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    folder = Path(tempfile.mkdtemp(prefix="veglia-fusion-"))
    try:
        (folder / ".fusion").mkdir()
        raw = EXAMPLE.read_bytes()
        (folder / ".fusion" / "trace.json").write_bytes(raw)
        node = _Node()
        with LocalTransport() as transport:
            transport.cwd = str(folder)
            start = time.perf_counter()
            for _ in range(args.n):
                record = TraceRecord(task_id=1, name="t", process="p")
                collect_trace(node=node, transport=transport, record=record, computer=None)
            ours = (time.perf_counter() - start) / args.n
        assert record.gpu_metrics == json.loads(raw)["gpu"]
        start = time.perf_counter()
        for _ in range(args.n):
            json.loads(raw)
        bare = (time.perf_counter() - start) / args.n
        print(
            f"fusion collect_trace: {ours * 1e3:.3f} ms per job; bare json.loads "
            f"{bare * 1e3:.3f} ms; ratio {ours / bare:.1f}x (target: under 1 ms per job)"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
