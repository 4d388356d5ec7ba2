"""What a Platform run is in veglia's terms: its key, its launch, its jobs still to come."""

from __future__ import annotations

import inspect
import os
import posixpath
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from veglia.plugin_api import (
    JOB_ID,
    LAUNCH,
    OPTIONS,
    Node,
    get_profile,
    get_storage,
    load_process_class,
)

__all__ = ["active_jobs", "run_key_of", "run_meta", "unsubmitted_jobs"]

_ACTIVE = ("created", "running", "waiting")


def run_key_of(node: Any) -> str:
    """Jobs with the same ``tower_run`` option form one Platform run; others run alone."""
    return (node.options or {}).get("tower_run") or f"veglia-process-{node.pk}"


def run_meta(node: Any) -> dict[str, Any]:
    """The launch of a run as its first job tells it (the ``Workflow`` fields)."""

    launch = node.get_attribute(LAUNCH) or {}
    script = _source_file(node.process_type)
    home = str(Path.home())
    # The computer's work dir for the user: a job's is that, then three UUID shards.
    job_dir = node.remote_workdir or ""
    work_dir = posixpath.dirname(posixpath.dirname(posixpath.dirname(job_dir)))
    return {
        "projectName": node.process_type or "veglia",
        "userName": launch.get("user") or _user(),
        "commandLine": launch.get("command") or f"veglia process show {node.pk}",
        "launchDir": launch.get("cwd") or home,
        "workDir": work_dir or home,
        "scriptName": os.path.basename(script) if script else node.process_type,
        "scriptFile": script or node.process_type,
        "projectDir": os.path.dirname(script) if script else home,
        "homeDir": home,
        "profile": get_profile().name,
        "submit": node.ctime.timestamp() * 1000 if node.ctime else None,
    }


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _source_file(process_type: str) -> str | None:

    try:
        return inspect.getsourcefile(load_process_class(process_type))
    except Exception:  # a class that cannot be loaded here still has a run
        return None


def _jobs_of_run(run_key: str) -> Any:

    query = (
        sa.select(sa.func.count())
        .select_from(Node)
        .where(Node.node_type == "process.calcjob", Node.process_state.in_(_ACTIVE))
    )
    if run_key.startswith("veglia-process-") and run_key[15:].isdigit():
        return query.where(Node.id == int(run_key[15:]))
    return query.where(Node.attributes[OPTIONS]["tower_run"].as_string() == run_key)


def active_jobs(run_key: str, exclude_pk: int) -> int:
    """Jobs of the run that have not ended, other than ``exclude_pk``."""

    with get_storage().session() as session:
        return session.scalar(_jobs_of_run(run_key).where(Node.id != exclude_pk)) or 0


def unsubmitted_jobs(run_key: str) -> int:
    """Jobs of the run that wait to be submitted: the Platform's ``pending``."""

    with get_storage().session() as session:
        return (
            session.scalar(
                _jobs_of_run(run_key).where(Node.attributes[JOB_ID].as_string().is_(None))
            )
            or 0
        )
