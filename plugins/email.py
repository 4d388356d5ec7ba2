"""``core.email``: notifications by e-mail over SMTP (TLS and authentication optional)."""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from typing import Any

from veglia.config.options import Option, _boolean, _positive_int
from veglia.hookspecs import hookimpl

__all__ = ["notify", "register_options"]


@hookimpl
def register_options() -> list[Option]:
    return [
        Option(
            "notify.smtp_host", "SMTP server for notification e-mail; empty: none sent.", default=""
        ),
        Option("notify.smtp_port", "SMTP port.", default=25, parse=_positive_int),
        Option("notify.smtp_user", "SMTP user name, when the server wants one.", default=""),
        Option(
            "notify.smtp_password",
            "SMTP password, kept in the secrets file.",
            default="",
            secret=True,
        ),
        Option(
            "notify.smtp_starttls",
            "Upgrade the connection with STARTTLS.",
            default=False,
            parse=_boolean,
        ),
        Option(
            "notify.smtp_ssl",
            "Connect with TLS from the start (port 465).",
            default=False,
            parse=_boolean,
        ),
        Option("notify.from", "Sender address of notification e-mail.", default="veglia@localhost"),
    ]


@hookimpl
def notify(event: str, subject: str, body: str, recipients: list[str], profile: Any) -> None:
    host = profile.get_option("notify.smtp_host")
    if not host or not recipients:
        return
    message = EmailMessage()
    message["Subject"] = f"[veglia] {subject}"
    message["From"] = profile.get_option("notify.from")
    message["To"] = ", ".join(recipients)
    message["X-Veglia-Event"] = event
    message.set_content(body)
    port = int(profile.get_option("notify.smtp_port"))
    context = ssl.create_default_context()
    if profile.get_option("notify.smtp_ssl"):
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=30, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=30)
    with smtp:
        if profile.get_option("notify.smtp_starttls"):
            smtp.starttls(context=context)
        user = profile.get_option("notify.smtp_user")
        if user:
            smtp.login(user, profile.get_option("notify.smtp_password"))
        smtp.send_message(message)
