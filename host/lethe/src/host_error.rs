//! The answers the host gives itself, where no component answers ([`HostError`]), and how an
//! application has them written ([`ErrorFormat`]). The host's HTTP trigger says only *what* went
//! wrong; the words of a protocol (Cloud Foundry's codes and titles) are the format's, so an
//! application that did not choose `cf` never sees a Cloud Foundry envelope.

use std::borrow::Cow;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::header::HeaderValue;
use serde::Deserialize;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

/// What went wrong, where the host answers itself: a request over the limits or malformed, an
/// unknown route, a caller over its share, a busy pool, a component that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// The request is malformed (a `Host` that is no authority, say): 400, in these words.
    BadRequest(Cow<'static, str>),
    /// No route serves the path: 404.
    UnknownRoute,
    /// The request's headers are over the host's limits: 431, in these words.
    HeadersTooLarge(Cow<'static, str>),
    /// The request body is over the host's limit: 413.
    BodyTooLarge,
    /// The request body could not be read: 400.
    BodyUnreadable,
    /// The request body did not arrive in time: 408.
    BodyTimeout,
    /// The caller is over its share of the routes: 429, to come back after `retry_after`
    /// seconds.
    RateLimited {
        /// `Retry-After`, in seconds.
        retry_after: u32,
    },
    /// No instance was free: 503, to come back in a second. It says nothing against the request.
    Busy,
    /// The component failed (trapped, ran out of time or memory, answered nothing): 500.
    ComponentFailed,
}

impl HostError {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            HostError::BadRequest(_) | HostError::BodyUnreadable => 400,
            HostError::UnknownRoute => 404,
            HostError::BodyTimeout => 408,
            HostError::BodyTooLarge => 413,
            HostError::RateLimited { .. } => 429,
            HostError::HeadersTooLarge(_) => 431,
            HostError::ComponentFailed => 500,
            HostError::Busy => 503,
        }
    }

    /// What went wrong, for the caller.
    pub fn detail(&self) -> &str {
        match self {
            HostError::BadRequest(detail) | HostError::HeadersTooLarge(detail) => detail,
            HostError::UnknownRoute => "Unknown request",
            HostError::BodyTooLarge => "The request body is too large",
            HostError::BodyUnreadable => "The request body could not be read",
            HostError::BodyTimeout => "The request body was not received in time",
            HostError::RateLimited { .. } => "Rate Limit Exceeded",
            HostError::Busy => "The server is busy; try again shortly",
            HostError::ComponentFailed => "An unknown error occurred.",
        }
    }

    /// `Retry-After`, in seconds, when the caller may simply come back.
    pub fn retry_after(&self) -> Option<u32> {
        match self {
            HostError::RateLimited { retry_after } => Some(*retry_after),
            HostError::Busy => Some(1),
            _ => None,
        }
    }

    /// Cloud Foundry V3's code and title for it, as Cloud Controller answers the same cases.
    fn cf_code_and_title(&self) -> (u32, &'static str) {
        match self {
            HostError::BadRequest(_) | HostError::HeadersTooLarge(_) | HostError::BodyTimeout => {
                (10004, "CF-InvalidRequest")
            }
            HostError::UnknownRoute => (10000, "CF-NotFound"),
            HostError::BodyTooLarge => (10001, "CF-RequestEntityTooLarge"),
            HostError::BodyUnreadable => (1001, "CF-MessageParseError"),
            HostError::RateLimited { .. } => (10013, "CF-RateLimitExceeded"),
            HostError::Busy => (10015, "CF-ServiceUnavailable"),
            HostError::ComponentFailed => (10001, "UnknownError"),
        }
    }
}

/// How the host writes its own error answers (`error_format` in `[application.tool.lethe]`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorFormat {
    /// The detail as `text/plain`.
    #[default]
    Plain,
    /// A Cloud Foundry V3 error envelope: `{"errors":[{"code","title","detail"}]}`.
    Cf,
}

impl ErrorFormat {
    /// The response for `error`: a CF V3 envelope for [`ErrorFormat::Cf`], the detail as plain
    /// text for [`ErrorFormat::Plain`]; with `Retry-After` when the caller may come back.
    pub fn render(self, error: &HostError) -> hyper::Response<HyperOutgoingBody> {
        let (content_type, body) = match self {
            ErrorFormat::Cf => {
                let (code, title) = error.cf_code_and_title();
                (
                    "application/json",
                    serde_json::json!({ "errors": [{
                        "code": code, "title": title, "detail": error.detail(),
                    }] })
                    .to_string(),
                )
            }
            ErrorFormat::Plain => ("text/plain; charset=utf-8", format!("{}\n", error.detail())),
        };
        let body = Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut resp = hyper::Response::new(body);
        *resp.status_mut() = hyper::StatusCode::from_u16(error.status())
            .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        let headers = resp.headers_mut();
        headers.insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        );
        if let Some(seconds) = error.retry_after() {
            headers.insert(hyper::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(resp: hyper::Response<HyperOutgoingBody>) -> String {
        let bytes = futures::executor::block_on(resp.into_body().collect())
            .expect("body")
            .to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    #[test]
    fn host_errors_are_written_as_the_application_chose() {
        let plain = ErrorFormat::Plain.render(&HostError::Busy);
        assert_eq!(plain.status(), 503);
        assert_eq!(
            plain.headers().get(hyper::header::CONTENT_TYPE),
            Some(&HeaderValue::from_static("text/plain; charset=utf-8"))
        );
        assert_eq!(
            plain.headers().get(hyper::header::RETRY_AFTER),
            Some(&HeaderValue::from_static("1"))
        );
        assert_eq!(body(plain), "The server is busy; try again shortly\n");

        let cf = ErrorFormat::Cf.render(&HostError::Busy);
        assert_eq!(cf.status(), 503);
        let envelope: serde_json::Value = serde_json::from_str(&body(cf)).expect("json");
        assert_eq!(
            envelope,
            serde_json::json!({"errors": [{
                "code": 10015,
                "title": "CF-ServiceUnavailable",
                "detail": "The server is busy; try again shortly",
            }]})
        );
    }

    #[test]
    fn a_plain_application_never_sees_a_cf_word() {
        let every = [
            HostError::BadRequest("The request has no Host header".into()),
            HostError::UnknownRoute,
            HostError::HeadersTooLarge("too many".into()),
            HostError::BodyTooLarge,
            HostError::BodyUnreadable,
            HostError::BodyTimeout,
            HostError::RateLimited { retry_after: 2 },
            HostError::Busy,
            HostError::ComponentFailed,
        ];
        for error in every {
            let plain = body(ErrorFormat::Plain.render(&error));
            assert!(
                !plain.contains("CF-") && !plain.contains("errors"),
                "{plain}"
            );
            let cf: serde_json::Value =
                serde_json::from_str(&body(ErrorFormat::Cf.render(&error))).expect("json");
            let title = cf["errors"][0]["title"].as_str().unwrap_or_default();
            assert!(
                title.starts_with("CF-") || title == "UnknownError",
                "{error:?}: {title}"
            );
            assert_eq!(cf["errors"][0]["detail"], error.detail());
        }
        let limited = ErrorFormat::Plain.render(&HostError::RateLimited { retry_after: 7 });
        assert_eq!(limited.status(), 429);
        assert_eq!(
            limited.headers().get(hyper::header::RETRY_AFTER),
            Some(&HeaderValue::from_static("7"))
        );
    }
}
