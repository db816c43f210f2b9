"""Who may call the server: an API key for the API, and the browser origins CORS admits.

With a key, every API endpoint (`/v1/...`, `/metrics`) needs ``Authorization: Bearer KEY`` — compared in
constant time, a 401 OpenAI error body otherwise — as vLLM's and llama.cpp's servers do. Left open: ``/health``
(for load balancers) and the playground's own page and static files, which hold no data (the page asks for the
key and sends it with its API calls). Without ``allow_origins`` no cross-origin response headers are sent, so a
web page from another origin cannot read the API's answers; with them, CORS admits exactly those origins.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse

from openafm.serve.protocol import RequestError

KEY_ENV = "OPENAFM_API_KEY"
OPEN_PATHS = ("/", "/health")
OPEN_PREFIXES = ("/static/",)


@dataclass(frozen=True)
class Access:
    api_key: str | None = None                 # None: no key needed
    allow_origins: tuple[str, ...] = ()        # origins CORS admits, e.g. ("https://example.org",); "*" = any

    def __post_init__(self) -> None:
        if self.api_key is not None and (not self.api_key or self.api_key != self.api_key.strip()):
            raise ValueError("the API key must be non-empty and without surrounding whitespace")
        for origin in self.allow_origins:
            if origin != "*" and not origin.startswith(("http://", "https://")):
                raise ValueError(f"--allow-origin {origin!r} is not an origin: use scheme://host[:port] or '*'")

    @classmethod
    def from_options(cls, api_key: str | None, allow_origins: list[str]) -> Access:
        """--api-key, else the OPENAFM_API_KEY environment variable; --allow-origin as given."""
        return cls(api_key if api_key is not None else os.environ.get(KEY_ENV) or None, tuple(allow_origins))


def install(app: FastAPI, access: Access) -> None:
    """Add the key check and, where origins are named, CORS (outermost, so preflight requests need no key)."""
    if access.api_key is not None:
        key = access.api_key.encode()

        @app.middleware("http")
        async def require_key(request: Request, call_next):
            path = request.url.path
            if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES) or request.method == "OPTIONS":
                return await call_next(request)
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key):
                error = RequestError("a valid API key is needed: send the header 'Authorization: Bearer <key>'",
                                     None, status=401, code="invalid_api_key")
                return JSONResponse(error.body(), status_code=401, headers={"WWW-Authenticate": "Bearer"})
            return await call_next(request)
    if access.allow_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(access.allow_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])


def exposed_without_key(host: str, access: Access) -> bool:
    """True when the server binds beyond this machine with no key: anyone who can reach it may use it."""
    if access.api_key is not None or host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:          # a host name other than localhost
        return True
