//! The cluster URL, API paths and query strings.
//!
//! Every name, namespace and query value that reaches a URL is percent-encoded, and path segments
//! are also checked the way the lethe host checks them: a segment that could change the path's
//! meaning (`/`, `..`, `?`) is a bad request, not something to escape and hope.

use lethe_kube_model::check_segment;
use lethe_kube_model::{KubeError as Error, ListOptions};

/// The environment variable naming the cluster.
pub const URL_ENV: &str = "LETHE_KUBE_URL";

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP (a local proxy such as `kubectl proxy`, or a test server).
    Http,
    /// HTTPS, verified by the host's trust store.
    Https,
}

/// The API server's base URL, split as `wasi:http` wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterUrl {
    /// The scheme.
    pub scheme: Scheme,
    /// `host[:port]`.
    pub authority: String,
    /// A path prefix (for an API server behind a proxy path), without a trailing `/`; usually
    /// empty.
    pub prefix: String,
}

impl ClusterUrl {
    /// Parses `LETHE_KUBE_URL`: `http://` or `https://`, an authority, and an optional path
    /// prefix. The message of an error never repeats the value: a URL with user info could
    /// carry a password.
    pub fn parse(text: &str) -> Result<ClusterUrl, String> {
        let text = text.trim();
        let lower = text.to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("https://") {
            (Scheme::Https, &text["https://".len()..])
        } else if lower.starts_with("http://") {
            (Scheme::Http, &text["http://".len()..])
        } else {
            return Err(format!("{URL_ENV} must start with http:// or https://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(format!("{URL_ENV} has no host"));
        }
        if authority.contains('@') {
            return Err(format!(
                "{URL_ENV} must not carry credentials; the privileged token is LETHE_KUBE_TOKEN"
            ));
        }
        let bad_char =
            |c: char| c.is_whitespace() || c.is_control() || matches!(c, '?' | '#' | '\\');
        if authority.chars().any(bad_char) || path.chars().any(bad_char) {
            return Err(format!(
                "{URL_ENV} must be a plain base URL (no spaces, query or fragment)"
            ));
        }
        Ok(ClusterUrl {
            scheme,
            authority: authority.to_owned(),
            prefix: path.trim_end_matches('/').to_owned(),
        })
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so the value stays one path
/// segment or one query value whatever it contains.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Splits an apiVersion into group (empty for the core group) and version, checking both.
pub fn split_api_version(api_version: &str) -> Result<(&str, &str), Error> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => {
            // `/v1` is not the core group: only a bare version is.
            check_segment("API group", g)?;
            (g, v)
        }
        None => ("", api_version),
    };
    check_segment("API version", version)?;
    Ok((group, version))
}

/// `/api/<version>` for the core group, else `/apis/<group>/<version>`: also the discovery
/// document's path.
pub fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{}", encode(version))
    } else {
        format!("/apis/{}/{}", encode(group), encode(version))
    }
}

/// A query string (with its `?`) from the pairs whose value is present; empty when none is.
pub fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let mut out = String::new();
    for (key, value) in pairs {
        if let Some(value) = value {
            out.push(if out.is_empty() { '?' } else { '&' });
            out.push_str(key);
            out.push('=');
            out.push_str(&encode(value));
        }
    }
    out
}

/// The query of a list call: `labelSelector`, `fieldSelector`, `limit`, `continue`.
pub fn list_query(options: &ListOptions) -> String {
    let limit = options.limit.map(|l| l.to_string());
    query(&[
        ("labelSelector", options.label_selector.as_deref()),
        ("fieldSelector", options.field_selector.as_deref()),
        ("limit", limit.as_deref()),
        ("continue", options.continue_token.as_deref()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls() {
        assert_eq!(
            ClusterUrl::parse("https://10.0.0.1:6443"),
            Ok(ClusterUrl {
                scheme: Scheme::Https,
                authority: "10.0.0.1:6443".into(),
                prefix: String::new()
            })
        );
        assert_eq!(
            ClusterUrl::parse(" HTTP://localhost:8001/k8s/clusters/c1/ "),
            Ok(ClusterUrl {
                scheme: Scheme::Http,
                authority: "localhost:8001".into(),
                prefix: "/k8s/clusters/c1".into()
            })
        );
        assert_eq!(
            ClusterUrl::parse("https://[::1]:6443/").map(|u| (u.authority, u.prefix)),
            Ok(("[::1]:6443".into(), String::new()))
        );
        for bad in [
            "",
            "localhost:6443",
            "ftp://x",
            "https://",
            "https:///api",
            "https://x/a b",
            "https://x?q=1",
            "https://x/#f",
        ] {
            assert!(ClusterUrl::parse(bad).is_err(), "{bad}");
        }
        let secret = ClusterUrl::parse("https://admin:hunter2@x").unwrap_err();
        assert!(!secret.contains("hunter2"));
    }

    #[test]
    fn encoding_keeps_only_unreserved_characters() {
        assert_eq!(encode("web-1.a_b~"), "web-1.a_b~");
        assert_eq!(encode("system:admin"), "system%3Aadmin");
        assert_eq!(
            encode("app=web,tier notin (db)"),
            "app%3Dweb%2Ctier%20notin%20%28db%29"
        );
        assert_eq!(encode("é/&?"), "%C3%A9%2F%26%3F");
    }

    #[test]
    fn segments_are_checked() {
        assert!(check_segment("name", "a.b-c:d").is_ok());
        for bad in [
            "", ".", "..", "a/b", "a?b", "a#b", "a%2F", "a b", "a\\b", "a\nb",
        ] {
            assert!(
                matches!(check_segment("name", bad), Err(Error::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn api_version_paths() {
        let path = |av| split_api_version(av).map(|(g, v)| group_version_path(g, v));
        assert_eq!(path("v1"), Ok("/api/v1".to_owned()));
        assert_eq!(path("batch/v1"), Ok("/apis/batch/v1".to_owned()));
        assert_eq!(
            path("lethe.dev/v1alpha1"),
            Ok("/apis/lethe.dev/v1alpha1".to_owned())
        );
        assert!(path("").is_err());
        assert!(path("a/b/c").is_err());
        assert!(path("/v1").is_err());
        assert!(path("../v1").is_err());
    }

    #[test]
    fn list_queries() {
        let none = ListOptions {
            label_selector: None,
            field_selector: None,
            limit: None,
            continue_token: None,
        };
        assert_eq!(list_query(&none), "");
        let options = ListOptions {
            label_selector: Some("app=web".into()),
            field_selector: None,
            limit: Some(50),
            continue_token: Some("eyJ2Ijo+/=".into()),
        };
        assert_eq!(
            list_query(&options),
            "?labelSelector=app%3Dweb&limit=50&continue=eyJ2Ijo%2B%2F%3D"
        );
    }
}
