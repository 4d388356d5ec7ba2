"""The Tower options, and the environment variables Nextflow users know."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from veglia.config.options import Option

__all__ = ["OPTIONS", "TowerSettings", "settings_of"]

DEFAULT_ENDPOINT = "https://api.cloud.seqera.io"


def _endpoint(text: Any) -> str:
    value = str(text).strip().rstrip("/")
    if value and not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value


def _boolean(text: Any) -> bool:
    from veglia.config.options import _boolean as parse

    return parse(text)


OPTIONS = [
    Option(
        "tower.enabled", "Send trace records to Seqera Platform.", default=False, parse=_boolean
    ),
    Option(
        "tower.endpoint",
        "Seqera Platform API URL (else $TOWER_API_ENDPOINT).",
        default="",
        parse=_endpoint,
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
    ),
]


@dataclass(frozen=True)
class TowerSettings:
    enabled: bool
    endpoint: str
    token: str
    workspace_id: str

    def __repr__(self) -> str:  # the token never shows, not even in a traceback
        return f"TowerSettings(enabled={self.enabled}, endpoint={self.endpoint!r})"


def settings_of(profile: Any) -> TowerSettings:
    """Profile options first, then the environment, then the public endpoint."""
    return TowerSettings(
        enabled=bool(profile.get_option("tower.enabled")),
        endpoint=profile.get_option("tower.endpoint")
        or os.environ.get("TOWER_API_ENDPOINT", "").rstrip("/")
        or DEFAULT_ENDPOINT,
        token=profile.get_option("tower.access_token") or os.environ.get("TOWER_ACCESS_TOKEN", ""),
        workspace_id=str(
            profile.get_option("tower.workspace_id") or os.environ.get("TOWER_WORKSPACE_ID", "")
        ),
    )
