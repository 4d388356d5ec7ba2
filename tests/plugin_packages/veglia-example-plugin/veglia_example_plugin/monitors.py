"""A monitor shipped by a third-party package."""

from __future__ import annotations

from veglia.plugin_api import ProcessNode, Transport


def nan_guard(
    node: ProcessNode, transport: Transport, path: str = "out.log", limit: int = 1
) -> str | None:
    """Kill the job when `path` in its work directory contains NaN more than `limit` times."""
    text = transport.read_bytes(path).decode(errors="replace")
    count = text.count("NaN")
    if count > limit:
        return f"{path} has {count} NaN values (limit {limit})."
    return None
