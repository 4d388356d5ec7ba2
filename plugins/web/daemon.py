"""``veglia daemon start --web [HOST:PORT]``: the daemon's first worker serves the web view
too, and stops it with itself. The address with its token is written to the daemon's log
and, for ``veglia daemon status``, to a file in the daemon's private folder."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import click

from veglia.plugin_api import ConfigurationError

__all__ = ["WEB_OPTION", "serve_beside_daemon", "status_lines", "stop_beside_daemon"]

LOGGER = logging.getLogger("veglia.daemon.web")
DEFAULT_BIND = "127.0.0.1:8765"

_running: dict[str, Any] = {}
_lock = threading.Lock()


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as host and port."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT, like {DEFAULT_BIND}")
    return host, int(port)


def _checked_bind(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # Lazy: the checks live beside the server, which `daemon start` itself does not run.
    from veglia.plugins.web.server import check_bind

    if value is None:
        return None
    try:
        host, _ = parse_bind(value)
        check_bind(host, tls=False, behind_proxy=False)
    except (ValueError, ConfigurationError) as exc:
        raise click.BadParameter(str(exc)) from None
    return value


WEB_OPTION = click.Option(
    ["--web", "web"],
    metavar="[HOST:PORT]",
    is_flag=False,
    flag_value=DEFAULT_BIND,
    default=None,
    callback=_checked_bind,
    help=f"Serve the web view too (`veglia web`), on {DEFAULT_BIND} unless told; "
    "`veglia daemon status` shows its address.",
)


def _url_file(profile: Any) -> Path:
    return Path(profile.daemon_folder) / "web-url"


def serve_beside_daemon(profile: Any, bind: str) -> None:
    """Serve the web view from a thread of this worker, with a new token."""
    # Lazy: uvicorn and Starlette only in a daemon asked to serve the web view.
    from veglia.plugins.web.server import Listener, WebServer, new_token

    host, port = parse_bind(bind)
    with _lock:
        server = WebServer(profile.name, Listener(host, port), new_token())
        server.start()
        _running["server"] = server
    url_file = _url_file(profile)
    # Private from its first byte: the token logs in.
    url_file.touch(mode=0o600)
    url_file.write_text(server.url + "\n")
    LOGGER.warning("web view of profile %r at %s", profile.name, server.url)


def stop_beside_daemon(profile: Any) -> None:
    with _lock:
        server = _running.pop("server", None)
    if server is not None:
        server.stop()
        _url_file(profile).unlink(missing_ok=True)


def status_lines(profile: Any, bind: str | None) -> list[str]:
    """Where the daemon serves the web view, or that it is about to."""
    if not bind:
        return []
    try:
        url = _url_file(profile).read_text().strip()
    except OSError:
        return [f"Web view: starting on {bind} (or failed: see `veglia daemon logs`)"]
    return [f"Web view: {url}"]
