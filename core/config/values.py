"""Turning the text a user typed (on the command line, in ``veglia setup`` or ``veglia
config set``) into an option's value, or a ``ValueError`` that says what is allowed.
Plugins use these for the options they register."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from veglia.plugin_types import parse_text

__all__ = [
    "QUEUE_HELP",
    "format_queues",
    "mask_url",
    "parse_boolean",
    "parse_duration",
    "parse_email",
    "parse_email_list",
    "parse_log_level",
    "parse_non_negative_float",
    "parse_positive_int",
    "parse_positive_seconds",
    "parse_queues",
    "parse_size_mb",
    "parse_text",
    "url_with_schemes",
]

_SIZE_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size_mb(text: str) -> int:
    """``"4G"``, ``"512M"``, ``"512"`` (MB) -> megabytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT])?B?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"{text!r} is not a size: write a number with K, M, G or T (4G, 512M)")
    number, unit = float(match.group(1)), (match.group(2) or "M").upper()
    value = int(number * _SIZE_UNITS[unit])
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return value


def parse_duration(text: str) -> int:
    """``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"``, ``"01:30:00"``, ``"45"`` -> seconds."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(:\d{1,2}){1,2}", text):
        parts = [int(p) for p in text.split(":")]
        while len(parts) < 3:
            parts.insert(0, 0)
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    elif re.fullmatch(r"\d+", text):
        seconds = int(text)
    elif re.fullmatch(r"(\d+[smhd])+", text):
        seconds = sum(int(n) * _DURATION_UNITS[u] for n, u in re.findall(r"(\d+)([smhd])", text))
    else:
        raise ValueError(
            f"{text!r} is not a duration: write seconds (3600), units (90s, 30m, 2h, 1d, 1h30m) "
            "or HH:MM:SS"
        )
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


QUEUE_HELP = (
    "write one queue per item, in order of preference, separated by ';': "
    "NAME[:mem=SIZE][:time=DURATION][:cpus=N], e.g. 'short:mem=4G:time=1h:cpus=8; long:time=2d'"
)


def parse_queues(text: str | list[Any]) -> list[dict[str, Any]]:
    """Parse queue definitions (``"short:mem=4G:time=1h; long:time=2d"``) into dicts."""
    if isinstance(text, list):
        return [_check_queue(dict(q)) for q in text]
    queues: list[dict[str, Any]] = []
    for item in (part.strip() for part in str(text).split(";")):
        if not item:
            continue
        name, *limits = (p.strip() for p in item.split(":"))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"queue name {name!r} is not valid; {QUEUE_HELP}")
        queue: dict[str, Any] = {"name": name}
        for limit in limits:
            key, sep, value = limit.partition("=")
            if not sep:
                raise ValueError(f"{limit!r} in queue {name!r} is not KEY=VALUE; {QUEUE_HELP}")
            key = key.strip().lower()
            if key == "mem":
                queue["max_memory_mb"] = parse_size_mb(value)
            elif key == "time":
                queue["max_walltime_seconds"] = parse_duration(value)
            elif key == "cpus":
                queue["max_cpus"] = parse_positive_int(value)
            else:
                raise ValueError(f"unknown queue limit {key!r} (use mem, time or cpus)")
        queues.append(queue)
    names = [q["name"] for q in queues]
    if len(set(names)) != len(names):
        raise ValueError(f"a queue is named twice in {names}")
    return queues


def _check_queue(queue: dict[str, Any]) -> dict[str, Any]:
    if "name" not in queue:
        raise ValueError(f"queue {queue!r} has no name")
    return queue


def format_queues(queues: list[dict[str, Any]]) -> str:
    """The inverse of :func:`parse_queues`, for showing and for prompts' defaults."""
    items = []
    for queue in queues:
        parts = [queue["name"]]
        if "max_memory_mb" in queue:
            parts.append(f"mem={queue['max_memory_mb']}M")
        if "max_walltime_seconds" in queue:
            parts.append(f"time={queue['max_walltime_seconds']}s")
        if "max_cpus" in queue:
            parts.append(f"cpus={queue['max_cpus']}")
        items.append(":".join(parts))
    return "; ".join(items)


def parse_positive_int(text: Any) -> int:
    """A whole number greater than zero, as typed."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise ValueError(f"{text!r} must be a whole number greater than 0")
    return value


def parse_positive_seconds(text: Any) -> float:
    """A number of seconds more than zero, as typed: a whole number stays an ``int`` (it is
    written into shell scripts, where ``30.0`` is not a number)."""
    try:
        seconds = float(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{text!r} is not a number of seconds more than 0")
    return int(seconds) if seconds.is_integer() else seconds


def parse_non_negative_float(text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if value < 0:
        raise ValueError(f"{text!r} must not be negative")
    return value


_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off"}


def parse_boolean(text: Any) -> bool:
    """yes or no as typed (true/false, 1/0, on/off, any case); a ``bool`` passes as is."""
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{text!r} is not yes or no (true/false, 1/0, on/off)")


def parse_email(text: Any) -> str:
    """``name@host``: a domain (``name@example.org``) or a host of its own, as the
    ``root@localhost`` a profile without one uses."""
    value = str(text).strip()
    if value and not re.fullmatch(r"[^@\s,]+@[^@\s,.][^@\s,]*", value):
        raise ValueError(f"{value!r} is not an e-mail address like name@example.org")
    return value


def parse_email_list(text: Any) -> str:
    """``"ada@example.org, ops@example.org"``: addresses separated by commas, each checked
    like :func:`parse_email`; written back as ``"a, b"``. Empty: none."""
    addresses = [part.strip() for part in str(text).split(",") if part.strip()]
    for address in addresses:
        parse_email(address)
    return ", ".join(addresses)


def url_with_schemes(*schemes: str, allow_empty: bool = False) -> Callable[[Any], str]:
    def parse(text: Any) -> str:
        value = str(text).strip()
        if not value and allow_empty:
            return ""
        scheme = urlsplit(value).scheme.split("+")[0]
        if scheme == "postgres" and "postgresql" in schemes:  # libpq's short form
            value, scheme = "postgresql" + value[len("postgres") :], "postgresql"
        if scheme not in schemes:
            allowed = ", ".join(f"{s}://..." for s in schemes)
            extra = " (or empty for none)" if allow_empty else ""
            # Masked: a password in a mistyped URL must not end up on screen or in a log.
            raise ValueError(f"{mask_url(value)!r} is not a URL of the form {allowed}{extra}")
        return value

    return parse


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``****``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL after all (a bad port): mask what looks like one
        password = None
    if password is None:
        # Anything that still reads as user:secret@host is masked too.
        return re.sub(r"(^|//|\s)([^\s:/@]+):[^\s@/]+@", r"\1\2:****@", url)
    netloc = parts.netloc.replace(f":{password}@", ":****@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def parse_log_level(text: Any) -> str:
    value = str(text).strip().upper()
    levels = ("DEBUG", "INFO", "REPORT", "WARNING", "ERROR", "CRITICAL")
    if value not in levels:
        raise ValueError(f"{text!r} is not a log level; use one of {', '.join(levels)}")
    return value
