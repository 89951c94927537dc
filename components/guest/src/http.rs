//! A small, owned HTTP request/response model for handlers.

use std::rc::Rc;

use serde::Serialize;

/// Largest request body a component accepts; larger bodies get 413 before any handler runs.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A request's headers: a list, or a lookup into the host's own. Under `wasi:http` a component
/// asks the host for the headers it reads, one at a time, instead of having every header (the
/// host's `spin-*` ones included) copied into its memory on each request, which cost more than
/// a whole trivial handler.
#[derive(Clone, Default)]
pub struct Headers(HeaderSource);

/// Gives the first value of a header by its case-insensitive name.
type FirstValue = dyn Fn(&str) -> Option<Vec<u8>>;

#[derive(Clone)]
enum HeaderSource {
    /// Names lower-case, values as received.
    List(Vec<(String, Vec<u8>)>),
    Lookup(Rc<FirstValue>),
}

impl Default for HeaderSource {
    fn default() -> Self {
        HeaderSource::List(Vec::new())
    }
}

impl Headers {
    /// Headers answered by `first_value`, which gives the first value of a header by its
    /// case-insensitive name.
    pub fn lookup(first_value: impl Fn(&str) -> Option<Vec<u8>> + 'static) -> Headers {
        Headers(HeaderSource::Lookup(Rc::new(first_value)))
    }

    /// The first value of header `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<Vec<u8>> {
        match &self.0 {
            HeaderSource::List(list) => list
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone()),
            HeaderSource::Lookup(first_value) => first_value(name),
        }
    }
}

impl From<Vec<(String, Vec<u8>)>> for Headers {
    fn from(list: Vec<(String, Vec<u8>)>) -> Headers {
        Headers(HeaderSource::List(list))
    }
}

impl std::fmt::Debug for Headers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            HeaderSource::List(list) => f.debug_list().entries(list).finish(),
            HeaderSource::Lookup(_) => f.write_str("<looked up from the host>"),
        }
    }
}

/// An incoming request, its body fully read.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Upper-case method, e.g. `GET`.
    pub method: String,
    /// The path of the full URL, without the query.
    pub path: String,
    /// The raw query string, without `?` (empty when absent).
    pub query: String,
    /// The headers.
    pub headers: Headers,
    /// The body bytes.
    pub body: Vec<u8>,
    /// The scheme the request came with (`http`, `https`), when the host says (`wasi:http`'s
    /// `incoming-request.scheme`).
    pub scheme: Option<String>,
    /// The authority (host and port) the request came to, when the host says
    /// (`wasi:http`'s `incoming-request.authority`).
    pub authority: Option<String>,
}

