"""``veglia computer test``: connect to a computer and check its user, work dir and scheduler,
with a ✔ or ✘ and a hint per check."""

from __future__ import annotations

import functools
import posixpath
import secrets
import time
from collections.abc import Callable
from typing import Any

import click

from veglia.cli.completion import complete_computer_labels
from veglia.cli.output import console, echo_success
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import ConfigurationError, VegliaError
from veglia.orm.computers import load_computer
from veglia.selftest import CheckResult
from veglia.workdir_root import private_root

__all__ = ["computer_test"]


def _print_checks(results: list[CheckResult]) -> bool:
    width = max(len(r.name) for r in results) + 2
    for result in results:
        mark = "[green]✔[/green]" if result.ok else "[red]✘[/red]"
        console.print(f"{mark} {result.name + ':':<{width}}", end="")
        console.print(result.detail, markup=False)
        if not result.ok and result.hint:
            console.print(f"  [dim]hint:[/dim] {result.hint}")
    return all(r.ok for r in results)


def _check(results: list[CheckResult], name: str, hint: str, step: Callable[[], str]) -> bool:
    try:
        results.append(CheckResult(name, True, step()))
    except (VegliaError, OSError) as exc:
        results.append(CheckResult(name, False, str(exc), hint))
        return False
    return True


def _workdir_check(transport: Any, workdir: str) -> str:

    private_root(transport, workdir)
    probe = posixpath.join(workdir, f".veglia-test-{secrets.token_hex(4)}")
    data = secrets.token_bytes(64)
    transport.write_bytes(probe, data)
    try:
        if transport.read_bytes(probe) != data:
            raise ConfigurationError(f"{probe} read back different bytes than were written.")
    finally:
        transport.remove(probe)
    return f"{workdir} exists and is writable"


def _list_jobs(transport: Any, scheduler: Any, user: str) -> str:
    command = scheduler.joblist_command(user=user)
    jobs = scheduler.parse_joblist_output(*transport.exec_command(command, timeout=60))
    return f"`{command}` ran: {len(jobs)} jobs of {user}"


@click.command("test")
@click.argument("label", shell_complete=complete_computer_labels)
@pass_state
def computer_test(state: CliState, label: str) -> int:
    """Connect to computer LABEL and check user, work dir and scheduler; ✔/✘ per check."""

    state.profile  # noqa: B018
    computer = load_computer(label)
    transport, scheduler = computer.get_transport(), computer.get_scheduler()
    fix = (
        f"check the options (`veglia computer show {label}`) and fix them with "
        f"`veglia computer configure {label}`"
    )
    checks: list[CheckResult] = []
    start = time.monotonic()
    whoami = functools.cache(transport.whoami)

    def connect() -> str:
        transport.open()
        return (
            f"{computer.transport_type} to {computer.hostname} in {time.monotonic() - start:.2f} s"
        )

    try:
        if _check(checks, "connect", fix, connect):
            _check(checks, "whoami", fix, lambda: f"commands run as {whoami()}")
            user = whoami() if checks[-1].ok else "unknown"
            workdir = computer.get_workdir(user, transport.home() if checks[-1].ok else "")
            hint = (
                f"pick a work dir you can write, e.g. under your home: "
                f"`veglia computer set {label} -w '{{home}}/veglia-work'`"
            )
            _check(checks, "work dir", hint, lambda: _workdir_check(transport, workdir))
            hint = f"is {computer.scheduler_type} installed there, and on the PATH?"
            _check(checks, "scheduler", hint, lambda: _list_jobs(transport, scheduler, user))
    finally:
        transport.close()
    if _print_checks(checks):
        echo_success(f"Computer {label!r} is ready for jobs.")
        return 0
    return 1
