//! Writing answers and reading request bodies: status and JSON responses, `Status` errors, and
//! bodies decoded as JSON or YAML within the size limit.

use crate::status::ApiError;
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use serde_json::Value;
use std::convert::Infallible;

/// The body of every response: buffered answers and streamed watches alike.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Returned by the service to make hyper close the connection without answering.
#[derive(Debug)]
pub struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for DropConnection {}

const MAX_BODY: usize = 3 * 1024 * 1024;

/// A body that sends `b` in one piece.
pub(crate) fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

/// A response with status `code` (500 when not a valid status) and `bytes` as its
/// `application/json` body.
pub(crate) fn respond(code: u16, bytes: Bytes) -> Response<Body> {
    let mut r = with_type("application/json", full(bytes));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r
}

/// A 200 response of `body`, whose media type is `content_type`.
pub(crate) fn with_type(content_type: &'static str, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    let value = header::HeaderValue::from_static(content_type);
    r.headers_mut().insert(header::CONTENT_TYPE, value);
    r
}

/// A JSON response of `v` with status `code`.
pub(crate) fn respond_value(code: u16, v: &Value) -> Response<Body> {
    respond(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

/// The `Status` answer of `e`, with its `Retry-After` header when it has one.
pub fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = respond_value(e.code, &e.to_value());
    if let Some(ra) = e.retry_after
        && let Ok(v) = header::HeaderValue::from_str(&ra.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// The request's headers and whole body; a 413 when the body is over 3 MiB, a 400 when it
/// cannot be read.
pub(crate) async fn read_body(req: Request<Incoming>) -> Result<(HeaderMap, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let collected = Limited::new(body, MAX_BODY).collect().await.map_err(|e| {
        if e.is::<http_body_util::LengthLimitError>() {
            ApiError::too_large()
        } else {
            ApiError::bad_request(format!("reading the request body: {e}"))
        }
    })?;
    Ok((parts.headers, collected.to_bytes()))
}

/// The text of header `name`; empty when absent or not visible ASCII.
pub(crate) fn header_text(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The patch type a PATCH's `Content-Type` names; 415 for any other media type.
pub(crate) fn patch_type(headers: &HeaderMap) -> Result<crate::verbs::PatchType, ApiError> {
    crate::verbs::PatchType::from_content_type(header_text(headers, header::CONTENT_TYPE))
        .ok_or_else(ApiError::unsupported_media_type)
}

/// Decodes a request body: JSON, or Kubernetes protobuf for the kinds kubectl's typed
/// clients send; anything else is 415.
pub(crate) fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = header_text(headers, header::CONTENT_TYPE);
    let base = ct.split(';').next().unwrap_or_default().trim();
    if base.is_empty() || base == "application/json" || base.ends_with("+json") {
        return parse_json(body);
    }
    if base == "application/yaml" || base == "application/apply-patch+yaml" {
        return parse_yaml(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        });
    }
    if base == "application/vnd.kubernetes.protobuf" {
        return crate::proto::decode(body).map_err(|e| {
            ApiError::new(
                415,
                "UnsupportedMediaType",
                format!("the body of the request could not be decoded: {e}"),
            )
        });
    }
    Err(ApiError::new(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    ))
}

/// A YAML body as the server's YAML serializer reads it: its first document, as JSON. JSON is
/// YAML too, and is read as JSON.
pub(crate) fn parse_yaml(b: &[u8]) -> Result<Value, String> {
    if let Ok(v) = serde_json::from_slice(b) {
        return Ok(v);
    }
    let Some(document) = serde_norway::Deserializer::from_slice(b).next() else {
        return Ok(Value::Null);
    };
    let v: Value = serde::Deserialize::deserialize(document)
        .map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))?;
    Ok(v)
}

/// `b` parsed as JSON; a 400 with the parser's message, worded as the real server's, when it
/// does not parse.
pub(crate) fn parse_json(b: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(b).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}
