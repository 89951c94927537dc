"""lethe's guest SDK for Python components: the request and response model, Cloud Foundry V3
error envelopes, and the typed failures of lethe's capabilities, as plain Python.

Component logic written against this module (and a `Capabilities` object) runs under plain
CPython in unit tests, against a fake, and as wasm against lethe or Spin, where
`lethe_guest.wasm` supplies the real capabilities and serves `wasi:http`. It is the Python
twin of the Rust crate `lethe-guest` (`components/guest`): the same codes, titles and limits.
"""

import json
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

__all__ = [
    "MAX_BODY_BYTES",
    "Constraint",
    "Failed",
    "KubeError",
    "MalformedAuthorization",
    "Request",
    "Response",
    "bearer_token",
    "cf_error",
    "from_kube",
    "invalid_token",
    "json_response",
    "method_not_allowed",
    "not_authenticated",
    "not_authorized",
    "not_found",
    "parse_error",
    "too_large",
    "unavailable",
    "unknown_error",
    "unknown_request",
    "unprocessable",
]

# Largest request body a component accepts; larger ones get 413 before any handler runs.
MAX_BODY_BYTES = 1024 * 1024


class Constraint(Exception):
    """A SQL write a constraint refused (the caller's input was bad); the message names it."""


class Failed(Exception):
    """A SQL call that failed otherwise: the database is unreachable, the outcome of a write is
    unknown, or the statement is invalid."""


class KubeError(Exception):
    """A Kubernetes call that failed. `kind` is the WIT error case: `not-found`, `conflict`,
    `forbidden`, `unauthorized`, `invalid`, `gone`, `unavailable` or `timeout`."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class MalformedAuthorization(Exception):
    """An `Authorization` header that is a bearer credential but not `Bearer <token>`."""


@dataclass
class Request:
    """One HTTP request, as a component sees it. Header names are lower case."""

    method: str
    path: str
    headers: Dict[str, bytes] = field(default_factory=dict)
    body: bytes = b""
    query: str = ""

    def path_info(self) -> str:
        """The path below the component's route (Spin's `spin-path-info`), else the path."""
        info = self.headers.get("spin-path-info")
        return info.decode("utf-8", "replace") if info is not None else self.path


@dataclass
class Response:
    """One HTTP response."""

    status: int
    body: bytes
    headers: List[Tuple[str, bytes]] = field(
        default_factory=lambda: [("content-type", b"application/json")]
    )


def json_response(status: int, value) -> Response:
    """`value` as a JSON response."""
    return Response(status, json.dumps(value, separators=(",", ":")).encode())


def cf_error(status: int, code: int, title: str, detail: str) -> Response:
    """Cloud Foundry's V3 error envelope with one error."""
    return json_response(status, {"errors": [{"code": code, "title": title, "detail": detail}]})


def not_found(detail: str) -> Response:
    """404 `CF-ResourceNotFound` (10010)."""
    return cf_error(404, 10010, "CF-ResourceNotFound", detail)


def unknown_request() -> Response:
    """404 `CF-NotFound` (10000): no route takes the request."""
    return cf_error(404, 10000, "CF-NotFound", "Unknown request")


def method_not_allowed() -> Response:
    """405 `CF-MethodNotAllowed` (10000)."""
    return cf_error(
        405, 10000, "CF-MethodNotAllowed", "The request method is not allowed for this resource"
    )


def unprocessable(detail: str) -> Response:
    """422 `CF-UnprocessableEntity` (10008)."""
    return cf_error(422, 10008, "CF-UnprocessableEntity", detail)


def parse_error(detail: str) -> Response:
    """400 `CF-MessageParseError` (1001)."""
    return cf_error(400, 1001, "CF-MessageParseError", detail)


def unknown_error() -> Response:
    """500 `UnknownError` (10001)."""
    return cf_error(500, 10001, "UnknownError", "An unknown error occurred.")


def unavailable(detail: str) -> Response:
    """503 `CF-ServiceUnavailable` (10015)."""
    return cf_error(503, 10015, "CF-ServiceUnavailable", detail)


def not_authenticated() -> Response:
    """401 `CF-NotAuthenticated` (10002): no credentials were given."""
    return cf_error(401, 10002, "CF-NotAuthenticated", "Authentication error")


def invalid_token() -> Response:
    """401 `CF-InvalidAuthToken` (1000): a token that is malformed or not accepted."""
    return cf_error(401, 1000, "CF-InvalidAuthToken", "Invalid Auth Token")


def not_authorized() -> Response:
    """403 `CF-NotAuthorized` (10003)."""
    return cf_error(
        403, 10003, "CF-NotAuthorized", "You are not authorized to perform the requested action"
    )


def too_large() -> Response:
    """413 `CF-RequestEntityTooLarge` for a body over `MAX_BODY_BYTES`."""
    return cf_error(413, 10001, "CF-RequestEntityTooLarge", "The request body is too large")


def from_kube(e: KubeError, not_found_detail: str) -> Response:
    """The answer to a Kubernetes failure of a call made for the caller; `not_found_detail` is
    the detail when the object is missing."""
    if e.kind == "not-found":
        return not_found(not_found_detail)
    if e.kind == "unauthorized":
        return invalid_token()
    if e.kind == "forbidden":
        return not_authorized()
    if e.kind in ("invalid", "conflict"):
        return unprocessable(e.message)
    return unavailable(e.message)


def bearer_token(req: Request) -> Optional[str]:
    """The caller's bearer token, or `None` when there is none (a header that is not a bearer
    credential counts as none, as Cloud Controller takes it). Raises `MalformedAuthorization`."""
    raw = req.headers.get("authorization")
    if raw is None or raw.lstrip()[:6].lower() != b"bearer":
        return None
    try:
        value = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise MalformedAuthorization()
    scheme, sep, token = value.partition(" ")
    token = token.strip()
    if not sep or scheme.lower() != "bearer" or not token or " " in token:
        raise MalformedAuthorization()
    return token
