"""``/action/<verb>/<pk>``: kill, pause, play and unblock a process from the browser (verify
and re-run, veglia.plugins.web.verify, take the same path).

GET shows what will happen and a form to confirm; POST, with the session's CSRF token and
from a user of role ``operate``, does what ``veglia process <verb>`` does and redirects to
the process's page with the outcome. Anything else is 403 and changes nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from veglia.plugin_api import NotExistent, VegliaError
from veglia.plugins.web import verify
from veglia.plugins.web.auth import tokens_match

if TYPE_CHECKING:
    from veglia.plugin_api import ProcessNode
    from veglia.plugins.web.site_like import SiteLike

__all__ = ["VERBS", "Verb", "routes"]

#: Seconds a request waits for the daemon to carry out an action, as the CLI's --timeout.
TIMEOUT = 30.0


@dataclass(frozen=True)
class Verb:
    name: str
    #: What the confirmation page says will happen.
    consequence: str


VERBS = {
    verb.name: verb
    for verb in (
        Verb("kill", "The process ends Killed; a calc job's scheduler job is cancelled."),
        Verb("pause", "The process stops where it is and keeps its place until played."),
        Verb("play", "The paused process goes on from where it stopped."),
        Verb(
            "unblock",
            "The job blocked by a submission error is uploaded and submitted again: fix "
            "what blocked it first.",
        ),
    )
}


def _process(pk: int) -> ProcessNode:
    # Lazy: the ORM's node classes, once an action is asked for.
    from veglia.plugin_api import ProcessNode, load_node

    node = load_node(pk)
    if not isinstance(node, ProcessNode):
        raise NotExistent(f"Node {pk} is not a process.")
    return node


def carry_out(verb: str, pk: int, who: str) -> str:
    """Do ``verb`` to process ``pk`` as ``veglia process <verb>`` does; what happened."""
    # Lazy: the engine, once an action is asked for (the pages need none of it).
    from veglia.plugin_api import control_process, unblock_process

    node = _process(pk)
    if verb == "unblock":
        return unblock_process(node, timeout=TIMEOUT)
    past = {"kill": "Killed", "pause": "Paused", "play": "Played"}[verb]
    return control_process(node, verb, f"{past} through the web view by {who}", TIMEOUT)


def routes(site: SiteLike) -> list[BaseRoute]:
    def page_of(node: ProcessNode) -> str:
        name = "job" if node.node_type.endswith("calcjob") else "workflow"
        return site.page_url(name, node.pk)

    async def action(request: Request) -> Response:
        refusal = site.login_or_refusal(request)
        if refusal is not None:
            return refusal
        verb = VERBS.get(request.path_params["verb"])
        pk = request.path_params["pk"]
        if verb is None:
            return site.not_found(request, f"There is no action {request.path_params['verb']!r}.")
        try:
            node = await asyncio.to_thread(_process, pk)
        except NotExistent as exc:
            return site.not_found(request, str(exc))
        user = site.user(request)
        assert user is not None
        if request.method == "GET":
            return site.render(
                request,
                "confirm.html",
                {
                    "title": f"{verb.name} process {pk}?",
                    "verb": verb,
                    "process": {"pk": pk, "label": node.label, "state": node.process_state},
                    "back": page_of(node),
                },
                status_code=200 if user.can_operate else 403,
            )
        form = await request.form()
        if not user.can_operate:
            return _forbidden(site, request, f"{user.name} may look but not act (role read).")
        if not tokens_match(str(form.get("csrf_token", "")), request.session.get("csrf")):
            return _forbidden(site, request, "The form's CSRF token is missing or wrong.")
        try:
            outcome = await asyncio.to_thread(carry_out, verb.name, pk, user.name)
        except VegliaError as exc:
            outcome = str(exc)
        site.flash(request, outcome)
        return RedirectResponse(page_of(node), status_code=303)

    # verify and rerun first: their paths fit the general one too.
    return [*verify.routes(site), Route("/action/{verb}/{pk:int}", action, methods=["GET", "POST"])]


def _forbidden(site: SiteLike, request: Request, message: str) -> Response:
    return site.render(
        request, "error.html", {"title": "Not allowed", "message": message}, status_code=403
    )
