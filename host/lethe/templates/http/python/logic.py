"""The `__NAME__` component: HTTP handlers with SQL and Kubernetes, on lethe's Python guest SDK.

Routes, below `/__NAME__`:

- `PUT items/{key}` stores the request body (201 new, 200 replaced), `GET items/{key}` reads it
  back and `GET items` lists every item;
- `GET configmaps/{namespace}` lists the names of the ConfigMaps in `namespace`, as the caller
  (the request's bearer token) may see them.

Errors are Cloud Foundry V3 envelopes. `handle` is a function of the request and a
`Capabilities` object, so it is tested under plain CPython against a fake (`test_logic.py`) and
runs as wasm against lethe or Spin (`app.py`).
"""

import re
from typing import List, Optional, Protocol

from lethe_guest import (
    Constraint,
    Failed,
    KubeError,
    MalformedAuthorization,
    Request,
    Response,
    bearer_token,
    from_kube,
    invalid_token,
    json_response,
    method_not_allowed,
    not_authenticated,
    not_found,
    parse_error,
    unavailable,
    unknown_request,
    unprocessable,
)

KEY = re.compile(r"[A-Za-z0-9_-]{1,63}")


class Capabilities(Protocol):
    """The capability calls the logic makes: `lethe_guest.wasm.Host` in the component, a fake
    in the tests."""

    def query(self, statement: str, params: list) -> List[list]: ...

    def execute(self, statement: str, params: list) -> int: ...

    def list(self, token: Optional[str], api_version: str, kind: str,
             namespace: Optional[str]) -> List[dict]: ...


def handle(caps: Capabilities, req: Request) -> Response:
    """Answers one request."""
    segments = req.path_info().strip("/").split("/")
    key = segments[1] if len(segments) == 2 else ""
    shape = (segments[0], "*") if len(segments) == 2 else tuple(segments)
    routes = {
        ("items",): {"GET": lambda: list_items(caps)},
        ("items", "*"): {
            "GET": lambda: get_item(caps, key),
            "PUT": lambda: put_item(caps, key, req.body),
        },
        ("configmaps", "*"): {"GET": lambda: list_configmaps(caps, req, key)},
    }
    methods = routes.get(shape)
    if methods is None:
        return unknown_request()
    action = methods.get(req.method)
    if action is None:
        return method_not_allowed()
    try:
        return action()
    except Constraint as c:
        return unprocessable(f"refused by {c}")
    except Failed:
        return unavailable("The database is not available")


def list_items(caps: Capabilities) -> Response:
    rows = caps.query("SELECT item_key, body FROM __SNAKE___item ORDER BY item_key", [])
    return json_response(200, {"resources": [{"key": k, "body": b} for k, b in rows]})


def get_item(caps: Capabilities, key: str) -> Response:
    if not KEY.fullmatch(key):
        return not_found("Item not found")
    rows = caps.query("SELECT body FROM __SNAKE___item WHERE item_key = $1", [key])
    if not rows:
        return not_found("Item not found")
    return json_response(200, {"key": key, "body": rows[0][0]})


def put_item(caps: Capabilities, key: str, body: bytes) -> Response:
    if not KEY.fullmatch(key):
        return unprocessable("Item keys are 1-63 letters, digits, '-' and '_'")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return parse_error("The body must be UTF-8 text")
    # PostgreSQL cannot store NUL in text (SQLite can): refuse it the same way on both.
    if "\0" in text:
        return unprocessable("The body must not contain NUL")
    existed = bool(caps.query("SELECT 1 FROM __SNAKE___item WHERE item_key = $1", [key]))
    caps.execute(
        "INSERT INTO __SNAKE___item (item_key, body) VALUES ($1, $2) "
        "ON CONFLICT (item_key) DO UPDATE SET body = excluded.body",
        [key, text],
    )
    return json_response(200 if existed else 201, {"key": key, "body": text})


def list_configmaps(caps: Capabilities, req: Request, namespace: str) -> Response:
    try:
        token = bearer_token(req)
    except MalformedAuthorization:
        return invalid_token()
    if token is None:
        return not_authenticated()
    try:
        items = caps.list(token, "v1", "ConfigMap", namespace)
    except KubeError as e:
        return from_kube(e, "Namespace not found")
    names = sorted(item["metadata"]["name"] for item in items)
    return json_response(200, {"namespace": namespace, "configmaps": names})
