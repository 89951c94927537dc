"""The smoke component's logic, in Python: the twin of `components/smoke` (Rust), held to the
same end-to-end test.

HTTP, below the component's route (`/smoke-py/...` in its `spin.toml`):

- `PUT notes/{name}` stores the body as a note (201 new, 200 replaced);
- `GET notes/{name}` reads it back; `GET notes` lists all;
- `GET ticks` counts the cron ticks recorded;
- `GET greeting` returns the `greeting` configuration value;
- `GET namespaces/{name}` reads a Namespace from Kubernetes as the caller (the request's bearer
  token): its name and phase, or the CF error for what the cluster answered.

`handle` is a function of a `Request` and a `Capabilities` object, so it runs under plain CPython
against a fake (`test_logic.py`) and as wasm against lethe (`app.py` supplies the real one). The
request model and error envelopes are the Python guest SDK's (`components/guest-py`).
"""

import re
from typing import Callable, Dict, List, Optional, Protocol, Tuple

from lethe_guest import (
    Constraint,
    Failed,
    KubeError,
    MalformedAuthorization,
    Request,
    Response,
    bearer_token,
    cf_error,
    from_kube,
    invalid_token,
    json_response,
    not_authenticated,
    not_found,
    parse_error,
    unknown_error,
    unprocessable,
)

NOTE_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")
DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


class Capabilities(Protocol):
    """The capability calls the logic makes: `lethe_guest.wasm.Host` in the component, a fake
    in `test_logic.py`."""

    def query(self, statement: str, params: list) -> List[list]:
        """Runs a read; raises `Constraint` or `Failed`."""

    def execute(self, statement: str, params: list) -> int:
        """Runs a write and returns the rows affected; raises `Constraint` or `Failed`."""

    def config(self, key: str) -> Optional[str]:
        """A configuration value, or `None` when it is not set."""

    def get(self, token: Optional[str], api_version: str, kind: str,
            namespace: Optional[str], name: str) -> dict:
        """One object, read as the caller with `token`; raises `KubeError`."""


def handle(caps: Capabilities, req: Request) -> Response:
    """Routes one request."""
    segments = req.path_info().rstrip("/").lstrip("/").split("/")
    name = segments[1] if len(segments) == 2 else ""
    shape = (segments[0], "*") if len(segments) == 2 else tuple(segments)
    routes: Dict[Tuple[str, ...], Dict[str, Callable[[], Response]]] = {
        ("notes",): {"GET": lambda: list_notes(caps)},
        ("notes", "*"): {
            "GET": lambda: get_note(caps, name),
            "PUT": lambda: put_note(caps, name, req.body),
        },
        ("ticks",): {"GET": lambda: count_ticks(caps)},
        ("greeting",): {
            "GET": lambda: json_response(200, {"greeting": caps.config("greeting") or ""})
        },
        ("namespaces", "*"): {"GET": lambda: get_namespace(caps, req, name)},
    }
    methods = routes.get(shape)
    if methods is None:
        return not_found("Unknown smoke route")
    action = methods.get(req.method)
    if action is None:
        return cf_error(405, 10000, "CF-MethodNotAllowed", f"{req.method} is not allowed here")
    try:
        return action()
    except Constraint as c:
        return unprocessable(f"rejected by constraint {c}")
    except Failed:
        return unknown_error()


def record_tick(caps: Capabilities, timestamp: int) -> None:
    """Records one cron tick; repeated ticks for the same second are recorded once."""
    caps.execute(
        "INSERT INTO smoke_py_tick (fired_at) VALUES ($1) ON CONFLICT (fired_at) DO NOTHING",
        [timestamp],
    )


def list_notes(caps: Capabilities) -> Response:
    rows = caps.query("SELECT name, body FROM smoke_py_note ORDER BY name", [])
    return json_response(200, {"resources": [{"name": n, "body": b} for n, b in rows]})


def get_note(caps: Capabilities, name: str) -> Response:
    if not NOTE_NAME.fullmatch(name):
        return not_found("Note not found")
    rows = caps.query("SELECT name, body FROM smoke_py_note WHERE name = $1", [name])
    if not rows:
        return not_found("Note not found")
    return json_response(200, {"name": rows[0][0], "body": rows[0][1]})


def put_note(caps: Capabilities, name: str, body: bytes) -> Response:
    if not NOTE_NAME.fullmatch(name):
        return unprocessable("Note names are 1-63 characters of letters, digits, '-' and '_'")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return parse_error("The note must be UTF-8 text")
    # PostgreSQL cannot store NUL in text (SQLite can): refusing it here gives the same answer
    # on both.
    if "\0" in text:
        return unprocessable("The note must not contain NUL characters")
    existed = bool(caps.query("SELECT 1 FROM smoke_py_note WHERE name = $1", [name]))
    caps.execute(
        "INSERT INTO smoke_py_note (name, body) VALUES ($1, $2) "
        "ON CONFLICT (name) DO UPDATE SET body = excluded.body",
        [name, text],
    )
    return json_response(200 if existed else 201, {"name": name, "body": text})


def count_ticks(caps: Capabilities) -> Response:
    rows = caps.query("SELECT COUNT(*) FROM smoke_py_tick", [])
    count = rows[0][0] if rows and isinstance(rows[0][0], int) else 0
    return json_response(200, {"count": count})


def get_namespace(caps: Capabilities, req: Request, name: str) -> Response:
    """The Namespace `name` as the caller sees it. A name no Namespace can have is not found
    without asking the cluster."""
    try:
        token = bearer_token(req)
    except MalformedAuthorization:
        return invalid_token()
    if token is None:
        return not_authenticated()
    if not DNS_LABEL.fullmatch(name):
        return not_found("Namespace not found")
    try:
        namespace = caps.get(token, "v1", "Namespace", None, name)
    except KubeError as e:
        return from_kube(e, "Namespace not found")
    phase = (namespace.get("status") or {}).get("phase")
    return json_response(200, {"name": name, "phase": phase})
