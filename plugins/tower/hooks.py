"""The Tower plugin's hook implementations."""

from __future__ import annotations

from typing import Any

import click

from veglia.hookspecs import hookimpl
from veglia.plugins.tower.settings import OPTIONS, settings_of

__all__ = ["register_commands", "register_options", "trace_ready"]


@hookimpl
def register_options() -> list:
    return list(OPTIONS)


def run_key_of(node: Any) -> str:
    """Jobs with the same ``tower_run`` option form one Platform run; others run alone."""
    return (node.options or {}).get("tower_run") or f"veglia-process-{node.pk}"


def _run_still_active(node: Any, run_key: str) -> bool:
    import sqlalchemy as sa

    from veglia.manage import get_storage
    from veglia.storage.models import Node

    if not (node.options or {}).get("tower_run"):
        return False
    with get_storage().session() as session:
        return bool(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(Node)
                .where(
                    Node.node_type == "process.calcjob",
                    Node.id != node.pk,
                    Node.process_state.in_(("created", "running", "waiting")),
                    Node.attributes["options"]["tower_run"].as_string() == run_key,
                )
            )
        )


@hookimpl
def trace_ready(node: Any, record: Any) -> None:
    """Queue the record durably; the daemon (or `veglia tower flush`) sends it."""
    from veglia.manage import get_profile
    from veglia.plugins.tower import outbox

    if not settings_of(get_profile()).enabled:
        return
    run_key = run_key_of(node)
    data = record.to_dict()
    data["cached"] = bool(node.get_attribute("cached_from"))
    outbox.enqueue(run_key, "task", record.task_id, record.attempt, data)
    if not _run_still_active(node, run_key):
        outbox.enqueue(run_key, "complete", 0, 1, {})


@hookimpl
def register_commands(cli: click.Group) -> None:
    @cli.group("tower")
    def tower() -> None:
        """Reporting to Seqera Platform (Tower)."""

    @tower.command("status")
    @click.option("-p", "--profile", "profile_name", default=None, help="Profile.")
    def status(profile_name: str | None) -> None:
        """Show the outbox: pending, sent, failed, and the last error."""
        from veglia import load_profile
        from veglia.plugins.tower import outbox
        from veglia.plugins.tower.sender import TowerSender

        profile = load_profile(profile_name) if profile_name else _profile()
        settings = settings_of(profile)
        counts = outbox.status_counts()
        click.echo(f"enabled:   {'yes' if settings.enabled else 'no'}")
        click.echo(f"endpoint:  {settings.endpoint}")
        click.echo(f"workspace: {settings.workspace_id or '-'}")
        click.echo(f"token:     {'set' if settings.token else 'missing'}")
        click.echo(f"pending:   {counts['pending']}")
        click.echo(f"sent:      {counts['sent']}")
        click.echo(f"failed:    {counts['failed']}")
        click.echo(f"last error: {counts['last_error'] or '-'}")
        paused = TowerSender(profile, settings).paused_reason()
        if paused:
            click.echo(f"paused:    {paused}")

    @tower.command("flush")
    def flush() -> None:
        """Send what is pending now (the daemon does this by itself)."""
        from veglia.plugins.tower.sender import TowerSender

        report = TowerSender(_profile()).send_pending()
        click.echo(f"sent {report.sent} record(s)")
        for error in report.errors:
            click.echo(f"not yet: {error}")
        if report.paused:
            raise click.ClickException(f"paused: {report.paused}")


def _profile() -> Any:
    from veglia.manage import get_profile

    click_context = click.get_current_context()
    state = click_context.find_root().obj
    if state is not None and getattr(state, "profile_name", None):
        from veglia import load_profile

        return load_profile(state.profile_name)
    return get_profile()
