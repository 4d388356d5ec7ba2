"""The root of a computer's job folders: made private, and refused when others control it.

veglia runs job scripts from work directories, often as a user with rights others lack. If
another user owns the root, or any folder above it, or may write into one of them, that
user can swap a job's folder between upload and submit and have veglia run their script.
So the root is created 0700 and, once per connection, checked the way OpenSSH's StrictModes
checks a home: each folder from ``/`` down to the root (also along the path the root
resolves to) is owned by root or by the user and not writable by others (unless sticky, as
``/tmp`` is), and the root itself, and the folder it resolves to, are the user's and
writable by nobody else.
"""

from __future__ import annotations

import getpass
import os
import posixpath
import shlex
import stat
from typing import Any

from veglia.exceptions import TransportError, UnsafeWorkdirError

__all__ = ["expand_root", "local_problem", "parse_root_template", "private_root"]

_CHECK = r"""
umask 077
mkdir -p -- "$root" || exit 3
id -u
real=$(cd -- "$root" && pwd -P) || exit 3
printf '%s\n' "$real"
walk() {
  d=$1
  while :; do
    stat -c '%u %a %F|%n' -- "$d" || exit 3
    [ "$d" = / ] && break
    d=$(dirname -- "$d")
  done
}
walk "$root"
walk "$real"
"""


def expand_root(template: str, username: str, home: str) -> str:
    """The work-dir template with ``{username}`` and ``{home}`` replaced."""
    return template.replace("{username}", username).replace("{home}", home.rstrip("/") or "/")


def private_root(transport: Any, root: str) -> str:
    """Create ``root`` if missing (0700) and check that only this user controls it; once per
    connection. Raises :class:`UnsafeWorkdirError` saying which folder is wrong and why."""
    checked = transport.__dict__.setdefault("_veglia_private_roots", set())
    if root in checked:
        return root
    code, out, err = transport.exec_command(f"root={shlex.quote(root)}; {_CHECK}", timeout=60)
    if code != 0:
        raise TransportError(
            f"Could not create or inspect the work dir {root} on {transport.hostname}: "
            f"{err.strip() or out.strip()}"
        )
    lines = out.strip().splitlines()
    uid = int(lines[0])
    # The root's own rules apply where it resolves too: a link to /tmp is /tmp.
    leaves = {posixpath.normpath(root), posixpath.normpath(lines[1])}
    for line in lines[2:]:
        fields, _, path = line.partition("|")
        owner, mode_text, kind = fields.split(" ", 2)
        mode = int(mode_text, 8)
        problem = _problem(int(owner), mode, kind, uid, leaf=posixpath.normpath(path) in leaves)
        if problem:
            raise UnsafeWorkdirError(
                f"The work dir {root} on {transport.hostname} is not safe: {path} {problem}. "
                "Another user could replace a job's files before it runs. Pick a work dir "
                "under your home (`veglia computer setup -w` or `computer configure`), or fix "
                f"the folder (`chown {uid} {path}; chmod go-w {path}`)."
            )
    checked.add(root)
    return root


def _problem(owner: int, mode: int, kind: str, uid: int, *, leaf: bool) -> str | None:
    if kind == "symbolic link":
        # Its mode means nothing; where it leads is walked too.
        return None if owner in (0, uid) else f"is a link owned by user {owner}"
    if leaf:
        if owner != uid:
            return f"is owned by user {owner}, not by you ({uid})"
        if mode & 0o022:
            return f"can be written by {'group and others' if mode & 0o002 else 'its group'}"
        return None
    if owner not in (0, uid):
        return f"is owned by user {owner}"
    if mode & 0o022 and not mode & 0o1000:  # a shared folder without the sticky bit
        return "can be written by other users and has no sticky bit"
    return None


def local_problem(template: str) -> str | None:
    """What :func:`private_root` would refuse in the root ``template`` names on this machine
    (``{home}`` and ``{username}`` as here), without creating anything: ``"/tmp can be
    written by group and others"``, or None. A folder not made yet is not judged: the run
    makes it private."""
    root = posixpath.normpath(expand_root(template, getpass.getuser(), os.path.expanduser("~")))
    real = os.path.realpath(root)
    leaves = {root, real}
    uid = os.getuid()
    for start in (root, real):
        folder = start
        while True:
            try:
                info = os.lstat(folder)
            except OSError:
                info = None  # not there yet (or not visible): the run creates or reports it
            if info is not None:
                kind = "symbolic link" if stat.S_ISLNK(info.st_mode) else "directory"
                if folder in leaves and not stat.S_ISDIR(info.st_mode) and kind != "symbolic link":
                    return f"{folder} is not a folder"
                mode = stat.S_IMODE(info.st_mode)
                problem = _problem(info.st_uid, mode, kind, uid, leaf=folder in leaves)
                if problem:
                    return f"{folder} {problem}"
            if folder == "/":
                break
            folder = posixpath.dirname(folder)
    return None


def parse_root_template(text: Any) -> str:
    """The ``workdir.root`` option as typed: an absolute path or one under ``{home}``, and,
    where it names a folder on this machine, one the run-time check would accept (so
    ``veglia config set workdir.root /tmp`` is refused when it is set, not at the first
    job). ``ValueError`` says why not, in one line."""
    template = str(text).strip()
    if not template.startswith(("/", "{home}")):
        raise ValueError(
            f"{template!r} is not an absolute path: start it with / or {{home}} (it may "
            "contain {username})"
        )
    problem = local_problem(template)
    if problem:
        raise ValueError(
            f"{template!r} is not safe on this machine: {problem}, so another user could "
            "replace a job's files and jobs here would be refused; pick a folder of yours, "
            "such as {home}/veglia-work"
        )
    return template
