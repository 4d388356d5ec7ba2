"""Creating a profile end to end: configuration, database schema, default user and computer."""

from __future__ import annotations

import getpass
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from veglia.broker import ping_broker
from veglia.config.config import Config
from veglia.config.profile import Profile
from veglia.exceptions import BrokerError, VegliaError
from veglia.storage.backend import StorageBackend
from veglia.storage.models import AuthInfo, Computer, User

__all__ = ["LOCAL_BROKER_URL", "SetupReport", "create_profile", "detect_local_broker"]

LOCAL_BROKER_URL = "amqp://guest:guest@127.0.0.1:5672/"


@dataclass
class SetupReport:
    """What creating a profile did, for the summary the user sees."""

    profile: Profile
    actions: list[str] = field(default_factory=list)


def detect_local_broker() -> str:
    """The local RabbitMQ's URL when it answers with the default account, else ``""``."""
    try:
        ping_broker(LOCAL_BROKER_URL, timeout=2.0)
    except BrokerError:
        return ""
    return LOCAL_BROKER_URL


def _default_email() -> str:
    return f"{getpass.getuser()}@localhost"


def create_profile(config: Config, name: str, options: dict[str, Any]) -> SetupReport:
    """Write the profile, migrate its storage and create its user and default computer.

    All or nothing: when a database step fails (an unreachable PostgreSQL, say), the
    profile is removed again, with the folder it got, so the same command works once the
    cause is fixed. What the database already holds is kept: a rerun migrates on from there.
    """
    folder_existed = config.profile_folder(name).exists()
    profile = config.add_profile(name, options)
    report = SetupReport(profile)
    report.actions.append(f"wrote profile {name!r} to {config.path}")
    if profile.secrets:
        report.actions.append(f"wrote its secrets to {config.secrets_path} (mode 0600)")
    if config.default_profile == name:
        report.actions.append(f"made {name!r} the default profile")
    try:
        _fill_storage(profile, report)
    except BaseException as exc:
        config.delete_profile(name, keep_data=folder_existed)
        if isinstance(exc, VegliaError) and exc.args:
            # The message the user sees says that nothing is left to clean up.
            exc.args = (
                f"{exc.args[0]} Profile {name!r} was not saved: fix this, then run the same "
                "command again.",
                *exc.args[1:],
            )
        raise
    return report


def _fill_storage(profile: Profile, report: SetupReport) -> None:
    storage = StorageBackend.from_profile(profile)
    try:
        before, after = storage.migrate(plugins=False)
        report.actions.append(
            f"migrated the database {profile.storage_url_masked} from "
            f"{before or 'empty'} to schema {after}"
        )
        for plugin, plugin_before, plugin_after in storage.migrate_plugins():
            if plugin_before != plugin_after:
                report.actions.append(
                    f"migrated the tables of plugin {plugin!r} from "
                    f"{plugin_before or 'absent'} to {plugin_after}"
                )
        email = profile.get_option("user.email") or _default_email()
        computer_label = profile.get_option("computer.default")
        with storage.session() as session:
            user = session.scalar(sa.select(User).where(User.email == email))
            if user is None:
                user = User(email=email)
                session.add(user)
                report.actions.append(f"created user {email}")
            if (
                computer_label == "localhost"
                and session.scalar(sa.select(Computer).where(Computer.label == "localhost")) is None
            ):
                computer = Computer(
                    label="localhost",
                    hostname="localhost",
                    description="This machine, through the local transport",
                    transport_type="core.local",
                    scheduler_type=profile.get_option("scheduler.default"),
                    # Asking `ps` about local jobs is cheap: no throttling needed.
                    properties={
                        "workdir": str(profile.folder / "scratch"),
                        "safe_interval": 0.0,
                        "minimum_poll_interval": 0.1,
                    },
                )
                session.add(computer)
                session.flush()
                session.add(AuthInfo(user_id=user.id, computer_id=computer.id))
                report.actions.append(
                    f"created computer 'localhost' (core.local, {computer.scheduler_type}, "
                    f"work dir {computer.properties['workdir']})"
                )
    finally:
        storage.close()
