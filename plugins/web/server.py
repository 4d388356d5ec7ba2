"""Run the app with uvicorn on a socket bound here, so the printed address has the real port
(``--port 0`` picks a free one)."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import threading
from dataclasses import dataclass

import uvicorn

from veglia.plugin_api import ConfigurationError
from veglia.plugins.web.app import WebSettings, create_app

__all__ = ["Listener", "WebServer", "check_bind", "is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def check_bind(host: str, tls: bool, behind_proxy: bool) -> None:
    """Refuse to serve outside this machine in clear text, unless a proxy does TLS."""
    if not is_loopback(host) and not tls and not behind_proxy:
        raise ConfigurationError(
            f"Refusing to serve on {host} without TLS: passwords and the token would cross "
            "the network in clear. Give --certfile and --keyfile, or --behind-proxy when a "
            "reverse proxy serves it over HTTPS, or use --host 127.0.0.1."
        )


@dataclass(frozen=True)
class Listener:
    """Where to listen, and how."""

    host: str = "127.0.0.1"
    port: int = 8765
    certfile: str | None = None
    keyfile: str | None = None
    behind_proxy: bool = False

    @property
    def tls(self) -> bool:
        return bool(self.certfile)


class WebServer:
    """One uvicorn server for a profile: bind (checked) at construction, then :meth:`run`
    here or :meth:`start` in a thread; :meth:`stop` ends it."""

    def __init__(
        self,
        profile_name: str,
        listener: Listener,
        token: str | None,
        secret_key: str | None = None,
    ) -> None:
        if bool(listener.certfile) != bool(listener.keyfile):
            raise ConfigurationError("Give both --certfile and --keyfile for TLS, or neither.")
        check_bind(listener.host, listener.tls, listener.behind_proxy)
        self.listener = listener
        self.token = token
        settings = WebSettings(
            profile_name=profile_name,
            token=token,
            secret_key=secret_key or secrets.token_urlsafe(32),
            https=listener.tls or listener.behind_proxy,
        )
        family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((listener.host, listener.port))
        except OSError as exc:
            self.socket.close()
            raise ConfigurationError(
                f"Cannot listen on {listener.host}:{listener.port}: {exc.strerror}. "
                "Pick another --port (0 for any free one)."
            ) from None
        self.socket.listen(128)
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(
            create_app(settings),
            ssl_certfile=listener.certfile,
            ssl_keyfile=listener.keyfile,
            proxy_headers=listener.behind_proxy,
            log_level="warning",
            # Live streams never end by themselves: do not wait for them at a stop.
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        scheme = "https" if self.listener.tls else "http"
        host = self.listener.host
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{self.port}/"

    @property
    def url(self) -> str:
        """The address to open: with the token, when there is one."""
        return f"{self.base_url}?token={self.token}" if self.token else self.base_url

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C) or :meth:`stop`."""
        self._server.run(sockets=[self.socket])

    def start(self) -> None:
        """Serve from a daemon thread; return once it accepts connections."""
        self._thread = threading.Thread(target=self.run, daemon=True, name="veglia-web")
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            self._thread.join(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.socket.close()


def new_token() -> str:
    return secrets.token_urlsafe(24)
