"""``/action/verify/<pk>`` and ``/action/rerun/<pk>``: the integrity of an ended workflow's
files, from the browser.

Verify recomputes the SHA-256 of every file the process and the processes it called stored
(what ``veglia verify PK`` checks, veglia.integrity) and shows which changed, or that all are
intact. When some are damaged, re-run hands the calc jobs that made them to the daemon, with
the inputs they had (what ``veglia verify --rerun`` does, but submitted rather than run in
the server). A calc job recorded as not reproducible (a rerun made other content,
``FileCheck.not_reproducible``) is named with the CLI's reason and never offered or sent
again, as ``veglia verify`` does. Both go through a confirmation and need a user of role
``operate`` and the session's CSRF token, as the other actions do.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from veglia.plugin_api import NotExistent, VegliaError
from veglia.plugins.web.auth import tokens_match

if TYPE_CHECKING:
    from veglia.plugin_api import FileCheck, ProcessNode
    from veglia.plugins.web.site_like import SiteLike

__all__ = ["Damage", "rerun_damaged", "routes", "verify_process"]

_ACTIVE = frozenset({"created", "waiting", "running"})


@dataclass(frozen=True)
class Damage:
    """A process's file check as the pages show it."""

    pk: int
    label: str
    files: int
    nodes: int
    #: [{node_pk, node_url, path, expected, found}]
    damaged: list[dict[str, Any]]
    #: The calc jobs that made the damaged files: [{pk, label, url, nodes}]
    producers: list[dict[str, Any]]
    #: The calc jobs a rerun already failed to remake (their files are not in ``damaged``):
    #: [{pk, url, rerun, rerun_url, at, reason}]
    not_reproducible: list[dict[str, Any]] = field(default_factory=list)


def _ended_process(pk: int) -> ProcessNode:
    # Lazy: the ORM, once an integrity action is asked for.
    from veglia.plugin_api import ProcessNode, load_node

    node = load_node(pk)
    if not isinstance(node, ProcessNode):
        raise NotExistent(f"Node {pk} is not a process.")
    return node


def _not_reproducible(pk: int, record: dict[str, Any]) -> dict[str, Any]:
    # The words of `veglia verify` (cmd_verify), so that both name it alike.
    reason = (
        f"process {pk}: not reproducible (rerun {record['rerun']} made other content), "
        f"recorded {record['at']}"
    )
    return {
        "pk": pk,
        "url": f"/job/{pk}",
        "rerun": record["rerun"],
        "rerun_url": f"/job/{record['rerun']}",
        "at": record["at"],
        "reason": reason,
    }


def _damage(node: ProcessNode, check: FileCheck, known: dict[int, dict[str, Any]]) -> Damage:
    # Lazy: the ORM, once an integrity action is asked for.
    from veglia.plugin_api import load_node

    producers = []
    for pk, made in sorted(check.producers().items()):
        job = cast("ProcessNode", load_node(pk))  # what made a node is a process
        producers.append(
            {"pk": pk, "label": job.label or job.process_type, "url": f"/job/{pk}", "nodes": made}
        )
    damaged = [
        {
            "node_pk": file.node_pk,
            "node_url": f"/node/{file.node_pk}",
            "path": file.path,
            "expected": file.expected,
            "found": file.found,
        }
        for file in check.damaged
    ]
    not_reproducible = [_not_reproducible(pk, record) for pk, record in sorted(known.items())]
    return Damage(
        node.pk, node.label, check.files, check.nodes, damaged, producers, not_reproducible
    )


def verify_process(pk: int) -> Damage:
    """Check the files of process ``pk`` and what it called, as ``veglia verify PK``."""
    # Lazy: the integrity check loads the storage, once asked for.
    from veglia.plugin_api import check_files, nodes_to_check

    node = _ended_process(pk)
    known, check = check_files(nodes_to_check([pk])).not_reproducible()
    return _damage(node, check, known)


def rerun_damaged(pk: int) -> tuple[Damage, list[tuple[int, int]]]:
    """Check again, then set the damaged blobs aside and hand each calc job that made them
    to the daemon; the check, and (old pk, new pk) for each job sent. A job recorded as not
    reproducible is not sent, nor are its blobs set aside."""
    # Lazy: the engine, once a re-run is asked for.
    from veglia.plugin_api import check_files, nodes_to_check, set_aside, submit_again

    node = _ended_process(pk)
    known, check = check_files(nodes_to_check([pk])).not_reproducible()
    damage = _damage(node, check, known)
    if not damage.producers:
        return damage, []
    set_aside(check.damaged_blobs)
    return damage, [(job["pk"], submit_again(job["pk"]).pk) for job in damage.producers]


