//! The WebAssembly edge: `wasi:http/incoming-handler`, served by [`crate::handle`] with the
//! host's capabilities (the guest SDK's `Host`, which imports only what the logic calls).

struct Component;

impl wasip2::exports::http::incoming_handler::Guest for Component {
    fn handle(
        request: wasip2::http::types::IncomingRequest,
        out: wasip2::http::types::ResponseOutparam,
    ) {
        let host = lethe_guest::host::Host::default();
        lethe_guest::wasi_http::serve(request, out, |req| crate::handle(&host, &req));
    }
}

wasip2::http::proxy::export!(Component);
