"""``core.local``: this machine's files and shell, with no connection to open."""

from __future__ import annotations

from typing import Any

from veglia.plugin_api import LocalTransportBase, read_requests

__all__ = ["LocalTransport"]


class LocalTransport(LocalTransportBase):
    """Run jobs on the machine veglia runs on; files are copied, commands run with bash."""

    def __init__(self, hostname: str = "localhost", **auth_params: object) -> None:
        super().__init__(hostname, **auth_params)
        self._open = False

    def open(self) -> None:
        self._open = True

    def close(self) -> None:
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def read_files(self, payload: dict[str, Any]) -> list[Any]:
        """In process: the files are on this machine, no command is needed."""
        return read_requests(payload)
