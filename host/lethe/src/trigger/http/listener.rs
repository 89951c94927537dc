//! Accepting connections and serving them with hyper (HTTP/1.1, keep-alive, half-close), and
//! the graceful stop: in-flight requests finish, within a bound.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::watch;
use wasmtime_wasi_http::io::TokioIo;

use super::Router;
use super::access::handle;
use super::limits::PARSER_MAX_HEADERS;
use super::spin_headers::header_value;

/// Serves `router` on `listener` until `shutdown` turns true, then waits (bounded) for in-flight
/// requests.
pub async fn serve(
    listener: TcpListener,
    router: Arc<Router>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, client_addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(local_addr) = stream.local_addr() else {
            continue;
        };
        let router = router.clone();
        let peer = Arc::new(Peer::new(client_addr, local_addr));
        let service = service_fn(move |req| {
            let (router, peer) = (router.clone(), peer.clone());
            async move { Ok::<_, Infallible>(handle(&router, &peer, req).await) }
        });
        // A client that closes its side after sending a whole request still gets that request
        // carried out (half-close is how such a client says it is done sending).
        let conn = http1::Builder::new()
            .keep_alive(true)
            .half_close(true)
            .max_headers(PARSER_MAX_HEADERS)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection from {client_addr} ended: {e}");
            }
        });
    }
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all HTTP connections closed"),
        _ = tokio::time::sleep(Duration::from_secs(10)) => tracing::warn!("gave up waiting for HTTP connections to close"),
    }
    Ok(())
}

/// What a connection's requests share about its two ends.
pub struct Peer {
    /// Where the requests come in: the authority of an HTTP/1.0 request without `Host`.
    pub local: SocketAddr,
    /// `spin-client-addr`, where they come from, formatted once per connection.
    pub(super) client_header: Option<HeaderValue>,
}

impl Peer {
    /// The ends of a connection from `client` accepted on `local`; the `spin-client-addr` header
    /// value is formatted here, once for all the connection's requests.
    pub fn new(client: SocketAddr, local: SocketAddr) -> Self {
        Self {
            local,
            client_header: header_value(&client.to_string()),
        }
    }
}
