"""The Starlette app of ``veglia web``: each page of :mod:`.pages` as HTML, JSON and a live
stream, behind a login, with the headers that keep a browser from running anything but our
own script."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from veglia.plugin_api import NotExistent
from veglia.plugins.web import actions, pages
from veglia.plugins.web.auth import TOKEN_USER, User, find_user, new_csrf_token, tokens_match
from veglia.plugins.web.live import LiveHub, ViewKey, view_key
from veglia.plugins.web.probe import ChangeProbe

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

__all__ = ["WebSettings", "create_app"]

HERE = Path(__file__).parent
_UNKNOWN = object()
#: Around the content block in base.html.
CONTENT_START, CONTENT_END = "<!-- veglia:content -->", "<!-- /veglia:content -->"
#: Seconds between two heartbeat comments of an idle stream, so proxies keep it open.
HEARTBEAT = 15.0
#: Live renders kept (one per watched view and user).
LIVE_RENDERS = 64

SECURITY_HEADERS = {
    # Our own script and stylesheet only: a value that slipped through escaping cannot
    # run. Style attributes stay allowed for inline SVG charts and bars.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        "style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
        "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    # The token must never leave in a Referer header.
    "referrer-policy": "no-referrer",
}


@dataclass(frozen=True)
class WebSettings:
    """How one server runs: its profile, its login token (None: named users only), the key
    that signs session cookies, and whether browsers reach it over HTTPS."""

    profile_name: str
    token: str | None
    secret_key: str
    https: bool = False


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every answer, and ``no-store`` to all but static files
    (a page may show what only a logged-in user may see)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if not scope["path"].startswith("/static/"):
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)


class ServerTiming:
    """Adds ``Server-Timing: app;dur=<ms>`` to every answer: the time from the request to
    its first byte (a page's load and rendering), which browsers' developer tools show and
    ``bench/web.py`` reads."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def send_with_timing(message: Message) -> None:
            if message["type"] == "http.response.start":
                elapsed = (time.perf_counter() - start) * 1000
                MutableHeaders(scope=message)["server-timing"] = f"app;dur={elapsed:.1f}"
            await send(message)

        await self.app(scope, receive, send_with_timing)


class Site:
    """What every endpoint shares: the settings, the templates, the live hub, the login."""

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self.hub = LiveHub(probe=ChangeProbe())
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
        )
        self.templates.globals.update(getattr(pages, "TEMPLATE_GLOBALS", {}))
        self.page_paths = {page.name: page.path for page in pages.PAGES}
        #: Stands for a value in a render, put in after: random, so no shown value holds it.
        self.placeholder = secrets.token_hex(16)
        #: The last content block rendered for the watchers of a view with the same user:
        #: (view key, user, can operate) -> (the view, its HTML).
        self._live_renders: dict[tuple[Any, ...], tuple[dict[str, Any], str]] = {}

    # -- who asks ------------------------------------------------------------------------
    def user(self, request: Request) -> User | None:
        """The logged-in user of the request's session; a removed user is logged out. Looked
        up once per request (a named user's role in the secrets file)."""
        known = getattr(request.state, "user", _UNKNOWN)
        if known is _UNKNOWN:
            known = request.state.user = self._session_user(request)
        return known  # type: ignore[return-value]

    def _session_user(self, request: Request) -> User | None:
        name = request.session.get("user")
        if name is None:
            return None
        if request.session.get("via") == "token":
            return User(TOKEN_USER, "operate") if self.settings.token else None
        user = find_user(self.settings.profile_name, name)
        if user is None:
            request.session.clear()
        return user

    def csrf_token(self, request: Request) -> str:
        token = request.session.get("csrf")
        if token is None:
            token = request.session["csrf"] = new_csrf_token()
        return token

    def log_in(self, request: Request, user: User, via: str) -> None:
        # A new session: a CSRF token seen before the login is not kept.
        request.session.clear()
        request.session.update({"user": user.name, "via": via, "csrf": new_csrf_token()})
        request.state.user = user

    def flash(self, request: Request, message: str) -> None:
        request.session["flash"] = message

    def login_or_refusal(self, request: Request) -> Response | None:
        """None when the request may go on; else the answer to give: the login page for a
        browser, 401 for the API and streams. A ``?token=`` logs in (then redirects to the
        same address without it, so it stays in no history)."""
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "token" and credential.strip():
            # A script's request (as Jupyter's `Authorization: token ...`): no session, so
            # no CSRF token either, and a form it posts is refused.
            if not tokens_match(credential.strip(), self.settings.token):
                return JSONResponse({"error": "That token is not valid."}, status_code=401)
            request.state.user = User(TOKEN_USER, "operate")
            return None
        given = request.query_params.get("token")
        if given is not None:
            if tokens_match(given, self.settings.token):
                self.log_in(request, User(TOKEN_USER, "operate"), "token")
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                query = f"?{urlencode(rest)}" if rest else ""
                return RedirectResponse(request.url.path + query, status_code=303)
            return self.render(
                request,
                "login.html",
                {"error": "That token is not valid: use the address `veglia web` printed."},
                status_code=401,
            )
        if self.user(request) is not None:
            return None
        path = request.url.path
        if path.startswith(("/api/", "/live/")) or path in ("/api", "/live"):
            return JSONResponse({"error": "Log in first."}, status_code=401)
        target = path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?{urlencode({'next': target})}", status_code=303)

    # -- answers -------------------------------------------------------------------------
    def context(
        self, request: Request, extra: dict[str, Any], take_flash: bool = True
    ) -> dict[str, Any]:
        user = self.user(request)
        return {
            "user": user,
            "can_operate": bool(user and user.can_operate),
            "csrf_token": self.csrf_token(request),
            "flash": request.session.pop("flash", None) if take_flash else None,
            "title": "veglia",
            "page_name": "",
            "content_digest": "",
            **extra,
        }

    def render(
        self, request: Request, template: str, extra: dict[str, Any], status_code: int = 200
    ) -> HTMLResponse:
        html = self.templates.get_template(template).render(self.context(request, extra))
        return HTMLResponse(html, status_code=status_code)

    def render_page(self, template: str, context: dict[str, Any]) -> tuple[str, str]:
        """The whole page, and its ``content`` block alone (what a live update swaps in):
        cut from the page between base.html's markers, so that what the template imports
        or sets at its top level is there too. Escaping keeps a value from faking one."""
        html = self.templates.get_template(template).render(context)
        _, _, rest = html.partition(CONTENT_START)
        content, _, _ = rest.rpartition(CONTENT_END)
        return html, content

    def live_content(self, key: ViewKey, template: str, context: dict[str, Any]) -> str:
        """The content block of ``template`` for ``context``, rendered once for all who watch
        the same view with the same user: ten browsers on a page cost one render a change,
        not ten. The session's CSRF token goes in after (rendered as the placeholder), so
        a shared render never carries another session's."""
        view = context["view"]
        whose = (key, context["user"], context["can_operate"])
        cached = self._live_renders.pop(whose, None)
        if cached is None or cached[0] is not view:
            _, content = self.render_page(template, {**context, "csrf_token": self.placeholder})
            cached = (view, content)
        self._live_renders[whose] = cached  # the newest last
        while len(self._live_renders) > LIVE_RENDERS:  # views nobody may watch any more
            del self._live_renders[next(iter(self._live_renders))]
        return cached[1].replace(self.placeholder, context["csrf_token"])

    def not_found(self, request: Request, message: str) -> Response:
        if request.url.path.startswith("/api"):
            return JSONResponse({"error": message}, status_code=404)
        return self.render(
            request, "error.html", {"title": "Not found", "message": message}, status_code=404
        )

    def page_url(self, name: str, pk: int) -> str:
        """The address of page ``name`` of process ``pk``, or the overview without one."""
        path = self.page_paths.get(name)
        return path.replace("{pk:int}", str(pk)) if path else "/"


