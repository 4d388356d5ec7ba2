"""The Tower options, and the environment variables Nextflow users know."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from veglia.plugin_api import Option

__all__ = ["OPTIONS", "TowerSettings", "check_settings", "settings_of"]

DEFAULT_ENDPOINT = "https://api.cloud.seqera.io"


def _endpoint(text: Any) -> str:
    value = str(text).strip().rstrip("/")
    if value and not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value


def _workspace(text: Any) -> str:
    value = str(text).strip()
    if value and not (value.isdigit() and int(value) < 2**63):
        raise ValueError(
            f"{value!r} is not a workspace id: it is the number shown in the Platform's "
            "workspace settings"
        )
    return value


def _boolean(text: Any) -> bool:
    # Lazy: options are read at every start; the client only when checked.
    from veglia.plugin_api import parse_boolean as parse

    return parse(text)


OPTIONS = [
    Option(
        "tower.enabled", "Send trace records to Seqera Platform.", default=False, parse=_boolean
    ),
    Option(
        "tower.endpoint",
        "Seqera Platform API URL (else $TOWER_API_ENDPOINT); a password written into it "
        "moves to tower.password.",
        default="",
        parse=_endpoint,
        password_option="tower.password",
    ),
    Option(
        "tower.password",
        "Password of the user named in tower.endpoint (https://user@host), kept in the "
        "secrets file.",
        default="",
        secret=True,
    ),
    Option(
        "tower.access_token",
        "Seqera Platform access token (else $TOWER_ACCESS_TOKEN).",
        default="",
        secret=True,
    ),
    Option(
        "tower.workspace_id",
        "Workspace id sent as ?workspaceId= (else $TOWER_WORKSPACE_ID).",
        default="",
        parse=_workspace,
    ),
    Option(
        "tower.allow_http",
        "Allow a plain http:// endpoint on another host (the token then crosses the network "
        "in clear).",
        default=False,
        parse=_boolean,
    ),
]


@dataclass(frozen=True)
class TowerSettings:
    enabled: bool
    endpoint: str
    token: str
    workspace_id: str
    allow_http: bool = False
    #: The password of the endpoint's user: never part of :attr:`endpoint`, which is shown.
    password: str = ""

    def __repr__(self) -> str:  # the token never shows, not even in a traceback
        return f"TowerSettings(enabled={self.enabled}, endpoint={self.endpoint!r})"


def settings_of(profile: Any) -> TowerSettings:
    """Profile options first, then the environment, then the public endpoint."""
    # Lazy: options are read at every start; the configuration's URL helper only here.
    from veglia.plugin_api import split_password

    endpoint = profile.get_option("tower.endpoint")
    password = profile.get_option("tower.password") if endpoint else ""
    if not endpoint:
        endpoint, from_environment = split_password(
            os.environ.get("TOWER_API_ENDPOINT", "").rstrip("/") or DEFAULT_ENDPOINT
        )
        password = from_environment or ""
    return TowerSettings(
        enabled=bool(profile.get_option("tower.enabled")),
        endpoint=endpoint,
        password=password,
        token=profile.get_option("tower.access_token") or os.environ.get("TOWER_ACCESS_TOKEN", ""),
        workspace_id=str(
            profile.get_option("tower.workspace_id") or os.environ.get("TOWER_WORKSPACE_ID", "")
        ).strip(),
        allow_http=bool(profile.get_option("tower.allow_http")),
    )


def check_settings(settings: TowerSettings) -> None:
    """Settings no request could pass with (checked before any is sent)."""
    # Lazy: options are read at every start; the client only when checked.
    from veglia.plugins.tower.client import check_endpoint
    from veglia.plugins.tower.exceptions import SettingsRejected

    check_endpoint(settings.endpoint, settings.allow_http)
    try:
        _workspace(settings.workspace_id)
    except ValueError as exc:
        raise SettingsRejected(f"tower.workspace_id (or $TOWER_WORKSPACE_ID): {exc}.") from None
