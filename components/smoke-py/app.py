"""The WebAssembly edges of the Python smoke component: `wasi:http/incoming-handler` and Spin's
cron export, served by `logic` with lethe's capabilities (the Python guest SDK's `Host`).

Built with componentize-py against lethe's WIT world `smoke-py` (see
`docs/writing-a-component.md`)."""

import logic
import wit_world
from componentize_py_types import Err
from lethe_guest import Constraint, Failed
from lethe_guest.wasm import Host, serve
from wit_world import exports
from wit_world.imports import cron_types


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request, response_out) -> None:
        serve(request, response_out, lambda req: logic.handle(Host(), req))


class WitWorld(wit_world.WitWorld):
    async def handle_cron_event(self, metadata) -> None:
        try:
            logic.record_tick(Host(), metadata.timestamp)
        except (Constraint, Failed) as e:
            Host().log("error", f"recording a tick failed: {e}")
            raise Err(cron_types.Error_Other(str(e)))