def digest(html: str) -> str:
    return hashlib.sha256(html.encode()).hexdigest()[:32]


def _params(request: Request) -> dict[str, Any]:
    return {**dict(request.query_params), **request.path_params}


def _page_routes(site: Site, page: pages.Page) -> list[BaseRoute]:
    def load_of(params: dict[str, Any]) -> Callable[[], Any]:
        return lambda: page.load(params)

    async def loaded(request: Request) -> dict[str, Any] | Response:
        """The page's view for the request, or the answer to give instead (log in, 404)."""
        refusal = site.login_or_refusal(request)
        if refusal is not None:
            return refusal
        params = _params(request)
        try:
            return await site.hub.view(view_key(page.name, params), load_of(params), page.covers)
        except NotExistent as exc:
            return site.not_found(request, str(exc))

    async def html(request: Request) -> Response:
        view = await loaded(request)
        if isinstance(view, Response):
            return view
        context = site.context(
            request, {"view": view, "title": page.title(view), "page_name": page.name}
        )
        html, content = site.render_page(page.template, context)
        # The digest is of the content below the marker, so it is set after one rendering.
        marked = f'data-digest="{digest(content)}"'
        return HTMLResponse(html.replace('data-digest=""', marked, 1))

    async def api(request: Request) -> Response:
        view = await loaded(request)
        return view if isinstance(view, Response) else JSONResponse(view)

    async def live(request: Request) -> Response:
        refusal = site.login_or_refusal(request)
        if refusal is not None:
            return refusal
        params = _params(request)
        context = site.context(request, {"page_name": page.name}, take_flash=False)
        seen = request.headers.get("last-event-id")
        key = view_key(page.name, params)
        updates = site.hub.watch(key, load_of(params), HEARTBEAT, page.covers)
        return StreamingResponse(
            _events(site, page, key, context, updates, seen), media_type="text/event-stream"
        )

    under = "" if page.path == "/" else page.path  # the overview's API is /api, not /api/
    return [
        Route(page.path, html, name=page.name),
        Route(f"/api{under}", api, name=f"api-{page.name}"),
        Route(f"/live{under}", live, name=f"live-{page.name}"),
    ]