impl Request {
    /// The scheme and authority this request came to, as `scheme://host[:port]`, for links
    /// back to this server: Spin's `spin-full-url` when present, else what `wasi:http` says of
    /// the request itself, else the `Host` header over `http`. `None` when none of them is there
    /// or what they say is not a plain scheme and authority (so no header can inject a link).
    pub fn origin(&self) -> Option<String> {
        let (scheme, authority) = self
            .header("spin-full-url")
            .and_then(|full| {
                let (scheme, rest) = full.split_once("://")?;
                Some((scheme.to_string(), rest.split('/').next()?.to_string()))
            })
            .or_else(|| Some((self.scheme.clone()?, self.authority.clone()?)))
            .or_else(|| Some(("http".to_string(), self.header("host")?)))?;
        let plain = !authority.is_empty()
            && authority.bytes().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, b'.' | b':' | b'-' | b'[' | b']')
            });
        (matches!(scheme.as_str(), "http" | "https") && plain)
            .then(|| format!("{scheme}://{authority}"))
    }

    /// The base of absolute links back to this server: `configured` (an operator's
    /// `external_url`, without a trailing `/`) when set and not empty, else [`Request::origin`].
    /// `None` when neither says: the caller picks its fallback (`http://localhost`, or relative
    /// links).
    ///
    /// ```
    /// let req = lethe_guest::Request {
    ///     headers: vec![("host".to_string(), b"lethe.example:3000".to_vec())].into(),
    ///     ..Default::default()
    /// };
    /// assert_eq!(req.base_url(None).as_deref(), Some("http://lethe.example:3000"));
    /// assert_eq!(
    ///     req.base_url(Some("https://cf.example/")).as_deref(),
    ///     Some("https://cf.example")
    /// );
    /// ```
    pub fn base_url(&self, configured: Option<&str>) -> Option<String> {
        match configured.map(|url| url.trim_end_matches('/')) {
            Some(url) if !url.is_empty() => Some(url.to_string()),
            _ => self.origin(),
        }
    }

    /// The first value of header `name` (case-insensitive), if it is valid UTF-8.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| String::from_utf8(v).ok())
    }

    /// The part of the path below the route the host matched (Spin's `spin-path-info`), or the
    /// whole path when the host did not say.
    ///
    /// ```
    /// use lethe_guest::Request;
    ///
    /// // A component on the route `/notes/...`, asked for `/notes/items/a`.
    /// let req = Request {
    ///     path: "/notes/items/a".into(),
    ///     headers: vec![("spin-path-info".to_string(), b"/items/a".to_vec())].into(),
    ///     ..Default::default()
    /// };
    /// assert_eq!(req.path_info(), "/items/a");
    /// ```
    pub fn path_info(&self) -> String {
        self.header("spin-path-info")
            .unwrap_or_else(|| self.path.clone())
    }

    /// The value the host bound to route parameter `:name` (Spin's `spin-path-match-<name>`).
    pub fn route_param(&self, name: &str) -> Option<String> {
        self.header(&format!("spin-path-match-{name}"))
    }

    /// The query's `(name, value)` pairs, decoded, in order (empty pairs skipped). A query with
    /// any escape that is malformed or does not decode to UTF-8 is refused whole: reading the
    /// rest would silently drop a filter or a page size the caller asked for.
    pub fn query_pairs(&self) -> Result<Vec<(String, String)>, MalformedQuery> {
        self.query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                match (percent_decode(k), percent_decode(v)) {
                    (Some(k), Some(v)) => Ok((k, v)),
                    _ => Err(MalformedQuery),
                }
            })
            .collect()
    }

    /// The decoded values of query parameter `name`, in order; `Err` as for
    /// [`Request::query_pairs`].
    pub fn query_values(&self, name: &str) -> Result<Vec<String>, MalformedQuery> {
        Ok(self
            .query_pairs()?
            .into_iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .collect())
    }

    /// The bearer token of the `Authorization` header: `Ok(None)` when there is none (the header
    /// is absent, or does not start with `bearer`, which Cloud Controller takes as no token),
    /// an error when it is a bearer credential that is not well formed (including one that is
    /// not UTF-8, which is a bad credential, not a missing one).
    ///
    /// ```
    /// use lethe_guest::Request;
    ///
    /// let with = |value: &str| Request {
    ///     headers: vec![("authorization".to_string(), value.as_bytes().to_vec())].into(),
    ///     ..Default::default()
    /// };
    /// assert_eq!(with("Bearer abc").bearer_token(), Ok(Some("abc".to_string())));
    /// assert_eq!(with("Basic abc").bearer_token(), Ok(None), "not a bearer credential");
    /// assert!(with("Bearer a b").bearer_token().is_err(), "malformed: 401, not anonymous");
    /// assert_eq!(Request::default().bearer_token(), Ok(None));
    /// ```
    pub fn bearer_token(&self) -> Result<Option<String>, MalformedAuthorization> {
        let Some(raw) = self.headers.get("authorization") else {
            return Ok(None);
        };
        let is_bearer = raw
            .iter()
            .skip_while(|b| b.is_ascii_whitespace())
            .take(6)
            .map(u8::to_ascii_lowercase)
            .eq(b"bearer".iter().copied());
        if !is_bearer {
            return Ok(None);
        }
        let value = String::from_utf8(raw).map_err(|_| MalformedAuthorization)?;
        let (scheme, token) = value.trim().split_once(' ').ok_or(MalformedAuthorization)?;
        let token = token.trim();
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
            return Err(MalformedAuthorization);
        }
        Ok(Some(token.to_string()))
    }
}

/// An `Authorization` header that is not `Bearer <token>` (answered 401 `CF-InvalidAuthToken`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedAuthorization;

/// A query string with a malformed or non-UTF-8 `%XX` escape (answered 400
/// `CF-BadQueryParameter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedQuery;

