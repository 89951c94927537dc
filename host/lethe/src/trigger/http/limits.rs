//! What a request may carry before any component runs: its headers, counted as sent, and its
//! body, read whole within a time limit. A request over them is answered by the host.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};

use crate::host_error::HostError;

/// Largest request body the host forwards; larger ones get 413 before any component runs.
pub const MAX_REQUEST_BODY: u64 = 8 * 1024 * 1024;

/// How long a client may take to send its request body. The body is read before an instance is
/// taken from the pool, so a slow client holds a connection, never an instance.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Most header lines, and most header bytes, a request may carry; more get 431. The HTTP layer
/// is set to parse well past these, so that a request over them is still read and answered with
/// the CF envelope; only one past the HTTP layer's own limits gets its bare 431.
pub const MAX_HEADERS: usize = 100;
/// Most header bytes a request may carry, counting each line as sent (name, `: `, value, CRLF).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// How many header lines the HTTP layer parses: well past [`MAX_HEADERS`], so that a request
/// over the host's limit is still read and answered in the application's error format.
pub(super) const PARSER_MAX_HEADERS: usize = 4 * MAX_HEADERS;

/// The answer to a request whose headers are over the host's limits, if they are. (A request
/// target is limited only by the HTTP layer, at 64 KiB: CF filters such as `guids=` are long.)
pub(super) fn oversized_headers<B>(req: &hyper::Request<B>) -> Option<HostError> {
    let headers = req.headers();
    // Each line as sent: name, `: `, value, CRLF.
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if headers.len() > MAX_HEADERS || header_bytes > MAX_HEADER_BYTES {
        return Some(HostError::HeadersTooLarge(
            format!(
                "The request headers are too large (at most {MAX_HEADERS} headers and {MAX_HEADER_BYTES} bytes)"
            )
            .into(),
        ));
    }
    None
}

/// The whole request, its body read within `timeout` and [`MAX_REQUEST_BODY`] (which a chunked
/// body, having no `content-length`, can only be held to here), or the answer why not.
pub(super) async fn read_body<B>(
    req: hyper::Request<B>,
    timeout: Duration,
) -> Result<hyper::Request<Full<Bytes>>, HostError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    // Most requests (every GET) have no body: nothing to wait for, so no timer to arm.
    if body.is_end_stream() {
        return Ok(hyper::Request::from_parts(parts, Full::new(Bytes::new())));
    }
    let limited = http_body_util::Limited::new(body, MAX_REQUEST_BODY as usize);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Ok(Ok(collected)) => Ok(hyper::Request::from_parts(
            parts,
            Full::new(collected.to_bytes()),
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(HostError::BodyTooLarge),
        Ok(Err(_)) => Err(HostError::BodyUnreadable),
        Err(_) => Err(HostError::BodyTimeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_error::ErrorFormat;
    use hyper::header::HeaderValue;

    #[test]
    fn headers_over_the_limits_are_refused_with_the_envelope() {
        let head = |headers: &[(String, String)]| {
            let mut req = hyper::Request::builder().uri("/v3");
            for (n, v) in headers {
                req = req.header(n, v);
            }
            req.body(()).expect("request")
        };
        let status = |req: &hyper::Request<()>| oversized_headers(req).map(|r| r.status());

        let lines = |n: usize, len: usize| -> Vec<(String, String)> {
            (0..n)
                .map(|i| (format!("x-{i}"), "v".repeat(len)))
                .collect()
        };
        assert_eq!(status(&head(&lines(MAX_HEADERS, 10))), None);
        assert_eq!(status(&head(&lines(MAX_HEADERS + 1, 10))), Some(431));
        assert_eq!(status(&head(&lines(8, 9000))), Some(431));

        let refused = oversized_headers(&head(&lines(MAX_HEADERS + 1, 1))).expect("refused");
        let refused = ErrorFormat::Cf.render(&refused);
        assert_eq!(
            refused.headers().get(hyper::header::CONTENT_TYPE),
            Some(&HeaderValue::from_static("application/json"))
        );
    }

    #[tokio::test]
    async fn bodies_are_read_whole_or_refused_before_any_instance() {
        let whole = hyper::Request::new(Full::new(Bytes::from_static(b"{}")));
        let read = read_body(whole, BODY_TIMEOUT).await.expect("read");
        let bytes = read.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&bytes[..], b"{}");

        let chunks = vec![Ok::<_, std::io::Error>(hyper::body::Frame::data(
            Bytes::from(vec![b'x'; MAX_REQUEST_BODY as usize + 1]),
        ))];
        let huge = hyper::Request::new(http_body_util::StreamBody::new(futures::stream::iter(
            chunks,
        )));
        let refused = read_body(huge, BODY_TIMEOUT).await.expect_err("too large");
        assert_eq!(refused, HostError::BodyTooLarge);

        let never = futures::stream::pending::<Result<hyper::body::Frame<Bytes>, std::io::Error>>();
        let slow = hyper::Request::new(http_body_util::StreamBody::new(never));
        let refused = read_body(slow, Duration::from_secs(1))
            .await
            .expect_err("timeout");
        assert_eq!(refused, HostError::BodyTimeout);
    }
}
