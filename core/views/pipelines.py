"""Pipeline setups and how far each got: the list of setups with their counts, and one
setup's settings, its source's last look and its elements (issue #33).

A setup may have 10,000 elements: a page lists the first :data:`FIRST_OF_EACH` of each
kind (failed first), or one kind a page of :data:`PAGE_ROWS` at a time (``state=failed``,
``page=2``); the counts are of all.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from veglia.pipeline_elements import (
    ELEMENT_KINDS,
    ListedElement,
    Progress,
    SourceState,
    list_elements,
    pipeline_progress,
    source_state,
)
from veglia.pipeline_setups import (
    PipelineSetup,
    list_pipeline_setups,
    load_pipeline_setup,
    setup_toml,
)
from veglia.views.rows import iso_time, kind_of, url_of

__all__ = [
    "FIRST_OF_EACH",
    "KIND_ORDER",
    "PAGE_ROWS",
    "pipeline_url",
    "pipeline_view",
    "pipelines_view",
]

#: Elements of each kind a setup's page lists when no state is asked for.
FIRST_OF_EACH = 20
#: Elements of one page when one state is asked for (``page=2`` for the next).
PAGE_ROWS = 200
#: The kinds a setup's page lists, what needs someone first; superseded ones (their
#: content changed before they started) only when asked for.
KIND_ORDER = ("failed", "running", "to_start", "done")


def pipeline_url(name: str) -> str:
    """The web page of setup ``name`` (a name may hold any character but a space)."""
    return f"/pipeline/{quote(name, safe='')}"


def _progress(progress: Progress) -> dict[str, Any]:
    return {
        "seen": progress.seen,
        "to_start": progress.to_start,
        "running": progress.running,
        "done": progress.done,
        "failed": progress.failed_total,
        "all_ended": progress.all_ended,
        "seconds_per_run": progress.seconds_per_run,
        "eta_seconds": progress.eta_seconds,
    }


def _summary(setup: PipelineSetup, source: SourceState) -> dict[str, Any]:
    # No failures listed: the list counts them, the setup's page lists them.
    progress = pipeline_progress(setup.name, parallel=setup.max_active, failed_limit=0)
    return {
        "name": setup.name,
        "url": pipeline_url(setup.name),
        "version": setup.version,
        "enabled": setup.enabled,
        "description": setup.description,
        "process": setup.process,
        "source": setup.source,
        "computer": setup.computer,
        "max_active": setup.max_active,
        "progress": _progress(progress),
        "last_look": iso_time(source.polled),
        "source_error": source.error,
    }


def pipelines_view() -> dict[str, Any]:
    """Every setup's newest version with its progress (``setups``), by name."""
    return {
        "setups": [_summary(setup, source_state(setup.name)) for setup in list_pipeline_setups()]
    }


def _element(element: ListedElement) -> dict[str, Any]:
    run = None
    if element.process_id is not None:
        run = {
            "pk": element.process_id,
            # No node type: its node is gone (a database that keeps no foreign keys).
            "url": url_of(element.process_id, kind_of(element.node_type))
            if element.node_type
            else None,
            "state": element.process_state,
            "exit_status": element.exit_status,
        }
    return {
        "identity": element.identity,
        "state": element.kind,
        "row_state": element.state,
        "seen": iso_time(element.seen),
        "run": run,
        "problem": element.problem,
    }


def _whole(params: dict[str, Any], name: str, errors: list[str]) -> int | None:
    text = str(params.get(name) or "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        errors.append(f"{name} must be a whole number from 1, not {text!r}")
        return None
    return int(text)


def _facts(setup: PipelineSetup) -> list[list[Any]]:
    """The lines of ``veglia pipeline show``."""
    return [
        ["name", setup.name],
        ["version", setup.version],
        ["enabled", "yes" if setup.enabled else "no"],
        ["description", setup.description],
        ["process", setup.process],
        ["input port", setup.input_port],
        ["computer", setup.computer or ""],
        ["max active", setup.max_active if setup.max_active is not None else "no cap"],
        ["source", setup.source],
        ["source computer", setup.source_computer or setup.computer or ""],
        ["created", iso_time(setup.created)],
        ["created by", setup.created_by or ""],
    ]


def pipeline_view(name: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Setup ``name``'s newest version: ``setup`` (as the list has it), ``facts`` (the
    ``pipeline show`` lines), ``settings`` (``source_settings``, ``inputs``, ``options``),
    ``toml``, ``source`` (its last look: ``polled``, ``error``, ``problems``, ``waiting``,
    ``listed``), and ``elements``: ``groups`` of each kind, each with its ``total``, the
    ``first`` listed (1-based) and its ``rows`` (``identity``, ``state``, ``row_state``,
    ``seen``, ``run`` (``pk``, ``url``, ``state``, ``exit_status``) or None, ``problem``).

    ``params`` (strings, as a query string gives them): ``state``, one of
    :data:`~veglia.pipeline_elements.ELEMENT_KINDS` (default: the first
    :data:`FIRST_OF_EACH` of each in :data:`KIND_ORDER`), and ``page`` of that state. A bad
    one is left out and said in ``errors``. Raises NotExistent for an unknown name."""
    params = params or {}
    setup = load_pipeline_setup(name)
    errors: list[str] = []
    state = str(params.get("state") or "").strip()
    if state and state not in ELEMENT_KINDS:
        errors.append(f"state must be one of {', '.join(ELEMENT_KINDS)}, not {state!r}")
        state = ""
    page = _whole(params, "page", errors) or 1
    groups = []
    for kind in (state,) if state else KIND_ORDER:
        per_page = PAGE_ROWS if state else FIRST_OF_EACH
        offset = (page - 1) * per_page if state else 0
        rows, total = list_elements(name, kind, limit=per_page, offset=offset)
        groups.append(
            {
                "state": kind,
                "total": total,
                "first": offset + 1 if rows else 0,
                "rows": [_element(row) for row in rows],
                "more": total > offset + len(rows),
            }
        )
    source = source_state(name)
    return {
        "setup": _summary(setup, source),
        "facts": _facts(setup),
        "settings": {
            "source_settings": setup.source_settings,
            "inputs": setup.inputs,
            "options": {k: v for k, v in setup.options.items() if k != "computer"},
        },
        "toml": setup_toml(setup),
        "source": {
            "polled": iso_time(source.polled),
            "error": source.error,
            "problems": list(source.problems),
            "waiting": list(source.waiting),
            "listed": source.listed,
        },
        "elements": {
            "filters": {"state": state, "page": str(page)},
            "states": list(ELEMENT_KINDS),
            "page_rows": PAGE_ROWS if state else FIRST_OF_EACH,
            "groups": groups,
        },
        "errors": errors,
    }
