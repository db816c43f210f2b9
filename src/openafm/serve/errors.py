"""The server's request errors: `RequestError`, answered as an OpenAI error body, and `need`, the check that raises it.

Every reader of a request (serve.protocol, serve.images, serve.responses_api) raises these, naming the offending
field in `param`; the application (serve.app) turns them into the status and body.
"""

from __future__ import annotations


class RequestError(Exception):
    """A request the server answers with an OpenAI error body: message, the offending `param`, status."""

    def __init__(self, message: str, param: str | None = None, *, status: int = 400,
                 kind: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.message, self.param, self.status, self.kind, self.code = message, param, status, kind, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def need(cond: bool, message: str, param: str | None) -> None:
    if not cond:
        raise RequestError(message, param)
