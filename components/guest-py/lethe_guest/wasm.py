"""The WebAssembly edges of a Python component: `serve` answers `wasi:http` with a handler of
`lethe_guest.Request`, and `Host` is lethe's capabilities (`sql`, `kube`, `config`, `log`) with
the failures of `lethe_guest`. Importable only inside a component built by componentize-py
against a lethe world (it imports the generated `wit_world`)."""

import json
from typing import Callable, List, Optional

from componentize_py_types import Err, Ok
from wit_world.imports import config, kube, log, sql, streams, types

import lethe_guest
from lethe_guest import Constraint, Failed, KubeError, Request, Response

__all__ = ["Host", "serve"]


def _to_value(p) -> sql.Value:
    if p is None:
        return sql.Value_Null()
    if isinstance(p, bool):
        return sql.Value_Boolean(p)
    if isinstance(p, int):
        return sql.Value_Integer(p)
    if isinstance(p, float):
        return sql.Value_Real(p)
    if isinstance(p, bytes):
        return sql.Value_Blob(p)
    return sql.Value_Text(str(p))


def _from_value(v: sql.Value):
    if isinstance(v, sql.Value_Boolean):
        return int(v.value)
    if isinstance(v, sql.Value_Null):
        return None
    return v.value


def _sql_error(e: Err) -> Exception:
    if isinstance(e.value, sql.Error_ConstraintViolation):
        return Constraint(e.value.value)
    return Failed(repr(e.value))


_KUBE_ERRORS = {
    kube.Error_NotFound: "not-found",
    kube.Error_Conflict: "conflict",
    kube.Error_Forbidden: "forbidden",
    kube.Error_Unauthorized: "unauthorized",
    kube.Error_Invalid: "invalid",
    kube.Error_Gone: "gone",
    kube.Error_Unavailable: "unavailable",
    kube.Error_Timeout: "timeout",
}


def _kube_error(e: Err) -> KubeError:
    detail = getattr(e.value, "value", "")
    message = getattr(detail, "message", detail)
    return KubeError(_KUBE_ERRORS.get(type(e.value), "unavailable"), str(message))


class Host:
    """lethe's capabilities. Kubernetes calls run as the caller whose bearer `token` is given,
    or as lethe's privileged identity when `token` is `None`; each needs its grant in the
    component's `kube_identities`."""

    def query(self, statement: str, params: list) -> List[list]:
        """Runs a read (`$1`, `$2`, ... placeholders); rows of Python values. Raises
        `Constraint` or `Failed`."""
        try:
            rows = sql.query(statement, [_to_value(p) for p in params])
        except Err as e:
            raise _sql_error(e)
        return [[_from_value(v) for v in row] for row in rows.rows]

    def execute(self, statement: str, params: list) -> int:
        """Runs one write; the rows it affected. Raises `Constraint` or `Failed`; a write whose
        outcome is unknown is `Failed` and is never retried by the host."""
        try:
            return sql.execute(statement, [_to_value(p) for p in params])
        except Err as e:
            raise _sql_error(e)

    def config(self, key: str) -> Optional[str]:
        """The component variable `key`, or `None` when it is not set."""
        try:
            return config.get(key)
        except Err:
            return None

    def log(self, level: str, message: str) -> None:
        """Logs `message` at `level` (`trace`, `debug`, `info`, `warn` or `error`)."""
        log.write(log.Level[level.upper()], message)

    def _client(self, token: Optional[str]) -> kube.Client:
        identity = kube.Identity_Privileged() if token is None else kube.Identity_Caller(token)
        return kube.Client.open(identity)

    def get(self, token: Optional[str], api_version: str, kind: str,
            namespace: Optional[str], name: str) -> dict:
        """The object, as the API server returned it. Raises `KubeError`."""
        try:
            with self._client(token) as client:
                found = client.get(kube.ObjectRef(api_version, kind, namespace, name))
        except Err as e:
            raise _kube_error(e)
        return json.loads(found.json)

    def list(self, token: Optional[str], api_version: str, kind: str,
             namespace: Optional[str], label_selector: Optional[str] = None) -> List[dict]:
        """Every object of the collection, all pages. Raises `KubeError`."""
        items: List[dict] = []
        next_page: Optional[str] = None
        try:
            with self._client(token) as client:
                while True:
                    options = kube.ListOptions(label_selector, None, 500, next_page)
                    page = client.list(api_version, kind, namespace, options)
                    items.extend(json.loads(o.json) for o in page.items)
                    if not page.continue_token:
                        return items
                    next_page = page.continue_token
        except Err as e:
            raise _kube_error(e)


_METHODS = {
    types.Method_Get: "GET",
    types.Method_Head: "HEAD",
    types.Method_Post: "POST",
    types.Method_Put: "PUT",
    types.Method_Delete: "DELETE",
    types.Method_Connect: "CONNECT",
    types.Method_Options: "OPTIONS",
    types.Method_Trace: "TRACE",
    types.Method_Patch: "PATCH",
}


def _read_request(request: types.IncomingRequest):
    """The request, or the response that refuses it (a body over `MAX_BODY_BYTES`)."""
    method = request.method()
    name = method.value if isinstance(method, types.Method_Other) else _METHODS[type(method)]
    path, _, query = (request.path_with_query() or "/").partition("?")
    headers = {}
    for key, value in request.headers().entries():
        headers.setdefault(key.lower(), value)
    body = b""
    if name not in ("GET", "HEAD"):
        incoming = request.consume()
        with incoming.stream() as stream:
            while True:
                try:
                    body += stream.blocking_read(65536)
                except Err as e:
                    if isinstance(e.value, streams.StreamError_Closed):
                        break
                    return lethe_guest.parse_error("The request body could not be read")
                if len(body) > lethe_guest.MAX_BODY_BYTES:
                    return lethe_guest.too_large()
        types.IncomingBody.finish(incoming)
    return Request(name, path, headers, body, query)


def _send(out: types.ResponseOutparam, response: Response) -> None:
    headers = list(response.headers) + [("content-length", str(len(response.body)).encode())]
    outgoing = types.OutgoingResponse(types.Fields.from_list(headers))
    outgoing.set_status_code(response.status)
    body = outgoing.body()
    types.ResponseOutparam.set(out, Ok(outgoing))
    with body.write() as stream:
        # `blocking-write-and-flush` takes at most 4096 bytes a call.
        for start in range(0, len(response.body), 4096):
            stream.blocking_write_and_flush(response.body[start:start + 4096])
    types.OutgoingBody.finish(body, None)


def serve(request: types.IncomingRequest, out: types.ResponseOutparam,
          handler: Callable[[Request], Response]) -> None:
    """Answers one `wasi:http` request with `handler`. A failure the handler did not turn into
    an answer is a 500 `UnknownError` envelope, logged, never a trap."""
    parsed = _read_request(request)
    if isinstance(parsed, Response):
        _send(out, parsed)
        return
    try:
        response = handler(parsed)
    except Exception as e:  # noqa: BLE001 - the envelope, not a trap, is the contract
        log.write(log.Level.ERROR, f"unhandled {type(e).__name__}: {e}")
        response = lethe_guest.unknown_error()
    _send(out, response)
