"""The time and peak memory of `veglia archive import` for an archive of N nodes.

The archive is written here, in the shape `veglia archive create` gives a profile's finished
``core.arithmetic.add`` jobs: per job its two ``Int`` inputs, the job (with the attributes
a finished job carries, a log line and one file) and its ``Int`` output, with their links;
a group holds the jobs. It is imported into a fresh SQLite profile by `veglia archive import`
in a process of its own, once into an empty profile and once more (every node there
already). Prints the archive's sizes, the wall time and the import's peak memory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

from machine import bench_profile, describe

VEGLIA = str(Path(sys.executable).parent / "veglia")
PROFILE = "archivebench"
NODES_PER_JOB = 4
TIME = "2026-12-01T12:00:00+00:00"


def _node(node_type: str, attributes: dict[str, Any], **more: Any) -> dict[str, Any]:
    row = {
        "uuid": str(uuid.uuid4()),
        "node_type": node_type,
        "process_type": None,
        "label": "",
        "description": "",
        "attributes": attributes,
        "extras": {},
        "process_state": None,
        "exit_status": None,
        "exit_message": None,
        "ctime": TIME,
        "mtime": TIME,
        "user": "bench@localhost",
        "computer": None,
        "files": [],
    }
    return row | more


def _job_attributes(number: int) -> dict[str, Any]:
    """About what a finished ``core.arithmetic.add`` job carries."""
    return {
        "code": {"pk": 1, "label": "add@localhost"},
        "job_id": str(10000 + number),
        "remote_workdir": f"/tmp/veglia/run/{number:08x}",
        "options": {"resources": {"num_machines": 1}, "withmpi": False},
        "scheduler_state": "done",
        "scheduler_lastchecktime": TIME,
        "retrieve_list": ["aiida.out", "_scheduler-stdout.txt", "_scheduler-stderr.txt"],
        "usage": {"peak_memory_kb": 3000 + number % 997, "runtime_seconds": 0.1},
        "cache_hash": f"{number:064x}",
    }


def write_archive(path: Path, nodes: int) -> tuple[int, int]:
    """An archive of about ``nodes`` nodes at ``path``; its data.json size and file count."""
    computer = str(uuid.uuid4())
    data: dict[str, Any] = {
        "users": [{"email": "bench@localhost", "first_name": "", "last_name": "",
                   "institution": ""}],
        "computers": [{"uuid": computer, "label": "localhost", "hostname": "localhost",
                       "description": "", "scheduler_type": "core.direct",
                       "transport_type": "core.local", "properties": {}}],
        "codes": [{"uuid": str(uuid.uuid4()), "label": "add", "executable": "/bin/bash",
                   "default_calc_job_plugin": "core.arithmetic.add", "description": "",
                   "prepend_text": "", "append_text": "", "pk": 1, "computer": computer,
                   "ctime": TIME}],
        "nodes": [], "links": [], "logs": [], "groups": [],
    }  # fmt: skip
    blobs: dict[str, bytes] = {}
    jobs = []
    for number in range(max(1, nodes // NODES_PER_JOB)):
        x = _node("data.int", {"value": number})
        y = _node("data.int", {"value": 1})
        content = f"{number + 1}\n".encode()
        sha256 = hashlib.sha256(content).hexdigest()
        blobs[sha256] = content
        job = _node(
            "process.calcjob",
            _job_attributes(number),
            process_type="core.arithmetic.add",
            process_state="finished",
            exit_status=0,
            computer=computer,
            files=[["aiida.out", sha256, len(content)]],
        )
        total = _node("data.int", {"value": number + 1})
        data["nodes"] += [x, y, job, total]
        data["links"] += [
            {"input": x["uuid"], "output": job["uuid"], "link_type": "input", "label": "x"},
            {"input": y["uuid"], "output": job["uuid"], "link_type": "input", "label": "y"},
            {"input": job["uuid"], "output": total["uuid"], "link_type": "create",
             "label": "sum"},
        ]  # fmt: skip
        data["logs"].append(
            {"uuid": str(uuid.uuid4()), "node": job["uuid"], "time": TIME, "levelname": "REPORT",
             "loggername": "veglia", "message": f"job {number} done", "details": {}}
        )  # fmt: skip
        jobs.append(job["uuid"])
    data["groups"].append(
        {"uuid": str(uuid.uuid4()), "label": "bench", "description": "", "type_string": "core",
         "time": TIME, "user": "bench@localhost", "nodes": jobs}
    )  # fmt: skip
    text = json.dumps(data, sort_keys=True).encode()
    metadata = {"format": "veglia-archive", "version": 1, "created": TIME, "counts": {},
                "data_sha256": hashlib.sha256(text).hexdigest()}  # fmt: skip
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("metadata.json", json.dumps(metadata))
        archive.writestr("data.json", text)
        for sha256, content in blobs.items():
            archive.writestr("repo/" + sha256, content)
    return len(text), len(blobs)


def timed_import(path: Path) -> tuple[float, float, str]:
    """Wall seconds and peak memory (MB) of `veglia archive import` in a process of its own,
    and what it printed."""
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(done.stdout + done.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(done.returncode)\n"
    )
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", measure, VEGLIA, "-p", PROFILE, "archive", "import", str(path)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    *lines, peak_kb = done.stdout.strip().splitlines()
    if done.returncode:
        sys.exit("\n".join(lines))
    return wall, int(peak_kb) / 1024, " ".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--nodes", type=int, default=20000, help="nodes in the archive")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    with bench_profile("veglia-archivebench-", name=PROFILE, broker=False) as home:
        run(home, args.nodes)


def run(home: Path, nodes_asked: int) -> None:
    path = home / "bench.zip"
    start = time.perf_counter()
    data_size, files = write_archive(path, nodes_asked)
    nodes = nodes_asked // NODES_PER_JOB * NODES_PER_JOB or NODES_PER_JOB
    print(
        f"archive of {nodes} nodes, {files} files: data.json {data_size / 1e6:.1f} MB, "
        f"the zip file {path.stat().st_size / 1e6:.1f} MB (written in "
        f"{time.perf_counter() - start:.1f} s)"
    )
    for what in ("into an empty profile", "again (every node there)"):
        wall, peak, printed = timed_import(path)
        print(
            f"import {what}: {wall:.1f} s ({nodes / wall:.0f} nodes/s), peak memory "
            f"{peak:.0f} MB; {printed}"
        )


if __name__ == "__main__":
    main()
