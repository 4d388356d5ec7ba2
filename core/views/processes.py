"""The process search: ``process list``'s filters from a web form or ``/api`` query, and
the rows that pass them."""

from __future__ import annotations

from typing import Any

from veglia.orm.queries import ACTIVE_STATES
from veglia.row_ids import MAX_INTEGER
from veglia.views.rows import MAX_PAST_DAYS, as_tree, process_row, select_processes

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "PAGE_ROWS", "PROCESS_STATES", "processes_view"]

PROCESS_STATES = ("created", "running", "waiting", "finished", "excepted", "killed")
#: Rows shown unless the form asks for another number, and the most it may ask for.
DEFAULT_LIMIT = 100
MAX_LIMIT = 2000
#: Rows of one page of the answer (``page=2`` for the next): a page of 2,000 rows took
#: longer to draw than to load.
PAGE_ROWS = 500


def _count(
    params: dict[str, Any], name: str, errors: list[str], most: int = MAX_INTEGER
) -> int | None:
    text = str(params.get(name) or "").strip()
    if not text:
        return None
    if not text.isdigit():
        errors.append(f"{name.replace('_', ' ')} must be a whole number, not {text!r}")
        return None
    if int(text) > most:
        errors.append(f"{name.replace('_', ' ')} must be at most {most}")
        return None
    return int(text)


def processes_view(params: dict[str, Any]) -> dict[str, Any]:
    """The processes that pass the filters in ``params`` (strings, as a query string gives
    them): ``state`` (one of :data:`PROCESS_STATES`, ``active`` (the default) or ``all``),
    ``label`` and ``type`` (text they hold, or a glob), ``called_by`` (a caller's PK: its
    steps), ``past_days``, ``limit`` (at most :data:`MAX_LIMIT`); and ``page``: ``rows``
    holds :data:`PAGE_ROWS` of the ``total`` that passed, from number ``first``. A bad
    filter is left out and said in ``errors``."""
    errors: list[str] = []
    state = str(params.get("state") or "active").strip()
    if state == "active":
        states: tuple[str, ...] | None = ACTIVE_STATES
    elif state == "all":
        states = None
    elif state in PROCESS_STATES:
        states = (state,)
    else:
        errors.append(f"state must be active, all or one of {', '.join(PROCESS_STATES)}")
        state, states = "active", ACTIVE_STATES
    past_days = _count(params, "past_days", errors, MAX_PAST_DAYS)
    caller = _count(params, "called_by", errors)
    limit = _count(params, "limit", errors)
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        errors.append(f"limit must be between 1 and {MAX_LIMIT}")
        limit = None
    page = _count(params, "page", errors)
    if page is not None and page < 1:
        errors.append("page must be 1 or more")
        page = None
    label = str(params.get("label") or "").strip() or None
    kind = str(params.get("type") or "").strip() or None
    filters = {
        "state": state,
        "label": label or "",
        "type": kind or "",
        "called_by": "" if caller is None else str(caller),
        "past_days": "" if past_days is None else str(past_days),
        "limit": str(limit or DEFAULT_LIMIT),
        "page": str(page or 1),
    }
    found = select_processes(
        states,
        label_pattern=label,
        process_type_pattern=kind,
        past_days=past_days,
        caller=caller,
        limit=limit or DEFAULT_LIMIT,
        descending=True,
    )
    tree = list(as_tree(found))
    first = ((page or 1) - 1) * PAGE_ROWS
    shown = tree[first : first + PAGE_ROWS]
    return {
        "filters": filters,
        "states": ["active", "all", *PROCESS_STATES],
        "rows": [{**process_row(row), "depth": depth} for row, depth in shown],
        "total": len(tree),
        "first": first + 1 if shown else 0,
        "page_rows": PAGE_ROWS,
        "errors": errors,
    }