def _rerun_outcome(damage: Damage, sent: list[tuple[int, int]]) -> str:
    # Lazy: the daemon's presence, once a re-run was sent.
    from veglia.plugin_api import daemon_running

    if not damage.damaged:
        return f"All {damage.files} files are intact again: nothing to re-run."
    if not sent:
        return "No calc job made the damaged files: there is nothing to re-run."
    text = "; ".join(f"process {old} runs again as process {new}" for old, new in sent)
    text = text[0].upper() + text[1:] + "."
    for job in damage.not_reproducible:
        text += f" Not run again: {job['reason']}."
    if not daemon_running():
        text += " No daemon runs: start one with `veglia daemon start`."
    return text


def _refusal_of_not_reproducible(damage: Damage) -> str:
    reasons = "; ".join(job["reason"] for job in damage.not_reproducible)
    # One line, as the CLI's; capitalised, as it opens the page's message.
    return (
        f"{reasons[0].upper()}{reasons[1:]}. Nothing was run again (a rerun would not make "
        "the stored files anew): use the rerun's outputs."
    )


def routes(site: SiteLike) -> list[BaseRoute]:
    def page_of(node: ProcessNode) -> str:
        name = "job" if node.node_type.endswith("calcjob") else "workflow"
        return site.page_url(name, node.pk)

    async def checked(request: Request) -> tuple[ProcessNode | None, Response | None]:
        """The ended process asked for, or the answer instead (login, 404, 409, 403)."""
        refusal = site.login_or_refusal(request)
        if refusal is not None:
            return None, refusal
        pk = request.path_params["pk"]
        try:
            node = await asyncio.to_thread(_ended_process, pk)
        except NotExistent as exc:
            return None, site.not_found(request, str(exc))
        if node.process_state in _ACTIVE:
            return None, _refuse(
                site, request, "Not ended yet",
                f"Process {pk} is {node.process_state}: verify its files once it has ended.",
                409,
            )  # fmt: skip
        if request.method == "POST":
            form = await request.form()
            user = site.user(request)
            assert user is not None
            if not user.can_operate:
                message = f"{user.name} may look but not act (role read)."
                return None, _refuse(site, request, "Not allowed", message, 403)
            if not tokens_match(str(form.get("csrf_token", "")), request.session.get("csrf")):
                message = "The form's CSRF token is missing or wrong."
                return None, _refuse(site, request, "Not allowed", message, 403)
        return node, None

    def status(request: Request) -> int:
        user = site.user(request)
        return 200 if user is not None and user.can_operate else 403

    async def verify(request: Request) -> Response:
        node, refusal = await checked(request)
        if refusal is not None:
            return refusal
        assert node is not None
        if request.method == "GET":
            return site.render(
                request,
                "verify_confirm.html",
                {
                    "title": f"Verify the files of process {node.pk}?",
                    "process": _summary(node),
                    "back": page_of(node),
                },
                status_code=status(request),
            )
        try:
            damage = await asyncio.to_thread(verify_process, node.pk)
        except VegliaError as exc:
            return _refuse(site, request, "Verify failed", str(exc), 500)
        return site.render(
            request,
            "verify.html",
            {"title": f"Files of process {node.pk}", "damage": damage, "back": page_of(node)},
        )

    async def rerun(request: Request) -> Response:
        node, refusal = await checked(request)
        if refusal is not None:
            return refusal
        assert node is not None
        if request.method == "GET":
            damage = await asyncio.to_thread(verify_process, node.pk)
            return site.render(
                request,
                "rerun_confirm.html",
                {
                    "title": f"Re-run the steps of process {node.pk}?",
                    "damage": damage,
                    "back": page_of(node),
                },
                status_code=status(request),
            )
        try:
            damage, sent = await asyncio.to_thread(rerun_damaged, node.pk)
        except VegliaError as exc:
            sent, outcome = [], str(exc)
        else:
            if not sent and damage.not_reproducible:
                message = _refusal_of_not_reproducible(damage)
                return _refuse(site, request, "Not reproducible", message, 409)
            outcome = _rerun_outcome(damage, sent)
        site.flash(request, outcome)
        target = site.page_url("job", sent[0][1]) if len(sent) == 1 else page_of(node)
        return RedirectResponse(target, status_code=303)

    return [
        Route("/action/verify/{pk:int}", verify, methods=["GET", "POST"]),
        Route("/action/rerun/{pk:int}", rerun, methods=["GET", "POST"]),
    ]


def _summary(node: ProcessNode) -> dict[str, Any]:
    return {"pk": node.pk, "label": node.label, "state": node.process_state}


def _refuse(site: SiteLike, request: Request, title: str, message: str, code: int) -> Response:
    return site.render(
        request, "error.html", {"title": title, "message": message}, status_code=code
    )