async def _events(
    site: Site,
    page: pages.Page,
    key: ViewKey,
    context: dict[str, Any],
    updates: AsyncIterator[dict[str, Any] | BaseException | None],
    seen: str | None,
) -> AsyncIterator[str]:
    """The server-sent events of one watcher: ``update`` with the content block's HTML when
    it changed (its digest as the event id), ``problem`` when the view cannot be loaded, and
    a comment now and then while nothing changes."""
    yield "retry: 2000\n\n"
    async for item in updates:
        if item is None:
            yield ": still here\n\n"
        elif isinstance(item, BaseException):
            message = str(item) if isinstance(item, NotExistent) else "could not load"
            yield _event("problem", message, None)
        else:
            html = site.live_content(
                key, page.template, {**context, "view": item, "title": page.title(item)}
            )
            html_digest = digest(html)
            if html_digest != seen:
                seen = html_digest
                yield _event("update", html, html_digest)


def _event(name: str, data: str, event_id: str | None) -> str:
    lines = [f"event: {name}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines += [f"data: {line}" for line in data.splitlines() or [""]]
    return "\n".join(lines) + "\n\n"


def _login_routes(site: Site) -> list[BaseRoute]:
    async def login(request: Request) -> Response:
        target = request.query_params.get("next", "/")
        if not target.startswith("/") or target.startswith(("//", "/\\")):
            target = "/"  # never a redirect to another site
        if request.method == "GET":
            return site.render(request, "login.html", {"title": "Log in", "next": target})
        form = await request.form()
        if not tokens_match(str(form.get("csrf_token", "")), request.session.get("csrf")):
            return site.render(
                request,
                "login.html",
                {"title": "Log in", "next": target, "error": "The form expired; log in again."},
                status_code=403,
            )
        name, password = str(form.get("username", "")), str(form.get("password", ""))
        user = await asyncio.to_thread(find_user, site.settings.profile_name, name, password)
        if user is None:
            return site.render(
                request,
                "login.html",
                {"title": "Log in", "next": target, "error": "Wrong user name or password."},
                status_code=401,
            )
        site.log_in(request, user, "password")
        return RedirectResponse(target, status_code=303)

    async def logout(request: Request) -> Response:
        form = await request.form()
        if tokens_match(str(form.get("csrf_token", "")), request.session.get("csrf")):
            request.session.clear()
        return RedirectResponse("/login", status_code=303)

    return [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]


def create_app(settings: WebSettings) -> Starlette:
    """The app for one profile; the profile must be loaded in this process."""
    site = Site(settings)
    routes: list[BaseRoute] = [
        *_login_routes(site),
        *actions.routes(site),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    for page in pages.PAGES:
        routes += _page_routes(site, page)

    async def not_found(request: Request, exc: Exception) -> Response:
        if site.user(request) is None and not request.url.path.startswith("/static/"):
            refusal = site.login_or_refusal(request)
            if refusal is not None:
                return refusal
        return site.not_found(request, f"There is no page at {request.url.path}.")

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(ServerTiming),
            Middleware(SecurityHeaders),
            Middleware(
                SessionMiddleware,
                secret_key=settings.secret_key,
                session_cookie="veglia_session",
                same_site="lax",
                https_only=settings.https,
            ),
        ],
        exception_handlers={404: not_found},
    )
    app.state.hub = site.hub  # its counts, for the bench
    return app
