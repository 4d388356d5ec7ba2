"""``core.email``: notifications by e-mail over SMTP (TLS and authentication optional)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from veglia.plugin_api import Option, hookimpl, parse_boolean, parse_positive_int

if TYPE_CHECKING:
    import smtplib

__all__ = ["SmtpRefused", "notify", "register_options"]


class SmtpRefused(RuntimeError):
    """The SMTP settings would send the password in clear: nothing was sent."""


@hookimpl
def register_options() -> list[Option]:
    return [
        Option(
            "notify.smtp_host", "SMTP server for notification e-mail; empty: none sent.", default=""
        ),
        Option("notify.smtp_port", "SMTP port.", default=25, parse=parse_positive_int),
        Option("notify.smtp_user", "SMTP user name, when the server wants one.", default=""),
        Option(
            "notify.smtp_password",
            "SMTP password, kept in the secrets file.",
            default="",
            secret=True,
        ),
        Option(
            "notify.smtp_starttls",
            "Upgrade the connection with STARTTLS (required: a server not offering it is refused).",
            default=False,
            parse=parse_boolean,
        ),
        Option(
            "notify.smtp_ssl",
            "Connect with TLS from the start (port 465).",
            default=False,
            parse=parse_boolean,
        ),
        Option(
            "notify.smtp_allow_plain_auth",
            "Log in to the SMTP server without STARTTLS or TLS, sending the user name and "
            "password in clear (off: such a login is refused and no e-mail is sent).",
            default=False,
            parse=parse_boolean,
        ),
        Option(
            "notify.smtp_timeout",
            "Seconds to wait for the SMTP server at each step before giving up on a message.",
            default=30,
            parse=parse_positive_int,
        ),
        Option("notify.from", "Sender address of notification e-mail.", default="veglia@localhost"),
    ]


@hookimpl
def notify(event: str, subject: str, body: str, recipients: list[str], profile: Any) -> None:
    host = profile.get_option("notify.smtp_host")
    if not host or not recipients:
        return
    port = int(profile.get_option("notify.smtp_port"))
    use_ssl = bool(profile.get_option("notify.smtp_ssl"))
    # Under TLS from the start a STARTTLS would be refused by the server: it is implied.
    starttls = bool(profile.get_option("notify.smtp_starttls")) and not use_ssl
    user = profile.get_option("notify.smtp_user")
    # Checked before connecting: the password must not leave unless the user accepted it.
    if (
        user
        and not (use_ssl or starttls)
        and not profile.get_option("notify.smtp_allow_plain_auth")
    ):
        raise SmtpRefused(
            f"not sending e-mail to {host}:{port}: logging in as {user!r} would send the "
            "password in clear. Turn on notify.smtp_starttls (or notify.smtp_ssl, port 465), "
            "or set notify.smtp_allow_plain_auth to yes to accept a login without TLS"
        )
    # Lazy: every process loads this hook module (the daemon's supervisor too); smtplib and
    # ssl cost 5 MB, paid only by a process that sends mail.
    import smtplib
    import ssl
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = f"[veglia] {subject}"
    message["From"] = profile.get_option("notify.from")
    message["To"] = ", ".join(recipients)
    message["X-Veglia-Event"] = event
    message.set_content(body)
    timeout = float(profile.get_option("notify.smtp_timeout"))
    context = ssl.create_default_context()
    if use_ssl:
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=timeout, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=timeout)
    with smtp:
        if starttls:
            smtp.ehlo()
            # Continuing in clear would send the password and mail the user asked to protect.
            if not smtp.has_extn("starttls"):
                raise SmtpRefused(
                    f"not sending e-mail: {host}:{port} does not offer STARTTLS, which "
                    "notify.smtp_starttls requires"
                )
            smtp.starttls(context=context)
        if user:
            smtp.login(user, profile.get_option("notify.smtp_password"))
        smtp.send_message(message)
