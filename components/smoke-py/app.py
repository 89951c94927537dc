"""The WebAssembly edges of the Python smoke component: `wasi:http/incoming-handler`, Spin's cron
export, and lethe's capabilities (`kube`, `sql`, `log`, `config`) behind `logic.Capabilities`.

Built with componentize-py against lethe's WIT world `smoke-py` (see `docs/writing-a-component.md`)."""

import logic
import wit_world
from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import config, kube, log, sql, streams, types


def to_value(p) -> sql.Value:
    if p is None:
        return sql.Value_Null()
    if isinstance(p, bool):
        return sql.Value_Boolean(p)
    if isinstance(p, int):
        return sql.Value_Integer(p)
    return sql.Value_Text(str(p))


def from_value(v: sql.Value):
    if isinstance(v, (sql.Value_Integer, sql.Value_Text, sql.Value_Real)):
        return v.value
    if isinstance(v, sql.Value_Boolean):
        return int(v.value)
    return None


def sql_error(e: Err) -> Exception:
    if isinstance(e.value, sql.Error_ConstraintViolation):
        return logic.Constraint(e.value.value)
    return logic.Failed(repr(e.value))


KUBE_ERRORS = {
    kube.Error_NotFound: "not-found",
    kube.Error_Conflict: "conflict",
    kube.Error_Forbidden: "forbidden",
    kube.Error_Unauthorized: "unauthorized",
    kube.Error_Invalid: "invalid",
    kube.Error_Gone: "gone",
    kube.Error_Unavailable: "unavailable",
    kube.Error_Timeout: "timeout",
}


def kube_error(e: Err) -> logic.KubeError:
    detail = getattr(e.value, "value", "")
    message = getattr(detail, "message", detail)
    return logic.KubeError(KUBE_ERRORS.get(type(e.value), "unavailable"), str(message))


class Host:
    """lethe's capabilities, as `logic.Capabilities`."""

    def query(self, statement: str, params: list) -> list:
        try:
            rows = sql.query(statement, [to_value(p) for p in params])
        except Err as e:
            raise sql_error(e)
        return [[from_value(v) for v in row] for row in rows.rows]

    def execute(self, statement: str, params: list) -> int:
        try:
            return sql.execute(statement, [to_value(p) for p in params])
        except Err as e:
            raise sql_error(e)

    def config(self, key: str):
        try:
            return config.get(key)
        except Err:
            return None

    def get_as_caller(self, token: str, api_version: str, kind: str, name: str) -> dict:
        import json

        try:
            with kube.Client.open(kube.Identity_Caller(token)) as client:
                found = client.get(kube.ObjectRef(api_version, kind, None, name))
        except Err as e:
            raise kube_error(e)
        return json.loads(found.json)


METHODS = {
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


def read_request(request: types.IncomingRequest):
    """The request, or the response that refuses it (a body over `MAX_BODY_BYTES`)."""
    method = request.method()
    name = method.value if isinstance(method, types.Method_Other) else METHODS[type(method)]
    path = (request.path_with_query() or "/").split("?", 1)[0]
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
                    return logic.parse_error("The request body could not be read")
                if len(body) > logic.MAX_BODY_BYTES:
                    return logic.too_large()
        types.IncomingBody.finish(incoming)
    return logic.Request(name, path, headers, body)


def send(out: types.ResponseOutparam, response: logic.Response) -> None:
    headers = list(response.headers) + [("content-length", str(len(response.body)).encode())]
    outgoing = types.OutgoingResponse(types.Fields.from_list(headers))
    outgoing.set_status_code(response.status)
    body = outgoing.body()
    types.ResponseOutparam.set(out, Ok(outgoing))
    with body.write() as stream:
        # `blocking-write-and-flush` takes at most 4096 bytes a call.
        for start in range(0, len(response.body), 4096):
            stream.blocking_write_and_flush(response.body[start : start + 4096])
    types.OutgoingBody.finish(body, None)


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request: types.IncomingRequest, response_out: types.ResponseOutparam) -> None:
        parsed = read_request(request)
        if isinstance(parsed, logic.Response):
            send(response_out, parsed)
            return
        send(response_out, logic.handle(Host(), parsed))


class WitWorld(wit_world.WitWorld):
    async def handle_cron_event(self, metadata) -> None:
        try:
            logic.record_tick(Host(), metadata.timestamp)
        except (logic.Constraint, logic.Failed) as e:
            log.write(log.Level.ERROR, f"recording a tick failed: {e}")
            raise Err(wit_world.imports.cron_types.Error_Other(str(e)))
