"""A real SMTP server on loopback (aiosmtpd) that keeps what it receives."""

from __future__ import annotations

from email import message_from_bytes

import pytest


@pytest.fixture
def smtp_server():
    from aiosmtpd.controller import Controller

    class Inbox:
        def __init__(self) -> None:
            self.messages = []

        async def handle_DATA(self, server, session, envelope):
            self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
            return "250 OK"

    import socket

    with socket.socket() as probe:  # a free port: aiosmtpd checks it can connect to it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inbox = Inbox()
    inbox.port = port
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox
    controller.stop()
