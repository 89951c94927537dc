//! A component that misbehaves on purpose, for the host's containment tests.
//!
//! `GET .../ok` answers 200; `.../trap` panics (a trap); `.../spin` loops forever (stopped by the
//! epoch deadline); `.../hog` allocates until the memory limit stops it; `.../flood` answers a
//! body larger than a host buffers before sending the response head, so the body must stream.

use lethe_guest::{Request, Response};

/// What a request asks the component to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Misdeed {
    /// Answer normally.
    Behave,
    /// Trap.
    Trap,
    /// Never return.
    Spin,
    /// Exhaust memory.
    Hog,
    /// Answer [`FLOOD_BYTES`] of body.
    Flood,
}

/// The size of the `flood` body: 4 MiB, more than wasmtime-wasi-http buffers (one 1 MiB chunk).
pub const FLOOD_BYTES: usize = 4 << 20;

/// Picks the misdeed from the last path segment.
pub fn misdeed(req: &Request) -> Option<Misdeed> {
    match req.path_info().trim_end_matches('/').rsplit('/').next()? {
        "ok" => Some(Misdeed::Behave),
        "trap" => Some(Misdeed::Trap),
        "spin" => Some(Misdeed::Spin),
        "hog" => Some(Misdeed::Hog),
        "flood" => Some(Misdeed::Flood),
        _ => None,
    }
}

/// Carries out the misdeed.
pub fn perform(req: &Request) -> Response {
    match misdeed(req) {
        Some(Misdeed::Behave) => Response::json(200, &"ok"),
        // Trapping is this test component's whole job here.
        #[allow(clippy::panic)]
        Some(Misdeed::Trap) => panic!("misbehave: trapping on request"),
        Some(Misdeed::Spin) => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        Some(Misdeed::Hog) => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(std::hint::black_box(vec![1u8; 1 << 20]));
            }
        }
        Some(Misdeed::Flood) => Response {
            status: 200,
            headers: vec![("content-type".into(), "application/octet-stream".into())],
            body: vec![b'x'; FLOOD_BYTES],
        },
        None => lethe_guest::cf::not_found("unknown misdeed"),
    }
}

#[cfg(target_arch = "wasm32")]
mod wasm {
    struct Misbehave;

    impl wasip2::exports::http::incoming_handler::Guest for Misbehave {
        fn handle(
            request: wasip2::http::types::IncomingRequest,
            out: wasip2::http::types::ResponseOutparam,
        ) {
            lethe_guest::wasi_http::serve(request, out, |req| crate::perform(&req));
        }
    }

    wasip2::http::proxy::export!(Misbehave);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str) -> Request {
        Request {
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn misdeed_is_chosen_by_the_last_segment() {
        assert_eq!(misdeed(&at("/misbehave/trap")), Some(Misdeed::Trap));
        assert_eq!(misdeed(&at("/misbehave/spin/")), Some(Misdeed::Spin));
        assert_eq!(misdeed(&at("/misbehave/hog")), Some(Misdeed::Hog));
        assert_eq!(misdeed(&at("/misbehave/ok")), Some(Misdeed::Behave));
        assert_eq!(misdeed(&at("/misbehave/flood")), Some(Misdeed::Flood));
        assert_eq!(misdeed(&at("/misbehave/other")), None);
    }

    #[test]
    fn behaving_answers_200_and_unknown_is_404() {
        assert_eq!(perform(&at("/misbehave/ok")).status, 200);
        assert_eq!(perform(&at("/misbehave/nothing")).status, 404);
    }
}
