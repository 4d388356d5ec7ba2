"""Cleaning the remote work dirs of ended calc jobs, as ``verdi calcjob cleanworkdir``.

The folder goes through the computer's transport; the job records when (attribute
``workdir_cleaned``) and its ``remote_folder`` output gets the extra ``cleaned``, as AiiDA's
``RemoteData`` does. The retrieved files stay: they are in the repository.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from veglia.exceptions import ProcessActiveError, UnsafePathError
from veglia.orm.attributes import WORKDIR_CLEANED
from veglia.orm.computers import Computer, load_computer
from veglia.orm.data import RemoteData
from veglia.orm.process_nodes import CalcJobNode

__all__ = ["WorkdirToClean", "clean_workdirs", "cleaned_message", "plan_cleaning"]


@dataclass(frozen=True)
class WorkdirToClean:
    node: CalcJobNode
    computer: Computer
    path: str


def cleaned_at(node: CalcJobNode) -> datetime | None:
    """When the job's work dir was cleaned, or None."""
    record = node.get_attribute(WORKDIR_CLEANED)
    return datetime.fromtimestamp(record["time"], timezone.utc) if record else None


def cleaned_message(node: CalcJobNode) -> str | None:
    """A sentence saying the work dir is gone, or None while it is there."""
    when = cleaned_at(node)
    if when is None:
        return None
    local = when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    where = f"{node.computer_label}:{node.remote_workdir}"
    return (
        f"The work dir of calc job {node.pk} ({where}) was cleaned on {local} by "
        "`veglia calcjob cleanworkdir`; the files it retrieved are still here "
        f"(`veglia calcjob outputls {node.pk}`)."
    )


def _expected_folder(node: CalcJobNode, path: str) -> bool:
    """Whether ``path`` is the folder veglia made for this job (``.../ab/cd/efgh...`` of its
    UUID), so nothing else is ever removed."""
    uuid = node.uuid
    tail = posixpath.join(uuid[:2], uuid[2:4], uuid[4:])
    return posixpath.isabs(path) and posixpath.normpath(path).endswith("/" + tail)


def plan_cleaning(nodes: Iterable[CalcJobNode]) -> tuple[list[WorkdirToClean], list[str]]:
    """The work dirs to remove, and why the other jobs have nothing to clean. Raises
    :class:`ProcessActiveError` when a job has not ended (before anything is removed)."""
    nodes = list(nodes)
    active = [node for node in nodes if not node.is_terminated]
    if active:
        first = active[0]
        named = ", ".join(f"{node.pk} ({node.process_state})" for node in active)
        raise ProcessActiveError(
            f"Calc job {named} has not ended; its work dir is in use. Wait until it ends "
            f"(`veglia process watch {first.pk}`), or kill it (`veglia process kill "
            f"{first.pk}`), then clean it. Nothing was removed."
        )
    todo, skipped = [], []
    computers: dict[int | str, Computer] = {}
    for node in nodes:
        path = node.remote_workdir
        if cleaned_at(node) is not None:
            skipped.append(f"calc job {node.pk}: its work dir was cleaned already")
            continue
        if not path:
            why = "it was cached" if node.cached_from else "it never uploaded"
            skipped.append(f"calc job {node.pk}: no work dir ({why})")
            continue
        if not _expected_folder(node, path):
            raise UnsafePathError(
                f"Calc job {node.pk} records {path} as its work dir, which is not a folder "
                "veglia made for it; refusing to remove it. Nothing was removed."
            )
        key = node.computer_pk or node.computer_label
        assert key is not None  # a job with a work dir ran on a computer
        if key not in computers:
            computers[key] = load_computer(key)
        todo.append(WorkdirToClean(node, computers[key], path))
    return todo, skipped


def clean_workdirs(todo: Iterable[WorkdirToClean]) -> int:
    """Remove the work dirs, one connection per computer, recording each on its job as it
    goes (a failure leaves the ones done recorded). Returns how many were removed."""
    by_computer: dict[str, list[WorkdirToClean]] = {}
    for item in todo:
        by_computer.setdefault(item.computer.label, []).append(item)
    done = 0
    for items in by_computer.values():
        with items[0].computer.get_transport() as transport:
            for item in items:
                transport.rmtree(item.path)
                item.node.set_attribute(WORKDIR_CLEANED, {"time": time.time()})
                outputs = item.node.outputs
                if "remote_folder" in outputs and isinstance(outputs["remote_folder"], RemoteData):
                    outputs["remote_folder"].set_extra("cleaned", True)
                done += 1
    return done
