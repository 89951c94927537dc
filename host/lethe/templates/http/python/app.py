"""The WebAssembly edge of the `__NAME__` component: `wasi:http/incoming-handler`, served by
`logic.handle` with lethe's capabilities (the Python guest SDK's `Host`)."""

import logic
from lethe_guest.wasm import Host, serve
from wit_world import exports


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request, response_out) -> None:
        serve(request, response_out, lambda req: logic.handle(Host(), req))
