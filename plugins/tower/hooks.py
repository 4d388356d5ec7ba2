"""The Tower plugin's hook implementations."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import click

from veglia.plugin_api import hookimpl
from veglia.plugins.tower.settings import OPTIONS, settings_of

if TYPE_CHECKING:
    # Lazy: every process loads this hook module; Tower's code only when used.
    from veglia.plugin_api import CalcJobOption

__all__ = [
    "calcjob_options",
    "change_stamp_parts",
    "daemon_started",
    "daemon_stopping",
    "overview_panels",
    "register_commands",
    "register_options",
    "storage_migrations",
    "trace_ready",
    "trace_updated",
]

#: Set to stop the sender thread of this daemon (one per daemon, beside the workers).
_SENDER_STOP = threading.Event()


@hookimpl
def register_options() -> list[Any]:
    return list(OPTIONS)


@hookimpl
def storage_migrations() -> Any:
    """The outbox and runs are Tower's own tables, with Tower's own migrations."""
    # Lazy: SQLAlchemy's table definitions only when the storage is opened.
    from veglia.plugins.tower.tables import MIGRATIONS

    return MIGRATIONS


@hookimpl
def change_stamp_parts() -> list[Any]:
    """The outbox's newest record, pending count, runs and last send: what the overview
    panel shows."""
    # Lazy: SQLAlchemy only when a page watches the database.
    import sqlalchemy as sa

    # Lazy: Tower's tables with SQLAlchemy, for the same reason.
    from veglia.plugins.tower.tables import report_outbox, report_runs

    return [
        sa.select(sa.func.max(report_outbox.c.id)),
        sa.select(sa.func.count()).where(report_outbox.c.status == "pending"),
        sa.select(sa.func.count()).select_from(report_runs),
        sa.select(sa.func.max(report_runs.c.last_sent)),
    ]


@hookimpl
def calcjob_options() -> list[CalcJobOption]:
    """``metadata.options.tower_run``: jobs with the same value form one Platform run."""
    from veglia.plugin_api import CalcJobOption  # the engine only when jobs are

    return [CalcJobOption("tower_run", str, "Seqera Platform run this job is a task of.")]


def _queue(node: Any, record: Any, kind: str) -> None:
    # Lazy: every process loads this hook module (`veglia --help` too); Tower's code, and
    # with its run records SQLAlchemy, only when used.
    from veglia.plugin_api import get_profile
    from veglia.plugins.tower import outbox, payload
    from veglia.plugins.tower.runs import active_jobs, run_key_of, run_meta

    if not settings_of(get_profile()).enabled:
        return
    run_key = run_key_of(node)
    # Made into the API's Task now: what cannot be sent is known before it is queued.
    task = payload.task(record.to_dict())
    outbox.enqueue(run_key, kind, record.task_id, record.attempt, task, run_meta(node))
    if kind == "task" and not active_jobs(run_key, node.pk):
        outbox.enqueue(run_key, "complete", 0, 1, {})


@hookimpl
def daemon_started(profile: Any) -> None:
    """Send the outbox from a thread of the daemon's first worker, while Tower is on (the
    daemon reads the options again when they change: turning Tower on needs no restart)."""
    # Lazy: every process loads this hook module; Tower's code only when used.
    from veglia.plugins.tower.sender import TowerSender

    _SENDER_STOP.clear()
    sender = TowerSender(profile)
    threading.Thread(
        target=sender.run_forever, args=(_SENDER_STOP,), daemon=True, name="veglia-tower"
    ).start()


@hookimpl
def daemon_stopping(profile: Any) -> None:
    _SENDER_STOP.set()


@hookimpl
def trace_updated(node: Any, record: Any) -> None:
    """Queue the task as submitted or running: the Platform shows live tasks."""
    _queue(node, record, record.status.lower())


@hookimpl
def trace_ready(node: Any, record: Any) -> None:
    """Queue the record durably; the daemon (or `veglia tower flush`) sends it."""
    _queue(node, record, "task")


@hookimpl
def overview_panels() -> list[Any]:
    """The outbox's health on the overview: pending, sent and refused reports; none when
    Tower is off and nothing was ever queued."""
    # Lazy: every process loads this hook module; Tower's code only when used.
    from veglia.plugin_api import Panel, get_profile
    from veglia.plugins.tower import outbox

    settings = settings_of(get_profile())
    enabled = settings.enabled
    counts = outbox.status_counts()
    runs = counts["runs"]
    if not enabled and not (counts["pending"] or counts["sent"] or counts["held"] or runs):
        return []
    rows: list[tuple[str, Any]] = [
        ("enabled", "yes" if enabled else "no"),
        ("pending", counts["pending"]),
        ("sent", counts["sent"]),
        ("refused", counts["held"]),
        ("runs", ", ".join(f"{runs.get(state, 0)} {state}" for state in _RUN_STATES)),
    ]
    if counts["last_error"]:
        error = str(counts["last_error"])
        # Whoever reads the overview may not see the token, were a server to echo it.
        rows.append(
            ("last error", error.replace(settings.token, "***") if settings.token else error)
        )
    if runs.get("refused"):
        rows.append(("what to do", "veglia tower status, then veglia tower retry"))
    return [Panel("Seqera Platform (Tower) reports", rows)]


@hookimpl
def register_commands(cli: click.Group) -> None:
    @cli.group("tower")
    def tower() -> None:
        """Reporting to Seqera Platform (Tower)."""

    @tower.command("status")
    @click.option("-p", "--profile", "profile_name", default=None, help="Profile.")
    def status(profile_name: str | None) -> None:
        """Show the outbox (pending, sent, held), the runs, and why any was refused."""
        # Lazy: every process loads this hook module; Tower's code only when used.
        from veglia.plugin_api import load_profile
        from veglia.plugins.tower import outbox
        from veglia.plugins.tower.sender import TowerSender

        profile = load_profile(profile_name) if profile_name else _profile()
        settings = settings_of(profile)
        counts = outbox.status_counts()
        runs = counts["runs"]
        click.echo(f"enabled:   {'yes' if settings.enabled else 'no'}")
        click.echo(f"endpoint:  {settings.endpoint}")
        click.echo(f"workspace: {settings.workspace_id or '-'}")
        click.echo(f"token:     {'set' if settings.token else 'missing'}")
        click.echo(f"pending:   {counts['pending']}")
        click.echo(f"sent:      {counts['sent']}")
        click.echo(f"held:      {counts['held']} (records of refused runs)")
        click.echo(
            "runs:      " + ", ".join(f"{runs.get(state, 0)} {state}" for state in _RUN_STATES)
        )
        sender = TowerSender(profile, settings)
        click.echo(f"last error: {sender.last_error() or counts['last_error'] or '-'}")
        paused = sender.paused_reason()
        if paused:
            click.echo(f"paused:    {paused}")
        refused = outbox.refused_runs()
        if refused:
            click.echo("refused runs (send them again with `veglia tower retry [RUN]`):")
        for run in refused:
            why = run.data.get("refused") or {}
            code = f"HTTP {why['status']}" if why.get("status") else "not sent"
            click.echo(
                f"  {run.run_key}: {why.get('request', '?')} refused ({code}) at "
                f"{why.get('time', '?')}: {why.get('message', '')}"
            )

    @tower.command("flush")
    def flush() -> None:
        """Send what is pending now (the daemon does this by itself)."""
        # Lazy: every process loads this hook module; Tower's code only when used.
        from veglia.plugins.tower.sender import TowerSender

        report = TowerSender(_profile()).send_pending()
        click.echo(_sent_line(report))
        for error in report.errors:
            click.echo(f"not yet: {error}")
        for refused in report.refused:
            click.echo(f"refused: {refused}")
        if report.paused:
            raise click.ClickException(f"paused: {report.paused}")

    @tower.command("retry")
    @click.argument("run", required=False)
    def retry(run: str | None) -> None:
        """Send refused runs again (all, or RUN), once what was wrong is fixed."""
        # Lazy: every process loads this hook module; Tower's code only when used.
        from veglia.plugins.tower import outbox

        _profile()
        retried = outbox.retry_runs(run)
        if run is not None and not retried:
            known = ", ".join(r.run_key for r in outbox.refused_runs()) or "none"
            raise click.ClickException(f"no refused run {run!r} (refused runs: {known})")
        for key in retried:
            click.echo(f"{key}: queued again")
        if not retried:
            click.echo("no refused run")


_RUN_STATES = ("new", "begun", "completed", "refused")


def _sent_line(report: Any) -> str:
    """What one pass sent, counted as `tower status` counts it (records), then by kind."""
    if not report.records:
        return "sent nothing"
    runs = len(report.runs)
    return (
        f"sent {report.records} record(s) of {runs} run(s): {report.sent} task update(s), "
        f"{report.completed} run(s) completed"
    )


def _profile() -> Any:
    # Lazy: every process loads this hook module; Tower's code only when used.
    from veglia.plugin_api import get_profile

    click_context = click.get_current_context()
    state = click_context.find_root().obj
    if state is not None and getattr(state, "profile_name", None):
        # Lazy: every process loads this hook module; Tower's code only when used.
        from veglia.plugin_api import load_profile

        return load_profile(state.profile_name)
    return get_profile()
