"""Filling a profile's database quickly with a realistic provenance graph (for db_scale.py).

Rows go in through the storage models' tables in bulk (executemany in chunks), with their
pks chosen here, so 100,000 nodes take seconds rather than the minutes running jobs would.
Each calc job is stored as the engine leaves one: an input ``Str``, the job with the
attributes a finished ``core.shell`` job carries, and the four nodes it creates (remote
folder, retrieved folder, stdout, stderr), with links, file records and log lines. One job
in ten was launched by a workflow (``call`` links); some nodes are in groups; the active
jobs carry a checkpoint, the daemon flag and a lease (some live, some expired).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

from veglia.orm import attributes as attr
from veglia.storage.models import (
    Computer,
    Group,
    GroupNode,
    Link,
    Log,
    Node,
    ProcessLease,
    RepositoryFile,
    User,
)

#: Nodes per calc job: its input, itself, and the four nodes it creates.
NODES_PER_JOB = 6
#: Final states of the jobs, by weight; the rest of the jobs are active.
ENDINGS = [("finished0", 85), ("finished300", 8), ("excepted", 2), ("killed", 1)]
ACTIVE = [("created", 1), ("waiting", 2), ("running", 1)]
CHUNK = 5000


def _pick(rng: random.Random, table: list[tuple[str, int]]) -> str:
    return rng.choices([name for name, _ in table], [weight for _, weight in table])[0]


def _job_attributes(pk: int, state: str, computer: str, workdir: str) -> dict[str, Any]:
    """What a ``core.shell`` job on the direct scheduler carries once it ran (about 2 KB)."""
    job_id = str(10000 + pk)
    usage = {"peak_memory_kb": 3000 + pk % 997, "runtime_seconds": float(pk % 60), "source": "time"}
    done = state in ("finished0", "finished300", "excepted", "killed")
    scheduler_state = "done" if done else ("queued" if state == "waiting" else "running")
    attributes: dict[str, Any] = {
        attr.CACHE_HASH: f"{pk:064x}",
        attr.COMPUTER: computer,
        attr.JOB_ID: job_id,
        attr.LAUNCH: {"command": "veglia shell 'echo hi'", "cwd": "/home/user", "user": "user"},
        attr.LOCAL_COPY_LIST: [],
        attr.OPTIONS: {"resources": {"num_machines": 1}},
        attr.REMOTE_WORKDIR: workdir,
        attr.RETRIEVE_LIST: ["stdout", "stderr"],
        attr.SCHEDULER_STATE: scheduler_state,
        attr.SIMILARITY_KEY: f"core.shell||{computer}|{pk % 50}",
        attr.SUBMITTED_AT: 1.79e9 + pk,
        attr.LAST_JOB_INFO: {
            "exit_code": None, "failure": None, "job_id": job_id, "queue": None,
            "raw_state": "Zs", "reason": "", "state": scheduler_state, "wallclock_seconds": 0,
        },
    }  # fmt: skip
    if done:
        attributes[attr.USAGE] = usage
        attributes[attr.JOB_OUTCOME] = {"exit_status": 0, "failure": None, "usage": usage}
        trace = {key: None for key in ("memory", "pcpu", "rchar", "wchar", "syscr", "syscw")}
        trace.update(
            {"task_id": pk, "status": "COMPLETED", "exit": 0, "hash": f"{pk:064x}", "cpus": 1,
             "executor": "core.direct", "native_id": job_id, "workdir": workdir,
             "name": f"core.shell ({pk})", "process": "core.shell", "duration": 55}
        )  # fmt: skip
        attributes[attr.TRACE_RECORD] = trace
    else:
        attributes[attr.DAEMON] = True
    return attributes


class Filler:
    """Appends jobs to a migrated database; ``counts`` says what it wrote."""

    def __init__(self, engine: sa.engine.Engine, seed: int = 16) -> None:
        self.engine = engine
        self.rng = random.Random(seed)
        self.counts: dict[str, int] = {}
        with engine.connect() as connection:
            self.next_pk = (connection.scalar(sa.select(sa.func.max(Node.id))) or 0) + 1
            self.user = connection.scalar(sa.select(User.id).order_by(User.id))
            self.computer = connection.execute(
                sa.select(Computer.id, Computer.label).order_by(Computer.id)
            ).first()
        self.rows: dict[str, list[dict[str, Any]]] = {}

    def _add(self, table: str, row: dict[str, Any]) -> None:
        self.rows.setdefault(table, []).append(row)

    def _node(self, node_type: str, when: datetime, **values: Any) -> int:
        pk = self.next_pk
        self.next_pk += 1
        row = {
            "id": pk, "uuid": str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
            "node_type": node_type, "process_type": None, "label": "", "description": "",
            "ctime": when, "mtime": when, "user_id": self.user, "computer_id": None,
            "attributes": {}, "extras": {}, "process_state": None, "exit_status": None,
            "exit_message": None, "checkpoint": None,
        }  # fmt: skip
        row.update(values)
        self._add("nodes", row)
        return pk

    def _link(self, source: int, target: int, label: str, link_type: str) -> None:
        self._add(
            "links",
            {"input_id": source, "output_id": target, "label": label, "link_type": link_type},
        )

    def _job(self, when: datetime, caller: int | None, active: bool) -> int:
        state = _pick(self.rng, ACTIVE if active else ENDINGS)
        command = self._node("data.str", when, attributes={"value": "echo hi"})
        computer_pk, computer = self.computer
        workdir = f"/scratch/veglia/{self.next_pk:08d}"
        values: dict[str, Any] = {
            "process_type": "core.shell",
            "computer_id": computer_pk,
            "label": f"job-{self.next_pk}",
            "attributes": _job_attributes(self.next_pk, state, computer, workdir),
        }
        if state.startswith("finished"):
            values.update(process_state="finished", exit_status=int(state[8:]))
            if values["exit_status"]:
                values["exit_message"] = "The command failed."
        else:
            values["process_state"] = state
            if active:
                values["checkpoint"] = json.dumps({"version": 1, "state": state, "pad": "x" * 3000})
        job = self._node("process.calcjob", when, **values)
        self._link(command, job, "command", "input")
        if caller is not None:
            self._link(caller, job, f"call_{job}", "call")
        self._add("repository_files", {"node_id": job, "path": "_veglia_submit.sh",
                                       "sha256": f"{job:064x}", "size": 256})  # fmt: skip
        for level, message in (("REPORT", "submitted"), ("REPORT", "retrieved")):
            self._add("logs", {"uuid": str(uuid.uuid4()), "node_id": job, "time": when,
                               "levelname": level, "loggername": "veglia", "message": message,
                               "details": {}})  # fmt: skip
        if values["process_state"] in ("finished", "excepted", "killed"):
            made = [("remote_folder", "data.remote"), ("retrieved", "data.folder"),
                    ("stdout", "data.singlefile"), ("stderr", "data.singlefile")]  # fmt: skip
            for label, node_type in made:
                output = self._node(node_type, when, attributes={"label": label})
                self._link(job, output, label, "create")
                if node_type == "data.singlefile":
                    record = {"node_id": output, "path": label, "sha256": f"{output:064x}"}
                    self._add("repository_files", {**record, "size": 3})
        else:
            self.next_pk += 4  # keep the node count per job for the arithmetic
            self._add("leases", {"process_id": job, "active": True})
        return job

    def fill(self, nodes: int, active_share: float = 0.02, days: int = 90) -> dict[str, int]:
        """About ``nodes`` nodes, created over the last ``days`` days, oldest first."""
        jobs = max(1, nodes // NODES_PER_JOB)
        start = datetime.now(timezone.utc) - timedelta(days=days)
        step = timedelta(days=days) / jobs
        workflow: int | None = None
        active_from = int(jobs * (1 - active_share))
        t0 = time.perf_counter()
        for index in range(jobs):
            when = start + step * index
            if index % 10 == 0:
                active = index >= active_from
                workflow = self._node(
                    "process.workflow", when, process_type="core.restart", label=f"wf-{index}",
                    process_state="waiting" if active else "finished",
                    exit_status=None if active else 0,
                    attributes={attr.DAEMON: True} if active else {},
                )  # fmt: skip
            self._job(when, workflow if index % 10 < 3 else None, active=index >= active_from)
            if len(self.rows.get("nodes", ())) >= CHUNK:
                self._flush()
        self._flush()
        self._groups()
        self._leases()
        self.counts["fill seconds"] = round(time.perf_counter() - t0, 1)
        return self.counts

    def workflow(self, steps: int, active_share: float = 0.1) -> int:
        """One running workflow that called ``steps`` calc jobs over the last day, the last
        ``active_share`` of them still active; its pk."""
        start = datetime.now(timezone.utc) - timedelta(days=1)
        step = timedelta(days=1) / max(1, steps)
        workflow = self._node(
            "process.workflow", start, process_type="core.restart", label="big-workflow",
            process_state="waiting", attributes={attr.DAEMON: True},
        )  # fmt: skip
        active_from = int(steps * (1 - active_share))
        for index in range(steps):
            self._job(start + step * index, workflow, active=index >= active_from)
            if len(self.rows.get("nodes", ())) >= CHUNK:
                self._flush()
        self._flush()
        self._leases()
        return workflow

    def _flush(self) -> None:
        tables = {"nodes": Node, "links": Link, "logs": Log, "repository_files": RepositoryFile}
        with self.engine.begin() as connection:
            for name, model in tables.items():
                rows = self.rows.pop(name, [])
                if rows:
                    connection.execute(model.__table__.insert(), rows)
                    self.counts[name] = self.counts.get(name, 0) + len(rows)

    def _groups(self) -> None:
        with self.engine.begin() as connection:
            pks = list(connection.scalars(sa.select(Node.id).where(Node.node_type == "data.str")))
            for index in range(5):
                group = connection.execute(
                    Group.__table__.insert().returning(Group.id),
                    {"uuid": str(uuid.uuid4()), "label": f"bench-{index}-{uuid.uuid4().hex[:6]}",
                     "type_string": "core", "description": "", "time": datetime.now(timezone.utc),
                     "user_id": self.user},
                ).scalar_one()  # fmt: skip
                members = pks[index::7][:1000]
                if members:
                    connection.execute(
                        GroupNode.__table__.insert(),
                        [{"group_id": group, "node_id": pk} for pk in members],
                    )
            if self.engine.dialect.name == "postgresql":  # the pks were chosen here
                connection.execute(
                    sa.text("SELECT setval('nodes_id_seq', (SELECT max(id) FROM nodes))")
                )
                connection.execute(sa.text("ANALYZE"))

    def _leases(self) -> None:
        """Half of the active jobs held by a live worker, the others by a long-gone one."""
        active = self.rows.pop("leases", [])
        now = time.time()
        rows = [
            {"process_id": row["process_id"], "worker": f"host/{1 + i % 2}/tok/space",
             "host": "host", "pid": 1 + i % 2, "heartbeat": now if i % 2 else now - 3600,
             "acquired": now - 7200}
            for i, row in enumerate(active)
        ]  # fmt: skip
        if rows:
            with self.engine.begin() as connection:
                connection.execute(ProcessLease.__table__.insert(), rows)
        self.counts["leases"] = len(rows)
