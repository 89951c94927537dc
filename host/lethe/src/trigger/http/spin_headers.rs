//! The request as a Spin component expects it: an authority (as `wasi:http` gives every
//! incoming request), and Spin's routing headers, which a client can never set itself.

use std::net::SocketAddr;

use hyper::header::{HeaderName, HeaderValue};

use super::{HttpComponent, Peer};
use crate::manifest::RouteMatch;

/// Makes sure the request has the authority wasi:http gives every incoming request (taken from
/// the target, else from `Host`), or says why it is malformed: RFC 9112 §3.2 wants exactly one
/// `Host` on an HTTP/1.1 request whose target has no authority, and a `Host` that is not a host
/// and port cannot be one. An HTTP/1.0 request may lack `Host`; it gets the address it came in on.
pub(super) fn ensure_authority<B>(
    req: &mut hyper::Request<B>,
    local_addr: SocketAddr,
) -> Result<(), &'static str> {
    if req.uri().authority().is_some() {
        return Ok(());
    }
    let mut hosts = req.headers().get_all(hyper::header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err("The request has more than one Host header"),
        (Some(host), None) => {
            // Empty is what RFC 9112 has clients send when the target URI has no authority.
            let valid = host.is_empty()
                || host
                    .to_str()
                    .is_ok_and(|h| h.parse::<hyper::http::uri::Authority>().is_ok());
            if valid {
                Ok(())
            } else {
                Err("The Host header is not a valid host and port")
            }
        }
        (None, _) if req.version() <= hyper::Version::HTTP_10 => {
            if let Some(value) = header_value(&local_addr.to_string()) {
                req.headers_mut().insert(hyper::header::HOST, value);
            }
            Ok(())
        }
        (None, _) => Err("The request has no Host header"),
    }
}

/// Adds Spin's routing headers (dropping any a client sent, so they cannot be spoofed).
pub(super) fn set_spin_headers<B>(
    req: &mut hyper::Request<B>,
    target: &HttpComponent,
    m: &RouteMatch,
    peer: &Peer,
) {
    let full_url = format!(
        "http://{}{}",
        req.headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost"),
        req.uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
    );
    let matched = header_value(req.uri().path().strip_suffix(&m.path_info).unwrap_or(""));
    let headers = req.headers_mut();
    let spoofed: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("spin-"))
        .cloned()
        .collect();
    for name in spoofed {
        headers.remove(name);
    }
    // One growth of the map instead of several as the headers below go in.
    headers.reserve(7 + m.params.len());
    // Names made at compile time: `from_static` checks its argument on every call.
    const FULL_URL: HeaderName = HeaderName::from_static("spin-full-url");
    const PATH_INFO: HeaderName = HeaderName::from_static("spin-path-info");
    const MATCHED_ROUTE: HeaderName = HeaderName::from_static("spin-matched-route");
    const BASE_PATH: HeaderName = HeaderName::from_static("spin-base-path");
    const RAW_COMPONENT_ROUTE: HeaderName = HeaderName::from_static("spin-raw-component-route");
    const COMPONENT_ROUTE: HeaderName = HeaderName::from_static("spin-component-route");
    const CLIENT_ADDR: HeaderName = HeaderName::from_static("spin-client-addr");
    let mut set = |name: HeaderName, value: Option<HeaderValue>| {
        if let Some(v) = value {
            headers.insert(name, v);
        }
    };
    set(FULL_URL, header_value(&full_url));
    set(PATH_INFO, header_value(&m.path_info));
    set(MATCHED_ROUTE, matched);
    set(BASE_PATH, Some(HeaderValue::from_static("/")));
    set(RAW_COMPONENT_ROUTE, target.raw_route_header.clone());
    set(COMPONENT_ROUTE, target.component_route_header.clone());
    set(CLIENT_ADDR, peer.client_header.clone());
    for (name, value) in &m.params {
        let name = HeaderName::try_from(format!("spin-path-match-{}", name.to_ascii_lowercase()));
        if let (Ok(n), Some(v)) = (name, header_value(value)) {
            headers.insert(n, v);
        }
    }
}

/// `text` as a header value, if it can be one.
pub(super) fn header_value(text: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(version: hyper::Version, hosts: &[&[u8]]) -> hyper::Request<()> {
        let mut req = hyper::Request::builder()
            .version(version)
            .uri("/v3")
            .body(())
            .expect("request");
        for h in hosts {
            req.headers_mut().append(
                hyper::header::HOST,
                HeaderValue::from_bytes(h).expect("header value"),
            );
        }
        req
    }

    #[test]
    fn requests_without_a_usable_authority_are_refused_or_given_one() {
        let local: SocketAddr = "127.0.0.1:3000".parse().expect("addr");
        let v11 = hyper::Version::HTTP_11;
        for good in [&b"api.example:8080"[..], b"127.0.0.1", b"[::1]:3000", b""] {
            assert_eq!(
                ensure_authority(&mut with_host(v11, &[good]), local),
                Ok(()),
                "{good:?}"
            );
        }
        for bad in [
            &b"\xc3\xbf"[..],
            b"a\"b<script>",
            b"evil.example/../x",
            b"a b",
        ] {
            assert!(
                ensure_authority(&mut with_host(v11, &[bad]), local).is_err(),
                "{bad:?}"
            );
        }
        assert!(ensure_authority(&mut with_host(v11, &[]), local).is_err());
        assert!(ensure_authority(&mut with_host(v11, &[b"a", b"a"]), local).is_err());
        let mut old = with_host(hyper::Version::HTTP_10, &[]);
        assert_eq!(ensure_authority(&mut old, local), Ok(()));
        assert_eq!(
            old.headers().get(hyper::header::HOST).map(|h| h.as_bytes()),
            Some(&b"127.0.0.1:3000"[..])
        );
        let mut absolute = hyper::Request::builder()
            .uri("http://api.example/v3")
            .body(())
            .expect("request");
        assert_eq!(ensure_authority(&mut absolute, local), Ok(()));
    }
}
