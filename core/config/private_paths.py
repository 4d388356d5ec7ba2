"""Folders and files only their owner may read: the veglia home and every profile's tree.

A profile holds checkpoints, job options, logs and (in SQLite) the whole provenance graph;
on a shared login node the other users must not read it. Folders are 0700 and files 0600,
whatever the umask; a tree made by an older release is tightened when it is next used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["private_file", "private_folder", "tighten"]


def private_folder(path: Path) -> Path:
    """Create ``path`` (and missing parents, each 0700) readable by its owner only."""
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    tighten(path)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty if missing, 0600 either way (before anyone writes to it)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    tighten(path)
    return path


def tighten(path: Path) -> None:
    """Take group and other permissions away from ``path`` when we own it."""
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
    except OSError:  # missing, or not ours: nothing to tighten
        pass
