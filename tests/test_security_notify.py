"""Notification e-mail does not give the SMTP password away and does not hold up the
event loop (security review, items 6 and 11), against real SMTP servers on loopback."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest

from veglia_fixtures.profiles import make_profile


def _mail_options(port: int, **extra: str) -> dict[str, str]:
    return {
        "notify.email": "ada@example.org",
        "notify.smtp_host": "127.0.0.1",
        "notify.smtp_port": str(port),
        "notify.from": "veglia@example.org",
        **extra,
    }


def _credentials(port: int, **extra: str) -> dict[str, str]:
    return _mail_options(
        port, **{"notify.smtp_user": "veglia", "notify.smtp_password": "s3cret", **extra}
    )


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_password_is_not_sent_in_clear_by_default(veglia_home, smtp_auth_server, caplog):
    from veglia.notifications import notify

    make_profile(**_credentials(smtp_auth_server.port))
    notify("process_excepted", "process 1 excepted", "a bug")
    assert smtp_auth_server.logins == []
    assert smtp_auth_server.messages == []
    [error] = _errors(caplog)
    assert "\n" not in error
    assert "in clear" in error
    for fix in ("notify.smtp_starttls", "notify.smtp_ssl", "notify.smtp_allow_plain_auth"):
        assert fix in error


def test_a_plain_login_is_made_when_the_profile_accepts_it(veglia_home, smtp_auth_server, caplog):
    from veglia.notifications import notify

    make_profile(**_credentials(smtp_auth_server.port, **{"notify.smtp_allow_plain_auth": "true"}))
    notify("process_excepted", "process 1 excepted", "a bug")
    assert smtp_auth_server.logins == [("veglia", "s3cret", False)]
    assert [m["X-Veglia-Event"] for _, m in smtp_auth_server.messages] == ["process_excepted"]
    assert _errors(caplog) == []


def test_the_password_goes_under_starttls(veglia_home, smtp_tls_server, caplog):
    from veglia.notifications import notify

    make_profile(**_credentials(smtp_tls_server.port, **{"notify.smtp_starttls": "yes"}))
    notify("process_excepted", "process 1 excepted", "a bug")
    assert _errors(caplog) == []
    assert smtp_tls_server.logins == [("veglia", "s3cret", True)]
    assert len(smtp_tls_server.messages) == 1


def test_a_server_without_starttls_is_refused_when_starttls_is_on(
    veglia_home, smtp_auth_server, caplog
):
    from veglia.notifications import notify

    make_profile(**_credentials(smtp_auth_server.port, **{"notify.smtp_starttls": "yes"}))
    notify("process_excepted", "process 1 excepted", "a bug")
    assert smtp_auth_server.logins == []
    assert smtp_auth_server.messages == []
    [error] = _errors(caplog)
    assert "STARTTLS" in error


def test_notify_on_the_event_loop_returns_at_once_while_the_server_hangs(
    veglia_home, silent_smtp_server
):
    from veglia.notifications import notify

    make_profile(**_mail_options(silent_smtp_server.port))  # the default timeout: 30 s

    async def worker() -> tuple[float, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.1)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.15)
        started = time.monotonic()
        notify("process_excepted", "process 1 excepted", "a bug")
        returned = time.monotonic() - started
        ticked = ticks
        await asyncio.sleep(1)
        task.cancel()
        return returned, ticks - ticked

    returned, ticks_after = asyncio.run(worker())
    assert returned < 2
    assert ticks_after >= 5  # the loop went on while the server was silent
    deadline = time.monotonic() + 10
    while not silent_smtp_server.connections:  # sent off the loop, not dropped
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_hung_server_is_given_up_after_the_timeout_and_logged(
    veglia_home, silent_smtp_server, caplog
):
    from veglia.notifications import flush, notify

    make_profile(**_mail_options(silent_smtp_server.port, **{"notify.smtp_timeout": "1"}))

    async def worker() -> None:
        notify("computer_unreachable", "computer gone is unreachable", "paused")

    asyncio.run(worker())
    assert flush(timeout=10)
    [error] = _errors(caplog)
    assert "\n" not in error
    assert "core.email" in error and "computer_unreachable" in error and "timed out" in error


def test_a_command_that_notifies_from_a_loop_delivers_before_it_exits(veglia_home, smtp_server):
    make_profile(**_mail_options(smtp_server.port))
    script = textwrap.dedent(
        """
        import asyncio
        from veglia import load_profile
        from veglia.notifications import notify

        load_profile("test")

        async def main():
            notify("workflow_finished", "pipeline 7 finished", "done")

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "VEGLIA_HOME": str(veglia_home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert [m["X-Veglia-Event"] for _, m in smtp_server.messages] == ["workflow_finished"]
