"""Real SMTP servers on loopback (aiosmtpd) that keep what they receive, and one that never
answers."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import threading
from collections.abc import Iterator
from email import message_from_bytes
from pathlib import Path
from typing import Any

import pytest


class Inbox:
    """What an aiosmtpd server received: messages, and every AUTH a client tried (login,
    password, whether the connection was under TLS by then)."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Any]] = []
        self.logins: list[tuple[str, str, bool]] = []
        self.port = 0

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        from aiosmtpd.smtp import AuthResult

        self.logins.append(
            (auth_data.login.decode(), auth_data.password.decode(), session.ssl is not None)
        )
        return AuthResult(success=True)


def _free_port() -> int:
    with socket.socket() as probe:  # a free port: aiosmtpd checks it can connect to it
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(inbox: Inbox, **smtp_parameters: Any) -> Iterator[Inbox]:
    from aiosmtpd.controller import Controller

    inbox.port = _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port, **smtp_parameters)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.fixture
def smtp_server() -> Iterator[Inbox]:
    yield from _serve(Inbox())


@pytest.fixture
def smtp_auth_server() -> Iterator[Inbox]:
    """Offers AUTH without TLS and accepts any password, as a careless relay does: what
    the client sends is in ``logins``."""
    inbox = Inbox()
    yield from _serve(inbox, authenticator=inbox.authenticate, auth_require_tls=False)


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (the certificate is its own CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "smtp-cert.pem", folder / "smtp-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture
def smtp_tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Inbox]:
    """Offers STARTTLS and AUTH only under it, with a certificate this process trusts
    (through ``SSL_CERT_FILE``, read by ``ssl.create_default_context``)."""
    import ssl

    cert_file, key_file = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    inbox = Inbox()
    yield from _serve(inbox, authenticator=inbox.authenticate, tls_context=context)


class SilentServer:
    """Accepts connections and never says a word, like an SMTP server that hangs."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections.append(connection)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._listener.close()
        for connection in self.connections:  # the client waiting on it gets an end of file
            connection.close()


@pytest.fixture
def silent_smtp_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()
