"""What the routes mounted beside the pages (:mod:`.actions`, :mod:`.verify`) use of the
site: a Protocol that :class:`veglia.plugins.web.app.Site` meets, so they stand below the
app that mounts them rather than importing it back."""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from veglia.plugins.web.auth import User

__all__ = ["SiteLike"]


class SiteLike(Protocol):
    """The login, the answers and the page addresses of the site."""

    def user(self, request: Request) -> User | None: ...

    def flash(self, request: Request, message: str) -> None: ...

    def login_or_refusal(self, request: Request) -> Response | None: ...

    def render(
        self, request: Request, template: str, extra: dict[str, Any], status_code: int = 200
    ) -> Response: ...

    def not_found(self, request: Request, message: str) -> Response: ...

    def page_url(self, name: str, pk: int) -> str: ...
