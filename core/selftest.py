"""Health checks of a profile, shared by ``veglia setup`` and ``veglia status``."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from veglia.broker import ping_broker
from veglia.config.options import get_options
from veglia.config.profile import Profile
from veglia.exceptions import VegliaError
from veglia.storage.backend import StorageBackend
from veglia.storage.models import Node

__all__ = ["CheckResult", "check_broker", "check_config", "check_storage", "run_checks"]


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str
    hint: str = ""


def check_config(profile: Profile) -> CheckResult:
    options = get_options()
    for name, value in {**profile.options, **profile.secrets}.items():
        if name not in options:
            return CheckResult(
                "config",
                False,
                f"profile {profile.name!r} sets unknown option {name!r}",
                f"remove it with `veglia config unset {name}` (or install the plugin that adds it)",
            )
        try:
            options[name].validate(value)
        except VegliaError as exc:
            return CheckResult(
                "config", False, str(exc), f"fix it with `veglia config set {name} VALUE`"
            )
    return CheckResult("config", True, f"profile {profile.name!r} ({profile.folder})")


def check_storage(profile: Profile) -> CheckResult:
    """Schema up to date, and a node and a blob written, read back and removed."""
    storage = StorageBackend.from_profile(profile)
    try:
        storage.check_schema()
        marker = secrets.token_hex(8)
        with storage.session() as session:
            node = Node(node_type="selftest", label=marker)
            session.add(node)
            session.flush()
            found = session.scalar(sa.select(Node.label).where(Node.id == node.id))
            session.delete(node)
        if found != marker:
            raise VegliaError("a node written to the database did not read back")
        payload = os.urandom(64)
        sha256, _ = storage.repository.put_bytes(payload)
        if storage.repository.get_bytes(sha256) != payload:
            raise VegliaError("a blob written to the repository did not read back")
        storage.repository.verify(sha256)
    except VegliaError as exc:
        hint = "run `veglia storage migrate`" if "migrate" in str(exc) else ""
        return CheckResult("storage", False, str(exc), hint)
    except sa.exc.SQLAlchemyError as exc:
        return CheckResult("storage", False, f"database error: {exc}", "check storage.url")
    except OSError as exc:
        return CheckResult(
            "storage", False, f"repository error: {exc}", f"check {profile.repository_location}"
        )
    finally:
        storage.close()
    return CheckResult(
        "storage", True, f"{profile.storage_url_masked}, repository {profile.repository_location}"
    )


def check_broker(profile: Profile) -> CheckResult:
    if not profile.broker_url:
        return CheckResult("broker", True, "none configured (single-process daemon)")
    try:
        server = ping_broker(profile.broker_url)
    except VegliaError as exc:
        return CheckResult(
            "broker", False, str(exc), "start RabbitMQ or `veglia config unset broker.url`"
        )
    return CheckResult("broker", True, f"{server} at {profile.broker_url_masked}")


def check_daemon(profile: Profile) -> CheckResult:
    """A stopped daemon is a normal state; one that runs older plugin code than is
    installed (a plugin upgraded under it) fails."""
    # Lazy: the engine only for the check that needs it.
    from veglia.engine.daemon import DaemonFiles
    from veglia.engine.daemon.installed_code import plugin_changes

    files = DaemonFiles(profile)
    pid = files.supervisor_pid()
    if pid is None:
        return CheckResult(
            "daemon", True, "not running (start it with `veglia daemon start` to submit jobs)"
        )
    workers = len(files.read_status().get("workers", []))
    running = f"running, supervisor pid {pid}, {workers} worker(s)"
    changes = plugin_changes(profile)
    if changes:
        return CheckResult(
            "daemon",
            False,
            f"{running}, on the plugin code it started with, not what is installed now: "
            + ", ".join(changes),
            "restart it with `veglia daemon restart`",
        )
    return CheckResult("daemon", True, running)


CHECKS: tuple[Callable[[Profile], CheckResult], ...] = (
    check_config,
    check_storage,
    check_broker,
    check_daemon,
)


def run_checks(profile: Profile) -> list[CheckResult]:
    """Run every check in turn; a failed config check skips the others."""
    results = [check_config(profile)]
    if results[0].ok:
        results.extend(check(profile) for check in CHECKS[1:])
    return results