/// Decodes `%XX` escapes and `+` (as space); `None` for malformed escapes or non-UTF-8 results.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A response to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// Headers to send; `content-length` is added when the response is sent.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// An empty response with `status`.
    pub fn empty(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A JSON response with `status`.
    pub fn json<T: Serialize>(status: u16, value: &T) -> Self {
        // Serializing our own plain data types cannot fail; fall back to `null` rather than panic.
        let body = serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec());
        Response {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body,
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// The value of header `name` (any case), if it was set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (for tests).
    pub fn json_body(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: &str) -> Request {
        Request {
            headers: vec![("authorization".into(), value.as_bytes().to_vec())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_origin_comes_from_spin_then_wasi_http_then_the_host_header() {
        let with = |headers: Vec<(&str, &str)>, scheme: Option<&str>, authority: Option<&str>| {
            Request {
                headers: headers
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                    .collect::<Vec<_>>()
                    .into(),
                scheme: scheme.map(str::to_string),
                authority: authority.map(str::to_string),
                ..Default::default()
            }
            .origin()
        };
        let spin = ("spin-full-url", "https://cf.example:8443/v3/jobs/x");
        assert_eq!(
            with(vec![spin, ("host", "other")], Some("http"), Some("h:1")),
            Some("https://cf.example:8443".into())
        );
        // wasmtime serve, jco: the request's own scheme and authority, port included.
        assert_eq!(
            with(
                vec![("host", "other")],
                Some("http"),
                Some("localhost:39100")
            ),
            Some("http://localhost:39100".into())
        );
        assert_eq!(
            with(vec![("host", "[::1]:8080")], None, None),
            Some("http://[::1]:8080".into())
        );
        assert_eq!(with(vec![], None, None), None);
        // Nothing that could inject a link: a path, a user, another scheme.
        assert_eq!(with(vec![("host", "evil/x")], None, None), None);
        assert_eq!(with(vec![("host", "a@b")], None, None), None);
        assert_eq!(with(vec![], Some("javascript"), Some("x")), None);
    }

    #[test]
    fn bearer_token_is_parsed_case_insensitively() {
        assert_eq!(
            with_auth("Bearer abc").bearer_token(),
            Ok(Some("abc".to_string()))
        );
        assert_eq!(
            with_auth("bearer abc").bearer_token(),
            Ok(Some("abc".to_string()))
        );
        assert_eq!(Request::default().bearer_token(), Ok(None));
    }

    #[test]
    fn malformed_authorization_is_an_error() {
        // Another scheme is no bearer token at all.
        assert_eq!(with_auth("Basic abc").bearer_token(), Ok(None));
        assert_eq!(with_auth("garbage").bearer_token(), Ok(None));
        assert_eq!(
            with_auth("Bearer").bearer_token(),
            Err(MalformedAuthorization)
        );
        assert_eq!(
            with_auth("Bearer a b").bearer_token(),
            Err(MalformedAuthorization)
        );
    }

    #[test]
    fn query_values_are_decoded_and_repeated() {
        let r = Request {
            query: "names=a%20b&x=1&&names=c+d&%6Eames=e".into(),
            ..Default::default()
        };
        assert_eq!(
            r.query_values("names"),
            Ok(vec!["a b".to_string(), "c d".into(), "e".into()])
        );
        assert_eq!(r.query_values("missing"), Ok(Vec::new()));
        assert_eq!(
            r.query_pairs().map(|p| p.len()),
            Ok(4),
            "empty pairs are skipped"
        );
    }

    #[test]
    fn malformed_percent_escapes_make_the_whole_query_malformed() {
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
        for query in [
            "names=%zz",
            "names=a%",
            "per_page=%ff",
            "%ff=1",
            "x=1&names=%ed%a0%80",
        ] {
            let r = Request {
                query: query.into(),
                ..Default::default()
            };
            assert_eq!(r.query_pairs(), Err(MalformedQuery), "{query}");
            assert_eq!(r.query_values("names"), Err(MalformedQuery), "{query}");
        }
    }

    #[test]
    fn headers_are_found_by_case_insensitive_name_in_a_list_or_asked_for_one_at_a_time() {
        let list: Headers = vec![("spin-path-info".into(), b"/a".to_vec())].into();
        assert_eq!(list.get("Spin-Path-Info"), Some(b"/a".to_vec()));
        assert_eq!(list.get("host"), None);

        let asked = Rc::new(std::cell::RefCell::new(Vec::<String>::new()));
        let log = asked.clone();
        let req = Request {
            path: "/whole".into(),
            headers: Headers::lookup(move |name| {
                log.borrow_mut().push(name.to_string());
                (name == "host").then(|| b"example.test".to_vec())
            }),
            ..Default::default()
        };
        assert_eq!(req.header("host").as_deref(), Some("example.test"));
        assert_eq!(req.path_info(), "/whole");
        assert_eq!(req.bearer_token(), Ok(None));
        // Only what was read was asked for.
        assert_eq!(*asked.borrow(), ["host", "spin-path-info", "authorization"]);
    }

    #[test]
    fn an_authorization_header_that_is_not_utf8_is_malformed_not_missing() {
        let r = Request {
            headers: vec![("authorization".into(), b"Bearer \xff\xfe".to_vec())].into(),
            ..Default::default()
        };
        assert_eq!(r.bearer_token(), Err(MalformedAuthorization));
    }
}
