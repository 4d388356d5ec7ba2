"""File names and patterns that come from jobs and their inputs, kept inside their folder.

A name in a node (``FolderData`` entries), a copy target in a work directory and a retrieve
pattern are all relative POSIX paths. Neither an absolute path nor a ``..`` may appear in
one: it would read or write outside the work directory or the retrieved folder, on the
computer or here.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from veglia.exceptions import UnsafePathError

__all__ = ["checked_relative", "inside", "remote_join"]


def checked_relative(path: str, what: str = "file name") -> str:
    """``path`` normalised (``a//./b`` -> ``a/b``), or :class:`UnsafePathError`."""
    if not isinstance(path, str) or not path.strip():
        raise UnsafePathError(
            f"The {what} {path!r} is empty; give a relative path like 'out/a.txt'."
        )
    if "\0" in path:
        raise UnsafePathError(f"The {what} {path!r} contains a NUL character.")
    if path.startswith("/") or path.startswith("~"):
        raise UnsafePathError(
            f"The {what} {path!r} is absolute; give a path relative to the job's work directory."
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafePathError(
            f"The {what} {path!r} climbs out of its folder with '..'; give a path inside it."
        )
    if not parts:
        raise UnsafePathError(f"The {what} {path!r} names no file inside the folder.")
    return "/".join(parts)


def inside(root: Path, relative: str) -> Path:
    """``root / relative`` after checking, resolved, that it stays in ``root`` here (a folder
    of it may be a symlink that an earlier copy made)."""
    target = (root / checked_relative(relative)).resolve()
    if not target.is_relative_to(root.resolve()):
        raise UnsafePathError(f"{relative!r} leads outside {root} (through a symlink).")
    return target


def remote_join(workdir: str, relative: str, what: str = "file name") -> str:
    """``workdir/relative`` on the computer, for a checked relative path."""
    return posixpath.join(workdir, checked_relative(relative, what))
