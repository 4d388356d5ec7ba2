"""Monitors that read the job's output files in its work directory.

All three declare their file with ``watch_files``: the engine reads it for every job of a
computer in one command per cycle and hands over only what is new (or only the size).
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from veglia.plugin_api import (
    FileSlice,
    FileWatch,
    Guard,
    MonitorError,
    MonitorResult,
    Regex,
    guarded,
    watch_files,
)

__all__ = ["convergence", "file_pattern", "stalled_output"]

_MAX_READ = 4 * 1024 * 1024
Files = dict[str, FileSlice]


#: The lines written since the last check (from a remembered offset), through grep -E.
_PATTERN_SHELL = r"""
# $1: the file, $2: the pattern as grep -E reads it, $3: the pattern as Python shows it
local size off=0 line status
[[ -f $1 ]] || return 0
size=$(stat -L -c %s -- "$1" 2>/dev/null) || return 0
[[ -r $VEGLIA_GUARD_STATE/offset ]] && read -r off <"$VEGLIA_GUARD_STATE/offset"
((size < off)) && off=0
((size > off)) || return 0
line=$(
    tail -c +$((off + 1)) -- "$1" | head -c $((size - off)) | grep -a -E -m 1 -e "$2"
    exit "${PIPESTATUS[2]}"
)
status=$?
echo "$size" >"$VEGLIA_GUARD_STATE/offset"
((status == 1)) && return 0
((status == 0)) || { echo "grep -E failed on $1 with status $status" >&2; return 2; }
line=${line#"${line%%[![:space:]]*}"}
line=${line%"${line##*[![:space:]]}"}
echo "$1 matched $3: ${line:0:200}"
return 1
"""

#: Python's class escapes as POSIX classes (without their brackets).
_CLASSES = {"d": "[:digit:]", "s": "[:space:]", "w": "[:alnum:]_"}
#: Characters special to grep -E: escaped, they stay escaped.
_ERE_SPECIAL = set(".[]()*+?{}|^$\\")
_QUANTIFIER = re.compile(r"\{\d*(,\d*)?\}")


def _refuse(pattern: str, what: str) -> MonitorError:
    return MonitorError(
        f"pattern {pattern!r} uses {what}, which grep -E (the guard) cannot do; rewrite it without."
    )


def _bracket(pattern: str, start: int) -> tuple[str, int]:
    """The character class at ``start`` (a ``[``) for grep -E, and the index after it."""
    i = start + 1
    negate = pattern.startswith("^", i)
    i += negate
    items: list[str] = []
    rbracket = dash = caret = False
    first = True
    while i < len(pattern) and (first or pattern[i] != "]"):
        c = pattern[i]
        if c == "\\":
            e = pattern[i + 1]
            i += 2
            if e in _CLASSES:
                items.append(_CLASSES[e])
            elif e == "]":
                rbracket = True
            elif e == "-":
                dash = True
            elif e == "^":
                caret = True
            elif e == "t":
                items.append("\t")
            elif e.isalnum():
                raise _refuse(pattern, f"\\{e} inside [...]")
            else:
                items.append(e)
        elif c == "]":  # first: a literal ]
            rbracket = True
            i += 1
        elif c == "[" and pattern[i + 1 : i + 2] in (":", ".", "="):
            raise _refuse(pattern, f"{pattern[i : i + 2]} inside [...]")
        elif c == "-" and (first or pattern[i + 1 : i + 2] == "]"):
            dash = True
            i += 1
        elif c == "^":
            caret = True
            i += 1
        else:
            items.append(c)
            i += 1
        first = False
    if not items and not rbracket and caret:
        return "[" + ("^" if negate else "") + ("-" if dash else "") + "^]", i + 1
    text = "".join(items) + ("^" if caret else "") + ("-" if dash else "")
    return "[" + ("^" if negate else "") + ("]" if rbracket else "") + text + "]", i + 1


def grep_pattern(pattern: str) -> str:
    """A Python regular expression as grep -E reads it, for searching lines: ``\\d \\s \\w``
    (and their negations) as POSIX classes, ``(?:`` as ``(``, lazy quantifiers as greedy
    (the same lines match). A :class:`MonitorError` for what grep -E cannot do."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise MonitorError(f"pattern {pattern!r} is not a regular expression: {exc}.") from None
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            e = pattern[i + 1]
            i += 2
            if e in _CLASSES:
                out.append(f"[{_CLASSES[e]}]")
            elif e.lower() in _CLASSES:
                out.append(f"[^{_CLASSES[e.lower()]}]")
            elif e in "bB":
                out.append("\\" + e)  # GNU grep's word boundary, as Python's
            elif e == "t":
                out.append("\t")
            elif e in _ERE_SPECIAL:
                out.append("\\" + e)
            elif e.isalnum():
                raise _refuse(pattern, f"\\{e}")
            else:
                out.append(e)
        elif c == "[":
            text, i = _bracket(pattern, i)
            out.append(text)
        elif pattern.startswith("(?:", i):
            out.append("(")
            i += 3
        elif pattern.startswith("(?", i):
            raise _refuse(pattern, f"a {pattern[i : i + 3]}...) group")
        elif c in "*+?}" and pattern[i + 1 : i + 2] == "+":
            raise _refuse(pattern, "a possessive quantifier")
        elif c in "*+?}" and pattern[i + 1 : i + 2] == "?":
            out.append(c)  # lazy or greedy, the same lines match
            i += 2
        elif c == "{" and not _QUANTIFIER.match(pattern, i):
            out.append("\\{")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _pattern_arguments(kwargs: dict[str, Any], node: Any) -> list[str]:
    path, pattern = kwargs.get("path"), kwargs.get("pattern")
    if not isinstance(path, str) or not path:
        raise MonitorError(f"path must be a file name, not {path!r}.")
    if not isinstance(pattern, str):
        raise MonitorError(f"pattern must be a str, not {pattern!r}.")
    return [path, grep_pattern(pattern), repr(pattern)]


@guarded(Guard(shell=_PATTERN_SHELL, arguments=_pattern_arguments))
@watch_files(FileWatch("{path}", lines=True, max_bytes=_MAX_READ))
def file_pattern(
    node: Any,
    transport: Any,
    path: str,
    pattern: Regex,
    retrieve: bool = True,
    files: Files | None = None,
) -> MonitorResult | None:
    """Kill the job when a line of ``path`` (in its work directory) matches the regex
    ``pattern``. Only the lines written since the last poll are read.

    :param path: file to watch, relative to the work directory.
    :param pattern: regular expression searched in each new line.
    :param retrieve: bring the job's files back before ending it.
    """
    assert files is not None  # watch_files fills it
    regex = re.compile(pattern)
    for line in files[path].lines():
        if regex.search(line):
            return MonitorResult(
                message=f"{path} matched {pattern!r}: {line.strip()[:200]}", retrieve=retrieve
            )
    return None


#: The file's size at each check; the time it was last seen to change.
_STALLED_SHELL = r"""
# $1: the file, $2: seconds it may stay the same size (whole, rounded up)
local size old= since
size=$(stat -L -c %s -- "$1" 2>/dev/null) || size=-1
[[ -r $VEGLIA_GUARD_STATE/size ]] && read -r old since <"$VEGLIA_GUARD_STATE/size"
if [[ $size != "$old" ]]; then
    echo "$size $VEGLIA_GUARD_NOW" >"$VEGLIA_GUARD_STATE/size"
    return 0
fi
local stalled=$((VEGLIA_GUARD_NOW - since))
((stalled >= $2)) || return 0
if ((size < 0)); then
    echo "$1 does not exist for $stalled s"
else
    echo "$1 stayed at $size bytes for $stalled s"
fi
return 1
"""


def _stalled_arguments(kwargs: dict[str, Any], node: Any) -> list[str]:
    path, seconds = kwargs.get("path"), kwargs.get("seconds")
    if not isinstance(path, str) or not path:
        raise MonitorError(f"path must be a file name, not {path!r}.")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise MonitorError(f"seconds must be a number more than 0, not {seconds!r}.")
    return [path, str(math.ceil(seconds))]


@guarded(Guard(shell=_STALLED_SHELL, arguments=_stalled_arguments))
@watch_files(FileWatch("{path}", mode="stat"))
def stalled_output(
    node: Any,
    transport: Any,
    path: str,
    seconds: float,
    state: dict[str, Any],
    files: Files | None = None,
) -> MonitorResult | None:
    """Kill the job when ``path`` has not grown for ``seconds`` (a hung program).

    :param path: file to watch, relative to the work directory.
    :param seconds: how long it may stay the same size.
    """
    assert files is not None  # watch_files fills it
    size = files[path].size
    now = time.time()
    if size != state.get("size"):
        state.update(size=size, since=now)
        return None
    if now - state["since"] >= seconds:
        what = "does not exist" if size < 0 else f"stayed at {size} bytes"
        return MonitorResult(
            message=f"{path} {what} for {now - state['since']:.0f} s", retrieve=True
        )
    return None


@watch_files(FileWatch("{path}", lines=True, max_bytes=_MAX_READ))
def convergence(
    node: Any,
    transport: Any,
    path: str,
    pattern: Regex,
    window: int = 5,
    rtol: float = 1e-3,
    state: dict[str, Any] | None = None,
    files: Files | None = None,
) -> MonitorResult | None:
    """Kill the job when a numeric series stops improving (a stagnating SCF, say).

    Each new line of ``path`` matching ``pattern`` (a regex whose first group is the number)
    adds a value. When the best of the last ``window`` values improves on the best before
    them by less than ``rtol`` (relative), the job is stopped.

    :param path: file to read, relative to the work directory.
    :param pattern: regex with one group capturing the value, e.g. ``'energy = (\\S+)'``.
    :param window: how many values to judge.
    :param rtol: the relative improvement that counts as progress.
    """
    assert files is not None  # watch_files fills it
    state = {} if state is None else state
    regex = re.compile(pattern)
    values = state.setdefault("values", [])
    for line in files[path].lines():
        match = regex.search(line)
        if match:
            try:
                values.append(float(match.group(1)))
            except (ValueError, IndexError):
                continue
    del values[: -(window * 4)]  # enough history, bounded state
    if len(values) <= window:
        return None
    before, recent = min(values[:-window]), min(values[-window:])
    improvement = (before - recent) / max(abs(before), 1e-300)
    if improvement < rtol:
        return MonitorResult(
            message=f"no progress in the last {window} values of {path}: best {recent:g}, "
            f"before {before:g} (improvement {improvement:.2e} < {rtol:g})",
            retrieve=True,
        )
    return None
