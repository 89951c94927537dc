//! End to end: hostile input against every route of the repository's `spin.toml`, through the
//! real `lethe up` and its embedded cluster.
//!
//! The project's standard: bad input gets the documented 4xx with the CF error envelope, never a
//! panic or a 5xx, and nothing is lost. One `lethe up` serves a deterministic table of requests
//! (wrong methods, malformed GUIDs, traversal, percent junk, bad paging, bad bodies, bad
//! credentials, bad Host headers, oversize bodies, and a user with no role); each answer is
//! checked against the outcomes documented for its case, the host is probed after every request,
//! and the fixtures are checked to be intact at the end. Every failure is collected, so one run
//! lists them all. The one 5xx allowed is a 503 when more clients hold requests open than the
//! host has instances: that is capacity, not input.
//!
//! Requests go over raw TCP ([`support::raw_request`]) so the table says exactly what is on the
//! wire; the setup and the read-backs use the harness's ordinary client.

use crate::support;

use std::time::Instant;

use serde_json::{Value as Json, json};
use support::{Answer, Lethe, raw_request, request};

const NOBODY: &str = "nobody-token-0123456789";

/// Team and job names of the data-jobs fixture.
const TEAM: &str = "bad-input";
const JOB: &str = "victim";

/// Well-formed GUIDs that name nothing.
const ABSENT_GUID: &str = "0badf00d-0000-4000-8000-000000000001";
const ABSENT_UUID: &str = "0badf00d-0000-4000-8000-000000000002";

/// What a case may answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    /// This 2xx status.
    Ok(u16),
    /// This 4xx status with the envelope whose first code is this one.
    Cf(u16, u32),
    /// This 4xx status with the envelope, any code.
    CfAny(u16),
    /// This status from the HTTP layer itself (no component saw the request, so no envelope).
    Protocol(u16),
    /// The connection closed without an answer (a request that never completed).
    Closed,
}

const NOT_FOUND: Want = Want::Cf(404, 10010);
const NO_ROUTE: Want = Want::Cf(404, 10000);
const NO_TOKEN: Want = Want::Cf(401, 10002);
const BAD_TOKEN: Want = Want::Cf(401, 1000);
const FORBIDDEN: Want = Want::Cf(403, 10003);
const PARSE: Want = Want::Cf(400, 1001);
const INVALID: Want = Want::Cf(422, 10008);
const BAD_QUERY: Want = Want::Cf(400, 10005);
const METHOD: Want = Want::Cf(405, 10000);
const TOO_LARGE: Want = Want::CfAny(413);

enum Body {
    None,
    /// Sent with a matching `Content-Length`.
    Bytes(Vec<u8>),
    /// Sent with `Transfer-Encoding: chunked`.
    Chunked(Vec<u8>),
    /// Only `Content-Length: n` is sent; the server must answer without waiting for the body.
    Declared(u64),
    /// Sent as given, after the given headers (which say how long it is).
    Verbatim(Vec<u8>),
}

struct Case {
    label: String,
    method: Vec<u8>,
    target: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
    body: Body,
    half_close: bool,
    /// `HTTP/1.1` unless a case says otherwise.
    version: &'static str,
    /// Send no `Host` header at all.
    no_host: bool,
    want: Vec<Want>,
}

impl Case {
    fn new(method: &str, target: &str) -> Case {
        Case::raw(method.as_bytes(), target.as_bytes())
    }

    fn raw(method: &[u8], target: &[u8]) -> Case {
        Case {
            label: String::new(),
            method: method.to_vec(),
            target: target.to_vec(),
            headers: Vec::new(),
            body: Body::None,
            half_close: false,
            version: "HTTP/1.1",
            no_host: false,
            want: Vec::new(),
        }
    }

    fn label(mut self, label: impl Into<String>) -> Case {
        self.label = label.into();
        self
    }

    fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Case {
        self.headers
            .push((name.to_string(), value.as_ref().to_vec()));
        self
    }

    fn token(self, token: &str) -> Case {
        self.header("Authorization", format!("Bearer {token}"))
    }

    fn json(self, body: impl Into<Vec<u8>>) -> Case {
        self.header("Content-Type", "application/json")
            .body(Body::Bytes(body.into()))
    }

    fn body(mut self, body: Body) -> Case {
        self.body = body;
        self
    }

    fn want(mut self, want: &[Want]) -> Case {
        self.want = want.to_vec();
        self
    }

    fn describe(&self) -> String {
        let target = String::from_utf8_lossy(&self.target);
        let target = if target.len() > 120 {
            format!(
                "{}…({} bytes)",
                &target[..target.floor_char_boundary(120)],
                target.len()
            )
        } else {
            target.into_owned()
        };
        format!(
            "[{}] {} {target}",
            self.label,
            String::from_utf8_lossy(&self.method)
        )
    }

    fn bytes(&self, authority: &str) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.method);
        out.push(b' ');
        out.extend_from_slice(&self.target);
        out.extend_from_slice(format!(" {}\r\n", self.version).as_bytes());
        if !self.no_host
            && !self
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("host"))
        {
            out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
        }
        out.extend_from_slice(b"Connection: close\r\n");
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        match &self.body {
            Body::None => out.extend_from_slice(b"\r\n"),
            Body::Bytes(b) => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
            }
            Body::Chunked(b) => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for chunk in b.chunks(64 * 1024) {
                    out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    out.extend_from_slice(chunk);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
            Body::Declared(n) => {
                out.extend_from_slice(format!("Content-Length: {n}\r\n\r\n").as_bytes());
            }
            Body::Verbatim(b) => {
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(b);
            }
        }
        out
    }
}

/// Why `answer` is not an acceptable answer to `case`, if it is not.
fn judge(case: &Case, answer: Option<&Answer>) -> Option<String> {
    let Some(a) = answer else {
        return (!case.want.contains(&Want::Closed))
            .then(|| format!("no answer; wanted {:?}", case.want));
    };
    let head = case.method == b"HEAD";
    let short = |body: &str| body.chars().take(300).collect::<String>();
    // A 5xx is never an answer to bad input; only a case about capacity may want a 503.
    let wanted_5xx = case
        .want
        .iter()
        .any(|w| matches!(*w, Want::Cf(s, _) if s == a.status));
    if a.status >= 500 && !wanted_5xx {
        return Some(format!("{} {}", a.status, short(&a.body)));
    }
    let fits = |w: &Want| match *w {
        Want::Ok(s) | Want::Protocol(s) => s == a.status,
        Want::Cf(s, code) => {
            s == a.status && (head || envelope_codes(a).is_some_and(|c| c.first() == Some(&code)))
        }
        Want::CfAny(s) => s == a.status && (head || envelope_codes(a).is_some()),
        Want::Closed => false,
    };
    if case.want.iter().any(fits) {
        return None;
    }
    let envelope = if (400..500).contains(&a.status) && !head {
        match envelope_codes(a) {
            Some(codes) => format!(" (envelope codes {codes:?})"),
            None => " (no valid CF envelope)".to_string(),
        }
    } else {
        String::new()
    };
    Some(format!(
        "{}{envelope}: {}; wanted {:?}",
        a.status,
        short(&a.body),
        case.want
    ))
}

/// The codes of a well-formed CF envelope: `errors` a non-empty array of objects with an integer
/// `code` and non-empty string `title` and `detail`.
fn envelope_codes(a: &Answer) -> Option<Vec<u32>> {
    let body: Json = serde_json::from_str(&a.body).ok()?;
    let errors = body.get("errors")?.as_array()?;
    if errors.is_empty() {
        return None;
    }
    errors
        .iter()
        .map(|e| {
            let code = u32::try_from(e.get("code")?.as_u64()?).ok()?;
            let title = e.get("title")?.as_str()?;
            let detail = e.get("detail")?.as_str()?;
            (!title.is_empty() && !detail.is_empty()).then_some(code)
        })
        .collect()
}

/// The fixtures every case runs against.
struct World {
    lethe: Lethe,
    admin: String,
    org: String,
    org_name: String,
    space: String,
    job_uid: String,
    /// The org names before the table: an external cluster (`KUBECONFIG`) may hold others.
    orgs_before: Vec<String>,
}

fn call(lethe: &Lethe, method: &str, path: &str, token: &str, body: Option<&str>) -> Answer {
    let auth = format!("Bearer {token}");
    request(
        method,
        &format!("{}{path}", lethe.url),
        body,
        &[
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ],
    )
}

fn setup() -> World {
    // A short re-read keeps the one case that polls a live org's job from costing two seconds.
    let lethe = Lethe::up_app(
        &[(NOBODY, "nobody", &[])],
        &[("LETHE_VAR_JOB_REREAD_MS", "200")],
    );
    let admin = lethe.admin_token();
    let org_name = format!("bad-input-{}", std::process::id());
    let r = call(
        &lethe,
        "POST",
        "/v3/organizations",
        &admin,
        Some(&json!({ "name": org_name }).to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let org = r.json()["guid"].as_str().expect("guid").to_string();
    let body = json!({
        "name": "s",
        "relationships": { "organization": { "data": { "guid": org } } },
    });
    let r = call(
        &lethe,
        "POST",
        "/v3/spaces",
        &admin,
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let space = r.json()["guid"].as_str().expect("guid").to_string();
    let body = json!({
        "job_name": JOB,
        "config": { "schedule": { "schedule_cron": "*/5 * * * *" } },
    });
    let r = call(
        &lethe,
        "POST",
        &format!("/data-jobs/for-team/{TEAM}/jobs"),
        &admin,
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let job_uid = r.json()["uid"].as_str().expect("uid").to_string();
    let r = call(
        &lethe,
        "POST",
        &format!("/data-jobs/for-team/{TEAM}/jobs/{JOB}/deployments"),
        &admin,
        Some(r#"{"job_version": "v1"}"#),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let orgs_before = org_names(&lethe, &admin);
    World {
        lethe,
        admin,
        org,
        org_name,
        space,
        job_uid,
        orgs_before,
    }
}

fn org_names(lethe: &Lethe, admin: &str) -> Vec<String> {
    let r = call(lethe, "GET", "/v3/organizations?per_page=5000", admin, None);
    r.json()["resources"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|o| o["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A route, an admin request that gets past authentication, and what the admin gets.
struct Guarded {
    method: &'static str,
    path: String,
    body: Option<&'static str>,
    admin: Want,
}

fn guarded(w: &World) -> Vec<Guarded> {
    let g = |method, path: String, body, admin| Guarded {
        method,
        path,
        body,
        admin,
    };
    vec![
        g("GET", "/v3/organizations".into(), None, Want::Ok(200)),
        g("GET", "/v3/spaces".into(), None, Want::Ok(200)),
        g(
            "GET",
            format!("/v3/organizations/{}", w.org),
            None,
            Want::Ok(200),
        ),
        g(
            "GET",
            format!("/v3/spaces/{}", w.space),
            None,
            Want::Ok(200),
        ),
        g(
            "DELETE",
            format!("/v3/organizations/{ABSENT_GUID}"),
            None,
            NOT_FOUND,
        ),
        g(
            "DELETE",
            format!("/v3/spaces/{ABSENT_GUID}"),
            None,
            NOT_FOUND,
        ),
        g(
            "POST",
            "/v3/organizations".into(),
            Some(r#"{"name": ""}"#),
            INVALID,
        ),
        g(
            "POST",
            "/v3/spaces".into(),
            Some(r#"{"name": ""}"#),
            INVALID,
        ),
        g(
            "GET",
            format!("/v3/jobs/org.delete~{ABSENT_GUID}"),
            None,
            Want::Ok(200),
        ),
        g(
            "GET",
            format!("/v3/jobs/space.delete~{ABSENT_GUID}"),
            None,
            Want::Ok(200),
        ),
        g(
            "GET",
            format!("/v3/jobs/data_job.delete~{ABSENT_UUID}"),
            None,
            NOT_FOUND,
        ),
        g(
            "GET",
            format!("/v3/jobs/deployment.delete~{ABSENT_UUID}"),
            None,
            NOT_FOUND,
        ),
        g(
            "GET",
            format!("/data-jobs/for-team/{TEAM}/jobs"),
            None,
            Want::Ok(200),
        ),
        g(
            "GET",
            format!("/data-jobs/for-team/{TEAM}/jobs/{JOB}"),
            None,
            Want::Ok(200),
        ),
        g(
            "GET",
            format!("/data-jobs/for-team/{TEAM}/jobs/{JOB}/deployments/production"),
            None,
            Want::Ok(200),
        ),
        g("GET", "/data-jobs/sync/reports".into(), None, Want::Ok(200)),
        g(
            "POST",
            format!("/data-jobs/for-team/{TEAM}/jobs"),
            Some("{}"),
            INVALID,
        ),
        g("POST", "/lethe/reconcile/cf".into(), None, Want::Ok(200)),
        // Authentication comes first: a bad token is 401 whatever else is wrong.
        g(
            "GET",
            "/v3/organizations?per_page=0".into(),
            None,
            BAD_QUERY,
        ),
        g("GET", "/v3/spaces?bogus=%ff".into(), None, BAD_QUERY),
        g("POST", "/v3/organizations".into(), Some("{not json"), PARSE),
        g("POST", "/v3/spaces".into(), Some("[]"), PARSE),
        g(
            "GET",
            "/v3/organizations/NOT_A_GUID".into(),
            None,
            NOT_FOUND,
        ),
        g("DELETE", "/v3/spaces/..".into(), None, NOT_FOUND),
        g(
            "GET",
            "/v3/jobs/org.delete~NOT_A_GUID".into(),
            None,
            NOT_FOUND,
        ),
        g(
            "GET",
            "/v3/jobs/data_job.delete~nope".into(),
            None,
            NOT_FOUND,
        ),
        g(
            "GET",
            "/data-jobs/sync/reports?limit=0".into(),
            None,
            BAD_QUERY,
        ),
        g(
            "POST",
            format!("/data-jobs/for-team/{TEAM}/jobs"),
            Some("{"),
            PARSE,
        ),
    ]
}

/// A label, the `Authorization` value (none: no header), and the answers it may get.
type AuthVariant = (&'static str, Option<Vec<u8>>, Vec<Want>);

fn auth_cases(w: &World, cases: &mut Vec<Case>) {
    let huge = |n: usize| format!("Bearer {}", "x".repeat(n)).into_bytes();
    let variants: Vec<AuthVariant> = vec![
        ("none", None, vec![NO_TOKEN]),
        ("empty", Some(Vec::new()), vec![NO_TOKEN, BAD_TOKEN]),
        ("scheme only", Some(b"Bearer".to_vec()), vec![BAD_TOKEN]),
        (
            "scheme and blanks",
            Some(b"Bearer    ".to_vec()),
            vec![BAD_TOKEN],
        ),
        // Another scheme is no bearer token at all: Cloud Controller answers as to none.
        (
            "basic",
            Some(b"Basic dXNlcjpwYXNzd29yZA==".to_vec()),
            vec![NO_TOKEN],
        ),
        ("garbage", Some(b"garbage".to_vec()), vec![NO_TOKEN]),
        (
            "token scheme",
            Some(format!("Token {}", w.admin).into_bytes()),
            vec![NO_TOKEN],
        ),
        ("two words", Some(b"Bearer a b".to_vec()), vec![BAD_TOKEN]),
        (
            "list of tokens",
            Some(format!("Bearer {},Bearer x", w.admin).into_bytes()),
            vec![BAD_TOKEN],
        ),
        (
            "unknown token",
            Some(b"Bearer not-a-real-token".to_vec()),
            vec![BAD_TOKEN],
        ),
        ("16 KiB token", Some(huge(16 * 1024)), vec![BAD_TOKEN]),
        (
            "64 KiB token",
            Some(huge(64 * 1024)),
            vec![BAD_TOKEN, Want::Protocol(431)],
        ),
        (
            "non-UTF-8 token",
            Some(b"Bearer \xff\xfe\x80".to_vec()),
            vec![BAD_TOKEN],
        ),
        (
            "non-ASCII token",
            Some("Bearer jéton-☃".as_bytes().to_vec()),
            vec![BAD_TOKEN],
        ),
        (
            "quoted token",
            Some(b"Bearer \"a\\\"b\"".to_vec()),
            vec![BAD_TOKEN],
        ),
        (
            "control character",
            Some(b"Bearer a\x01b".to_vec()),
            vec![Want::Protocol(400), BAD_TOKEN],
        ),
    ];
    for route in guarded(w) {
        for (label, value, want) in &variants {
            let mut c = Case::new(route.method, &route.path).label(format!("auth: {label}"));
            if let Some(v) = value {
                c = c.header("Authorization", v);
            }
            if let Some(b) = route.body {
                c = c.json(b);
            }
            cases.push(c.want(want));
        }
        // The scheme is case-insensitive (RFC 9110 §11.1); extra blanks are tolerated.
        for (label, value) in [
            ("upper-case scheme", format!("BEARER {}", w.admin)),
            ("lower-case scheme", format!("bearer {}", w.admin)),
            ("blanks around", format!("Bearer   {}  ", w.admin)),
        ] {
            let mut c = Case::new(route.method, &route.path)
                .label(format!("auth: {label}"))
                .header("Authorization", value);
            if let Some(b) = route.body {
                c = c.json(b);
            }
            cases.push(c.want(&[route.admin]));
        }
        // A second Authorization header is ambiguous: either the first one counts or it is refused.
        let mut c = Case::new(route.method, &route.path)
            .label("auth: two headers")
            .token(&w.admin)
            .header("Authorization", "Bearer not-a-real-token");
        if let Some(b) = route.body {
            c = c.json(b);
        }
        cases.push(c.want(&[route.admin, BAD_TOKEN]));
    }
}

fn method_cases(w: &World, cases: &mut Vec<Case>) {
    let team = format!("/data-jobs/for-team/{TEAM}/jobs");
    let job = format!("{team}/{JOB}");
    // Cloud Controller's router has no "method not allowed": a method no route takes is an
    // unknown request, 404 `CF-NotFound`. lethe's own APIs answer 405.
    let routes: Vec<(String, &[&str], Want)> = vec![
        ("/".into(), &["GET"], NO_ROUTE),
        ("/v3".into(), &["GET"], NO_ROUTE),
        ("/v3/organizations".into(), &["GET", "POST"], NO_ROUTE),
        (
            format!("/v3/organizations/{}", w.org),
            &["GET", "DELETE"],
            NO_ROUTE,
        ),
        ("/v3/spaces".into(), &["GET", "POST"], NO_ROUTE),
        (
            format!("/v3/spaces/{}", w.space),
            &["GET", "DELETE"],
            NO_ROUTE,
        ),
        (
            format!("/v3/jobs/org.delete~{ABSENT_GUID}"),
            &["GET"],
            NO_ROUTE,
        ),
        (
            format!("/v3/jobs/data_job.delete~{ABSENT_UUID}"),
            &["GET"],
            NO_ROUTE,
        ),
        (team.clone(), &["GET", "POST"], METHOD),
        (job.clone(), &["GET", "PUT", "DELETE"], METHOD),
        (format!("{job}/deployments"), &["GET", "POST"], METHOD),
        (
            format!("{job}/deployments/production"),
            &["GET", "PATCH", "DELETE"],
            METHOD,
        ),
        ("/data-jobs/sync/reports".into(), &["GET"], METHOD),
        ("/lethe/reconcile/cf".into(), &["POST"], METHOD),
        ("/smoke/notes".into(), &["GET"], METHOD),
        (
            "/smoke/notes/bad-input-note".into(),
            &["GET", "PUT"],
            METHOD,
        ),
        ("/smoke/ticks".into(), &["GET"], METHOD),
        ("/smoke/greeting".into(), &["GET"], METHOD),
    ];
    let long_method = "X".repeat(200);
    // Methods are case-sensitive (RFC 9110 §9.1): `delete` is not DELETE, and must not delete.
    let methods = [
        "GET",
        "POST",
        "PUT",
        "PATCH",
        "DELETE",
        "OPTIONS",
        "TRACE",
        "FOO",
        "get",
        "delete",
        "post",
        "M-SEARCH",
        &long_method,
    ];
    for (path, allowed, wrong) in &routes {
        for method in methods {
            if allowed.contains(&method) {
                continue;
            }
            let want: &[Want] = &[*wrong];
            let c = Case::new(method, path)
                .label("method")
                .token(&w.admin)
                .json("{}");
            cases.push(c.want(want));
        }
        cases.push(
            Case::new("HEAD", path)
                .label("method: HEAD")
                .token(&w.admin)
                .want(&[Want::Ok(200), NO_ROUTE, METHOD]),
        );
    }
    // CONNECT takes an authority, not a path; the HTTP layer or the component refuses it.
    cases.push(
        Case::new("CONNECT", "/v3/organizations")
            .label("method: CONNECT")
            .token(&w.admin)
            .want(&[Want::Protocol(400), METHOD, NO_ROUTE]),
    );
}

fn guid_cases(w: &World, cases: &mut Vec<Case>) {
    let long = |n: usize| "a".repeat(n);
    let guids: Vec<String> = vec![
        "UPPER-CASE".into(),
        "6F1C2A4E-1B2C-4D5E-8F90-123456789ABC".into(),
        long(64),
        long(4096),
        long(60_000),
        "-lead".into(),
        "trail-".into(),
        "a_b".into(),
        ".".into(),
        "..".into(),
        "...".into(),
        "%2e".into(),
        "%2e%2e".into(),
        "%2E%2E".into(),
        "..%2f..%2fetc%2fpasswd".into(),
        "%2e%2e%5c%2e%2e%5cwindows".into(),
        "%00".into(),
        "a%00b".into(),
        "%ff%fe%fd".into(),
        "%c0%ae%c0%ae".into(),
        "%ed%a0%80".into(),
        "%".into(),
        "%z".into(),
        "%%41".into(),
        "a%20b".into(),
        "a+b".into(),
        "%27%20OR%201%3D1--".into(),
        "%3Cscript%3Ealert(1)%3C%2Fscript%3E".into(),
        "%F0%9F%92%A5".into(),
        "%E2%80%AE".into(),
        "%EF%BB%BF".into(),
        "%0d%0aSet-Cookie:%20x%3D1".into(),
        "%24%7Bjndi%3Aldap%3A%2F%2Fx%7D".into(),
        "*".into(),
        "~".into(),
        "a;b".into(),
        "a,b".into(),
        "a=b".into(),
        format!("org.delete~{}", w.org),
        format!("{}%00", w.org),
        format!("{}%20", w.org),
        format!("%20{}", w.org),
        w.org.to_uppercase(),
    ];
    for guid in &guids {
        for (method, collection) in [
            ("GET", "organizations"),
            ("DELETE", "organizations"),
            ("GET", "spaces"),
            ("DELETE", "spaces"),
        ] {
            cases.push(
                Case::new(method, &format!("/v3/{collection}/{guid}"))
                    .label("guid")
                    .token(&w.admin)
                    .want(&[NOT_FOUND]),
            );
        }
        for prefix in [
            "org.delete~",
            "space.delete~",
            "data_job.delete~",
            "deployment.delete~",
            "",
        ] {
            cases.push(
                Case::new("GET", &format!("/v3/jobs/{prefix}{guid}"))
                    .label("job guid")
                    .token(&w.admin)
                    .want(&[NOT_FOUND]),
            );
        }
        // Twice a 60 KB name is past the URI limit of the HTTP layer.
        let want = if guid.len() > 30_000 {
            Want::Protocol(414)
        } else {
            NOT_FOUND
        };
        cases.push(
            Case::new("GET", &format!("/data-jobs/for-team/{guid}/jobs/{guid}"))
                .label("data-jobs names")
                .token(&w.admin)
                .want(&[want]),
        );
        cases.push(
            Case::new("GET", &format!("/smoke/notes/{guid}"))
                .label("smoke name")
                .want(&[NOT_FOUND]),
        );
    }
    let job_guids = [
        "org.delete".to_string(),
        "org.delete~".into(),
        "org.purge~x".into(),
        "app.delete~x".into(),
        "Org.delete~x".into(),
        "org.delete~~x".into(),
        "org..delete~x".into(),
        format!("org.delete~{}~{}", w.org, w.org),
        format!("data_job.delete~{}", w.job_uid.to_uppercase()),
        format!("data_job.delete~{}0", w.job_uid),
        format!("deployment.delete~{}%00", w.job_uid),
        format!("deployment.delete~{{{}}}", w.job_uid),
        "deployment.delete~".into(),
        "data_job.delete~00000000-0000-0000-0000-00000000000g".into(),
        "data_job.delete~00000000000000000000000000000000".into(),
    ];
    for guid in &job_guids {
        cases.push(
            Case::new("GET", &format!("/v3/jobs/{guid}"))
                .label("job guid")
                .token(&w.admin)
                .want(&[NOT_FOUND]),
        );
    }
    // A visible org that is not being deleted has no deletion job.
    cases.push(
        Case::new("GET", &format!("/v3/jobs/org.delete~{}", w.org))
            .label("job of a live org")
            .token(&w.admin)
            .want(&[NOT_FOUND]),
    );
    // Raw bytes that are not percent-encoded: refused by the HTTP layer, or a GUID like any other.
    for raw in [
        &b"\xff\xfe"[..],
        b"\xc3\xa9",
        b"\x7f",
        b"a\"b",
        b"a{b}",
        b"a`b",
        b"a|b",
        b"a\\b",
    ] {
        let mut target = b"/v3/organizations/".to_vec();
        target.extend_from_slice(raw);
        cases.push(
            Case::raw(b"GET", &target)
                .label("raw bytes")
                .token(&w.admin)
                .want(&[NOT_FOUND, Want::Protocol(400)]),
        );
    }
}

fn path_cases(w: &World, cases: &mut Vec<Case>) {
    let admin = |path: &str, label: &str, want: &[Want]| {
        Case::new("GET", path)
            .label(label)
            .token(&w.admin)
            .want(want)
    };
    let list = Want::Ok(200);
    for (path, want) in [
        ("/v3/organizations/..", vec![NOT_FOUND]),
        // Paths no route takes are unknown requests, as Cloud Controller's router says.
        ("/v3/organizations/../organizations", vec![NO_ROUTE]),
        ("/v3/organizations/%2e%2e/%2e%2e/v3", vec![NO_ROUTE]),
        ("/v3/organizations/a/b/c", vec![NO_ROUTE]),
        ("/v3/spaces/./", vec![NOT_FOUND]),
        ("/v3/../v3/organizations", vec![NO_ROUTE]),
        ("/v3/%2e%2e/v3/organizations", vec![NO_ROUTE]),
        ("/./v3", vec![NO_ROUTE]),
        ("/%2e/v3", vec![NO_ROUTE]),
        ("/%2e%2e/%2e%2e/etc/passwd", vec![NO_ROUTE]),
        ("/../../etc/passwd", vec![NO_ROUTE]),
        ("/v3%2forganizations", vec![NO_ROUTE]),
        ("/v3\\organizations", vec![NO_ROUTE, Want::Protocol(400)]),
        ("//v3//organizations", vec![list, NOT_FOUND, NO_ROUTE]),
        ("/v3/organizations//", vec![list, NOT_FOUND]),
        ("///", vec![Want::Ok(200), NOT_FOUND, NO_ROUTE]),
        ("/v3/jobs", vec![NO_ROUTE]),
        ("/v3/jobs/", vec![NO_ROUTE]),
        ("/v3/jobs/..", vec![NOT_FOUND]),
        ("/v3/jobs/%2e%2e", vec![NOT_FOUND]),
        ("/v3/jobs/a/b", vec![NO_ROUTE]),
        ("/v3/jobs/../organizations", vec![NO_ROUTE]),
        ("/v3/apps", vec![NO_ROUTE]),
        ("/v2/info", vec![NO_ROUTE]),
        ("/V3", vec![NO_ROUTE]),
        ("/v3/Organizations", vec![NO_ROUTE]),
        ("/v3/organizationsX", vec![NO_ROUTE]),
        ("/data-jobs", vec![NOT_FOUND]),
        ("/data-jobs/", vec![NOT_FOUND]),
        ("/data-jobs/..", vec![NOT_FOUND]),
        ("/data-jobs/../v3/organizations", vec![NOT_FOUND]),
        ("/data-jobs/for-team", vec![NOT_FOUND]),
        ("/data-jobs/for-team//jobs", vec![NOT_FOUND, list]),
        ("/data-jobs/for-team/../jobs", vec![NOT_FOUND]),
        ("/data-jobs/for-team/%2e%2e/jobs", vec![NOT_FOUND]),
        ("/data-jobs/sync", vec![NOT_FOUND]),
        ("/data-jobs/sync/reports/x", vec![NOT_FOUND]),
        ("/lethe", vec![NO_ROUTE]),
        ("/lethe/reconcile", vec![NO_ROUTE]),
        ("/lethe/reconcile/cf/x", vec![NO_ROUTE]),
        ("/lethe/reconcile/cf/..", vec![NO_ROUTE]),
        ("/lethe/reconcile/data-jobs", vec![NO_ROUTE]),
        ("/smoke", vec![NOT_FOUND]),
        ("/smoke/", vec![NOT_FOUND]),
        ("/smoke/..", vec![NOT_FOUND]),
        ("/smoke/../v3", vec![NOT_FOUND]),
        ("/smoke/notes/../../v3", vec![NOT_FOUND]),
        ("/smoke/notes/a/b", vec![NOT_FOUND]),
        ("/smokes", vec![NO_ROUTE]),
        ("/favicon.ico", vec![NO_ROUTE]),
        ("/.env", vec![NO_ROUTE]),
        ("/%00", vec![NO_ROUTE]),
        ("/%ff", vec![NO_ROUTE]),
    ] {
        cases.push(admin(path, "path", &want));
    }
    let deep = "/a".repeat(20_000);
    cases.push(admin(&deep, "40 KB of segments", &[NO_ROUTE]));
    let deep = format!("/smoke{}", "/a".repeat(20_000));
    cases.push(admin(&deep, "40 KB of smoke segments", &[NOT_FOUND]));
    let deep = format!("/v3/organizations{}", "/a".repeat(20_000));
    cases.push(admin(&deep, "40 KB of org segments", &[NO_ROUTE]));
    let deep = format!("/data-jobs/for-team/{TEAM}/jobs{}", "/a".repeat(20_000));
    cases.push(admin(&deep, "40 KB of data-jobs segments", &[NOT_FOUND]));
    // Past what the HTTP layer takes as a URI (64 KiB): refused before any route.
    let huge = format!("/v3/organizations/{}", "a".repeat(100_000));
    cases.push(admin(
        &huge,
        "100 KB path",
        &[
            Want::Protocol(414),
            Want::Protocol(400),
            Want::Protocol(431),
        ],
    ));
    // Absolute-form targets are allowed by HTTP/1.1; the path is what routes.
    cases.push(admin(
        &format!("http://evil.example/v3/organizations/{}", w.org),
        "absolute-form",
        &[Want::Ok(200), Want::Protocol(400)],
    ));
    cases.push(admin(
        "*",
        "asterisk-form",
        &[Want::Protocol(400), NO_ROUTE],
    ));
    // The HTTP layer reads `v3` as an authority-form target, whose path is `/`.
    cases.push(admin(
        "v3",
        "no leading slash",
        &[Want::Protocol(400), NO_ROUTE, Want::Ok(200)],
    ));
}

fn query_cases(w: &World, cases: &mut Vec<Case>) {
    let ok = Want::Ok(200);
    let mut queries: Vec<(String, Vec<Want>)> = Vec::new();
    let mut q = |query: &str, want: &[Want]| queries.push((query.to_string(), want.to_vec()));
    for bad in [
        "0",
        "-1",
        "abc",
        "1.5",
        "5001",
        "99999999999999999999999",
        "",
        "%ff",
        "%zz",
        "1e3",
        "+1",
        "0x10",
        "%EF%BC%91",
        "1%00",
        "%201",
        "1,2",
        "NaN",
        "null",
        "[1]",
    ] {
        q(&format!("per_page={bad}"), &[BAD_QUERY]);
    }
    for bad in ["0", "-1", "abc", "", "%ff", "18446744073709551616"] {
        q(&format!("page={bad}"), &[BAD_QUERY]);
    }
    for good in [
        "per_page=1",
        "per_page=5000",
        "per_page=%31",
        "per_page=01",
        "page=1000000",
        // Cloud Controller bounds no page number, and filters by labels (lethe keeps none).
        "page=1000001",
        "label_selector=a%3Db",
    ] {
        q(good, &[ok]);
    }
    q("per_page=1&page=999999&per_page=5000", &[ok]);
    q("per_page=1&per_page=abc", &[BAD_QUERY]);
    q("per_page=abc&per_page=1", &[ok, BAD_QUERY]);
    q("page=1&page=0", &[BAD_QUERY]);
    q("per_page", &[BAD_QUERY]);
    q("per_page=1&per_page=2", &[ok]);
    q(&"per_page=1&".repeat(3000), &[ok]);
    for unknown in [
        "foo=bar",
        "include=space",
        "fields%5Bx%5D=y",
        "Names=x",
        "names%00=x",
        "%ff=1",
        "=1",
        "names[]=x",
        "%zz=1",
        "page_size=1",
        "per-page=1",
        "names=x&foo",
        "order=name",
    ] {
        q(unknown, &[BAD_QUERY]);
    }
    for bad in [
        "garbage",
        "",
        "name%00",
        "-",
        "--name",
        "guid",
        "created_at,name",
        "%ff",
    ] {
        q(&format!("order_by={bad}"), &[BAD_QUERY]);
    }
    for good in [
        "name",
        "-name",
        "created_at",
        "-created_at",
        "updated_at",
        "-updated_at",
    ] {
        q(&format!("order_by={good}"), &[ok]);
    }
    for bad in [
        "names=%ff",
        "names=%zz",
        "names=a%",
        "guids=%",
        "guids=%c0%af",
        "names=%ed%a0%80",
    ] {
        q(bad, &[BAD_QUERY]);
    }
    for good in [
        "",
        "&&&",
        "names=",
        "names",
        "names=a&names=b",
        "names=%F0%9F%92%A5",
        "names=a,,b,",
        "guids=..,%2e%2e,%00",
        "names=%0d%0a",
        "names=a+b",
    ] {
        q(good, &[ok]);
    }
    q(&"names=a&".repeat(4000), &[ok]);
    q(&format!("names={}", "a".repeat(60_000)), &[ok]);
    q(&format!("guids={}", ",".repeat(30_000)), &[ok]);
    q(&format!("names={}", "%2C".repeat(15_000)), &[ok]);
    for (collection, extra) in [("organizations", BAD_QUERY), ("spaces", ok)] {
        for (query, want) in &queries {
            cases.push(
                Case::new("GET", &format!("/v3/{collection}?{query}"))
                    .label("query")
                    .token(&w.admin)
                    .want(want),
            );
        }
        cases.push(
            Case::new(
                "GET",
                &format!("/v3/{collection}?organization_guids={}", w.org),
            )
            .label("query: organization_guids")
            .token(&w.admin)
            .want(&[extra]),
        );
    }
    // A query past the URI limit is refused before any route.
    cases.push(
        Case::new(
            "GET",
            &format!("/v3/organizations?names={}", "a".repeat(100_000)),
        )
        .label("query: 100 KB")
        .token(&w.admin)
        .want(&[
            Want::Protocol(414),
            Want::Protocol(400),
            Want::Protocol(431),
        ]),
    );
    for (query, want) in [
        ("limit=0", BAD_QUERY),
        ("limit=101", BAD_QUERY),
        ("limit=-1", BAD_QUERY),
        ("limit=abc", BAD_QUERY),
        ("limit=", BAD_QUERY),
        ("limit=%ff", BAD_QUERY),
        ("limit=%zz", BAD_QUERY),
        ("limit=99999999999999999999", BAD_QUERY),
        ("limit=1", ok),
        ("limit=100", ok),
        ("limit=%31", ok),
    ] {
        cases.push(
            Case::new("GET", &format!("/data-jobs/sync/reports?{query}"))
                .label("query")
                .token(&w.admin)
                .want(&[want]),
        );
    }
    // Where no query parameters are documented they are ignored, or refused as Cloud Controller
    // refuses unknown ones.
    for path in [
        "/".to_string(),
        "/v3".into(),
        format!("/v3/organizations/{}", w.org),
        format!("/v3/jobs/org.delete~{ABSENT_GUID}"),
        format!("/data-jobs/for-team/{TEAM}/jobs"),
        "/smoke/notes".into(),
    ] {
        for query in ["foo=bar", "%ff=%ff", "a=1&a=2&a=3", &"x=y&".repeat(3000)] {
            cases.push(
                Case::new("GET", &format!("{path}?{query}"))
                    .label("query: undocumented")
                    .token(&w.admin)
                    .want(&[ok, BAD_QUERY]),
            );
        }
    }
    cases.push(
        Case::new("POST", "/lethe/reconcile/cf?force=%ff")
            .label("query: undocumented")
            .token(&w.admin)
            .want(&[ok, BAD_QUERY]),
    );
}

/// JSON nested `depth` levels deep.
fn nested(depth: usize, open: &str, close: &str, leaf: &str) -> Vec<u8> {
    format!("{}{leaf}{}", open.repeat(depth), close.repeat(depth)).into_bytes()
}

fn body_cases(w: &World, cases: &mut Vec<Case>) {
    let unparseable: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("brace", b"{".to_vec()),
        ("missing value", br#"{"name":}"#.to_vec()),
        ("not JSON", b"not json".to_vec()),
        ("trailing garbage", br#"{"name":"x"} x"#.to_vec()),
        ("two documents", br#"{"name":"x"}{"name":"y"}"#.to_vec()),
        ("single quotes", b"{'name':'x'}".to_vec()),
        ("trailing comma", br#"{"name":"x",}"#.to_vec()),
        ("comment", br#"{"name":"x" /* c */}"#.to_vec()),
        ("invalid UTF-8", b"\xff\xfe{\"name\":\"x\"}".to_vec()),
        (
            "invalid UTF-8 in a string",
            b"{\"name\":\"\xc3\x28\"}".to_vec(),
        ),
        ("BOM", b"\xef\xbb\xbf{\"name\":\"x\"}".to_vec()),
        (
            "UTF-16",
            "{\"name\":\"x\"}"
                .encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect(),
        ),
        ("NUL byte", b"{\"name\":\"x\"}\x00".to_vec()),
        ("raw control character", b"{\"name\":\"a\x01b\"}".to_vec()),
        ("lone surrogate", br#"{"name":"\ud800"}"#.to_vec()),
        ("bad escape", br#"{"name":"\x41"}"#.to_vec()),
        ("number overflow", br#"{"name":1e400}"#.to_vec()),
        ("NaN", br#"{"name":NaN}"#.to_vec()),
        ("10,000 nested arrays", nested(10_000, "[", "]", "")),
        ("10,000 nested objects", nested(10_000, "{\"a\":", "}", "1")),
        ("10,000 nested under name", {
            let mut b = br#"{"name":"#.to_vec();
            b.extend(nested(10_000, "[", "]", ""));
            b.push(b'}');
            b
        }),
        ("form encoded", b"name=x".to_vec()),
        ("XML", b"<name>x</name>".to_vec()),
    ];
    // Just under the 1 MiB a component reads: as many JSON values as fit, to press on its memory.
    let dense = |item: &str, wrap: fn(String) -> String| -> Vec<u8> {
        let n = (1024 * 1024 - 64) / (item.len() + 1);
        wrap(vec![item; n].join(",")).into_bytes()
    };
    let dense_bodies: Vec<(&str, Vec<u8>, Vec<Want>)> = vec![
        (
            "1 MiB of numbers",
            dense("0", |x| format!("[{x}]")),
            vec![PARSE, INVALID],
        ),
        (
            "1 MiB of empty objects",
            dense("{}", |x| format!("[{x}]")),
            vec![PARSE, INVALID],
        ),
        (
            "1 MiB of empty arrays",
            dense("[]", |x| format!("[{x}]")),
            vec![PARSE, INVALID],
        ),
        (
            "1 MiB of numbers beside a name",
            dense("0", |x| format!(r#"{{"name":"","x":[{x}]}}"#)),
            vec![INVALID],
        ),
        (
            "1 MiB of keys",
            {
                let keys: Vec<String> = (0..70_000).map(|i| format!("\"k{i}\":0")).collect();
                format!("{{{}}}", keys.join(",")).into_bytes()
            },
            vec![INVALID],
        ),
        (
            "1 MiB of escapes",
            format!(r#"{{"name":"{}"}}"#, "\\u0000".repeat(170_000)).into_bytes(),
            vec![INVALID],
        ),
    ];
    let wrong_type: Vec<(&str, &[u8])> = vec![
        ("array", b"[]"),
        ("array of objects", br#"[{"name":"x"}]"#),
        ("number", b"1"),
        ("null", b"null"),
        ("string", br#""x""#),
        ("boolean", b"true"),
    ];
    let team = format!("/data-jobs/for-team/{TEAM}/jobs");
    let deployments = format!("{team}/{JOB}/deployments");
    let routes = [
        "/v3/organizations".to_string(),
        "/v3/spaces".into(),
        team.clone(),
        deployments.clone(),
    ];
    for path in &routes {
        for (label, body) in &unparseable {
            // Cloud Controller reads an empty body as an empty object (then its fields are
            // missing); lethe's own API refuses it.
            let want: &[Want] = if body.is_empty() {
                &[PARSE, INVALID]
            } else {
                &[PARSE]
            };
            cases.push(
                Case::new("POST", path)
                    .label(format!("body: {label}"))
                    .token(&w.admin)
                    .json(body.clone())
                    .want(want),
            );
        }
        for (label, body, want) in &dense_bodies {
            // A deployment is set with PATCH semantics and, as in VDK, fields it does not know are
            // ignored: an object of unknown fields changes nothing.
            let mut want = want.clone();
            if *path == deployments && body.first() == Some(&b'{') {
                want.push(Want::Ok(202));
            }
            cases.push(
                Case::new("POST", path)
                    .label(format!("body: {label}"))
                    .token(&w.admin)
                    .json(body.clone())
                    .want(&want),
            );
        }
        for (label, body) in &wrong_type {
            cases.push(
                Case::new("POST", path)
                    .label(format!("body: {label}"))
                    .token(&w.admin)
                    .json(body.to_vec())
                    .want(&[PARSE, INVALID]),
            );
        }
        // Content types other than JSON: the body is what counts.
        for content_type in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=utf-16",
            "application/xml",
            "",
            "\u{1}",
        ] {
            let c = Case::new("POST", path)
                .label(format!("content type {content_type:?}"))
                .token(&w.admin)
                .header("Content-Type", content_type)
                .body(Body::Bytes(b"{".to_vec()));
            let want = if content_type == "\u{1}" {
                vec![PARSE, Want::Protocol(400), Want::CfAny(415)]
            } else {
                vec![PARSE, Want::CfAny(415)]
            };
            cases.push(c.want(&want));
        }
    }
    let huge = "x".repeat(200_000);
    let org_bodies: Vec<Json> = vec![
        json!({}),
        json!({ "name": null }),
        json!({ "name": 1 }),
        json!({ "name": true }),
        json!({ "name": [] }),
        json!({ "name": ["x"] }),
        json!({ "name": {} }),
        json!({ "name": "" }),
        json!({ "name": "x".repeat(256) }),
        json!({ "name": "é".repeat(256) }),
        json!({ "name": huge }),
        json!({ "name": w.org_name }),
        json!({ "name": "bad-input-suspended", "suspended": "yes" }),
        json!({ "name": "bad-input-suspended", "suspended": 1 }),
        // Cloud Controller refuses fields a create does not take, and labels it would not keep.
        json!({ "name": "bad-input-unknown", "bogus": 1 }),
        json!({ "name": "bad-input-unknown", "relationships": {} }),
        json!({ "name": "bad-input-unknown", "guid": ABSENT_GUID }),
        json!({ "name": "bad-input-unknown", "metadata": { "labels": { "a": "b" } } }),
        json!({ "name": "bad-input-unknown", "metadata": { "annotations": { "a": "b" } } }),
        json!({ "name": "bad-input-unknown", "metadata": { "owner": "x" } }),
        json!({ "name": "bad-input-unknown", "metadata": [] }),
    ];
    for body in &org_bodies {
        cases.push(
            Case::new("POST", "/v3/organizations")
                .label("org body")
                .token(&w.admin)
                .json(body.to_string())
                .want(&[INVALID]),
        );
    }
    let in_org = |guid: Json| json!({ "name": "t", "relationships": { "organization": { "data": { "guid": guid } } } });
    let space_bodies: Vec<Json> = vec![
        json!({ "name": "t" }),
        json!({ "name": "t", "relationships": null }),
        json!({ "name": "t", "relationships": [] }),
        json!({ "name": "t", "relationships": { "organization": "x" } }),
        json!({ "name": "t", "relationships": { "organization": { "data": null } } }),
        json!({ "name": "t", "relationships": { "organization": { "data": [] } } }),
        in_org(json!(1)),
        in_org(json!(null)),
        in_org(json!("")),
        in_org(json!("../../etc")),
        in_org(json!("%2e%2e")),
        in_org(json!(ABSENT_GUID)),
        in_org(json!(w.org.to_uppercase())),
        in_org(json!("a".repeat(5000))),
        in_org(json!(huge)),
        in_org(json!(format!("{}\u{0}", w.org))),
        json!({ "name": "s", "relationships": { "organization": { "data": { "guid": w.org } } } }),
        json!({ "name": "", "relationships": { "organization": { "data": { "guid": w.org } } } }),
        json!({ "name": 7, "relationships": { "organization": { "data": { "guid": w.org } } } }),
        json!({ "name": "x".repeat(256), "relationships": { "organization": { "data": { "guid": w.org } } } }),
        json!({ "name": "u", "suspended": false, "relationships": { "organization": { "data": { "guid": w.org } } } }),
        json!({ "name": "u", "metadata": { "labels": { "a": "b" } }, "relationships": { "organization": { "data": { "guid": w.org } } } }),
    ];
    for body in &space_bodies {
        cases.push(
            Case::new("POST", "/v3/spaces")
                .label("space body")
                .token(&w.admin)
                .json(body.to_string())
                .want(&[INVALID]),
        );
    }
    let schedule = |cron: Json| json!({ "job_name": "bad-input-cron", "config": { "schedule": { "schedule_cron": cron } } });
    let job_bodies: Vec<Json> = vec![
        json!({ "job_name": null }),
        json!({ "job_name": 1 }),
        json!({ "job_name": [] }),
        json!({ "job_name": "" }),
        json!({ "job_name": "UPPER" }),
        json!({ "job_name": "1starts-with-digit" }),
        json!({ "job_name": "ends-with-dash-" }),
        json!({ "job_name": "a".repeat(46) }),
        json!({ "job_name": huge }),
        json!({ "job_name": "naïve" }),
        json!({ "job_name": "a\u{0}b" }),
        json!({ "job_name": "a\nb" }),
        json!({ "job_name": "../etc" }),
        json!({ "job_name": "a b" }),
        json!({ "job_name": "x", "team": 5 }),
        json!({ "job_name": "x", "team": "other-team" }),
        json!({ "job_name": "x", "description": 5 }),
        json!({ "job_name": "x", "description": "d".repeat(4001) }),
        json!({ "job_name": "x", "description": huge }),
        json!({ "job_name": "x", "description": "a\u{0}b" }),
        json!({ "job_name": "x", "config": 1 }),
        json!({ "job_name": "x", "config": [] }),
        json!({ "job_name": "x", "config": { "schedule": 1 } }),
        json!({ "job_name": "x", "config": { "schedule": "*/5 * * * *" } }),
        schedule(json!(5)),
        schedule(json!([])),
        schedule(json!("")),
        schedule(json!("* * * *")),
        schedule(json!("* * * * * *")),
        schedule(json!("60 * * * *")),
        schedule(json!("*/0 * * * *")),
        schedule(json!("*/99999999999 * * * *")),
        schedule(json!("5-1 * * * *")),
        schedule(json!("* * * * MON-")),
        // Fields may be separated by any run of whitespace, as the cluster's parser splits them;
        // a zero-width space is not whitespace to it.
        schedule(json!("*\u{200b}* * * *")),
        schedule(json!("@every 5m")),
        schedule(json!("\u{0} * * * *")),
        schedule(json!("١ * * * *")),
        schedule(json!("* ".repeat(50_000))),
        json!({ "job_name": JOB }),
    ];
    for body in &job_bodies {
        let want: &[Want] = if body["job_name"] == JOB {
            &[Want::Cf(409, 10016)]
        } else {
            &[INVALID]
        };
        cases.push(
            Case::new("POST", &team)
                .label("data job body")
                .token(&w.admin)
                .json(body.to_string())
                .want(want),
        );
    }
    for bad_team in [
        "UPPER",
        "-x",
        "x-",
        "a_b",
        "%2e%2e",
        "%ff",
        "%00",
        &"a".repeat(46),
        &"a".repeat(5000),
    ] {
        cases.push(
            Case::new("POST", &format!("/data-jobs/for-team/{bad_team}/jobs"))
                .label("data job team")
                .token(&w.admin)
                .json(json!({ "job_name": "x" }).to_string())
                .want(&[INVALID]),
        );
        cases.push(
            Case::new("GET", &format!("/data-jobs/for-team/{bad_team}/jobs"))
                .label("data job team")
                .token(&w.admin)
                .want(&[NOT_FOUND]),
        );
    }
    let deployment_bodies: Vec<Json> = vec![
        json!({ "job_version": 1 }),
        json!({ "job_version": "" }),
        json!({ "job_version": "v 1" }),
        json!({ "job_version": "v/1" }),
        json!({ "job_version": "v\u{0}" }),
        json!({ "job_version": "é" }),
        json!({ "job_version": "v".repeat(129) }),
        json!({ "job_version": huge }),
        json!({ "job_version": "v2", "image": 1 }),
        json!({ "job_version": "v2", "image": "" }),
        json!({ "job_version": "v2", "image": "UPPER/case" }),
        json!({ "job_version": "v2", "image": "a b" }),
        json!({ "job_version": "v2", "image": "registry:port/x" }),
        json!({ "job_version": "v2", "image": "x:" }),
        json!({ "job_version": "v2", "image": "x@sha256:abc" }),
        json!({ "job_version": "v2", "image": "x@md5:00" }),
        json!({ "job_version": "v2", "image": "/x" }),
        json!({ "job_version": "v2", "image": "x//y" }),
        json!({ "job_version": "v2", "image": "é/x" }),
        json!({ "job_version": "v2", "image": "x:é" }),
        json!({ "job_version": "v2", "image": "x".repeat(256) }),
        json!({ "job_version": "v2", "image": huge }),
        json!({ "job_version": "v2", "enabled": "yes" }),
        json!({ "job_version": "v2", "enabled": 1 }),
        json!({ "job_version": "v2", "schedule": 5 }),
        json!({ "job_version": "v2", "schedule": [] }),
        json!({ "job_version": "v2", "schedule": {} }),
        json!({ "job_version": "v2", "schedule": { "schedule_cron": 5 } }),
        json!({ "job_version": "v2", "schedule": "not a schedule" }),
        json!({ "job_version": "v2", "schedule": "é * * * *" }),
        json!({ "job_version": "v2", "resources": 1 }),
        json!({ "job_version": "v2", "resources": [] }),
        json!({ "job_version": "v2", "resources": { "gpu": "1" } }),
        json!({ "job_version": "v2", "resources": { "cpu_request": 1 } }),
        json!({ "job_version": "v2", "resources": { "cpu_request": "lots" } }),
        json!({ "job_version": "v2", "resources": { "cpu_request": "-1" } }),
        json!({ "job_version": "v2", "resources": { "cpu_request": "1.2.3" } }),
        json!({ "job_version": "v2", "resources": { "memory_limit": "9".repeat(13) } }),
        json!({ "job_version": "v2", "resources": { "memory_limit": "1Pi" } }),
        json!({ "job_version": "v2", "resources": { "memory_limit": "１Gi" } }),
    ];
    for body in &deployment_bodies {
        cases.push(
            Case::new("POST", &deployments)
                .label("deployment body")
                .token(&w.admin)
                .json(body.to_string())
                .want(&[INVALID]),
        );
    }
    // Bodies on GET are not read: they change nothing.
    for (path, want) in [
        ("/v3/organizations".to_string(), Want::Ok(200)),
        (format!("/v3/organizations/{}", w.org), Want::Ok(200)),
        (format!("/v3/jobs/org.delete~{ABSENT_GUID}"), Want::Ok(200)),
        (format!("/v3/jobs/data_job.delete~{ABSENT_UUID}"), NOT_FOUND),
        (team.clone(), Want::Ok(200)),
        ("/smoke/notes".into(), Want::Ok(200)),
        ("/".into(), Want::Ok(200)),
    ] {
        for (label, body) in [
            ("JSON", Body::Bytes(br#"{"name":"x"}"#.to_vec())),
            ("invalid UTF-8", Body::Bytes(b"\xff\xfe\xfd".to_vec())),
            ("2 MiB", Body::Bytes(vec![b'x'; 2 * 1024 * 1024])),
            ("2 MiB chunked", Body::Chunked(vec![b'x'; 2 * 1024 * 1024])),
        ] {
            cases.push(
                Case::new("GET", &path)
                    .label(format!("body on GET: {label}"))
                    .token(&w.admin)
                    .body(body)
                    .want(&[want]),
            );
        }
    }
}

fn size_cases(w: &World, cases: &mut Vec<Case>) {
    let team = format!("/data-jobs/for-team/{TEAM}/jobs");
    let writes = [
        ("POST", "/v3/organizations".to_string()),
        ("POST", "/v3/spaces".into()),
        ("POST", team.clone()),
        ("POST", format!("{team}/{JOB}/deployments")),
        ("POST", "/lethe/reconcile/cf".into()),
        ("PUT", "/smoke/notes/bad-input-note".into()),
        ("GET", "/v3/organizations".into()),
        ("GET", format!("/v3/jobs/org.delete~{ABSENT_GUID}")),
        ("DELETE", format!("/v3/organizations/{ABSENT_GUID}")),
    ];
    const MIB: usize = 1024 * 1024;
    for (method, path) in &writes {
        cases.push(
            Case::new(method, path)
                .label("9 MiB declared")
                .token(&w.admin)
                .body(Body::Declared(9 * MIB as u64))
                .want(&[TOO_LARGE]),
        );
        // The HTTP layer refuses a length it cannot represent before the host sees it.
        cases.push(
            Case::new(method, path)
                .label("length u64::MAX")
                .token(&w.admin)
                .body(Body::Declared(u64::MAX))
                .want(&[TOO_LARGE, Want::Protocol(400), Want::Protocol(431)]),
        );
    }
    for (method, path) in &writes[..6] {
        cases.push(
            Case::new(method, path)
                .label("2 MiB sent")
                .token(&w.admin)
                .body(Body::Bytes(vec![b'{'; 2 * MIB]))
                .want(&[TOO_LARGE]),
        );
        cases.push(
            Case::new(method, path)
                .label("9 MiB chunked")
                .token(&w.admin)
                .body(Body::Chunked(vec![b'{'; 9 * MIB]))
                .want(&[TOO_LARGE, Want::Closed]),
        );
    }
    cases.push(
        Case::new("POST", "/v3/organizations")
            .label("9 MiB sent")
            .token(&w.admin)
            .body(Body::Bytes(vec![b' '; 9 * MIB]))
            .want(&[TOO_LARGE, Want::Closed]),
    );
    cases.push(
        Case::new("PUT", "/smoke/notes/bad-input-note")
            .label("1 MiB + 1 byte")
            .body(Body::Bytes(vec![b'n'; MIB + 1]))
            .want(&[TOO_LARGE]),
    );
    // Lengths the HTTP layer cannot make sense of.
    for (label, headers) in [
        ("length not a number", "Content-Length: abc\r\n"),
        ("negative length", "Content-Length: -1\r\n"),
        (
            "length past u64",
            "Content-Length: 99999999999999999999999\r\n",
        ),
        (
            "two different lengths",
            "Content-Length: 1\r\nContent-Length: 2\r\n",
        ),
        (
            "length and chunked",
            "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
        ),
        ("unknown coding", "Transfer-Encoding: gzip\r\n"),
    ] {
        let mut c = Case::new("POST", "/v3/organizations")
            .label(label)
            .token(&w.admin);
        for line in headers.split("\r\n").filter(|l| !l.is_empty()) {
            let (n, v) = line.split_once(": ").expect("header line");
            c = c.header(n, v);
        }
        cases.push(c.body(Body::Verbatim(b"0\r\n\r\n".to_vec())).want(&[
            Want::Protocol(400),
            PARSE,
            INVALID,
            Want::Closed,
        ]));
    }
    cases.push(
        Case::new("POST", "/v3/organizations")
            .label("bad chunk size")
            .token(&w.admin)
            .header("Transfer-Encoding", "chunked")
            .body(Body::Verbatim(b"zz\r\n{}\r\n0\r\n\r\n".to_vec()))
            .want(&[Want::Protocol(400), PARSE, Want::Closed]),
    );
    // A body cut short: the component's read fails.
    let mut truncated = Case::new("POST", "/v3/organizations")
        .label("truncated body")
        .token(&w.admin)
        .header("Content-Length", "100")
        .body(Body::Verbatim(br#"{"name":"#.to_vec()));
    truncated.half_close = true;
    cases.push(truncated.want(&[PARSE, Want::Closed]));
    cases.push(
        Case::new("POST", "/v3/organizations")
            .label("expect 100-continue")
            .token(&w.admin)
            .header("Expect", "100-continue")
            .json(r#"{"name": ""}"#)
            .want(&[INVALID]),
    );
    cases.push(
        Case::new("POST", "/v3/organizations")
            .label("unknown expectation")
            .token(&w.admin)
            .header("Expect", "the-unexpected")
            .json(r#"{"name": ""}"#)
            .want(&[INVALID, Want::Protocol(417)]),
    );
}

fn header_cases(w: &World, cases: &mut Vec<Case>) {
    let bad_host = Want::Cf(400, 10004);
    let either = [Want::Ok(200), bad_host];
    for (label, host, want) in [
        ("empty", b"".to_vec(), &[Want::Ok(200)][..]),
        (
            "host and port",
            b"api.example:8080".to_vec(),
            &[Want::Ok(200)],
        ),
        ("path in host", b"evil.example/../x".to_vec(), &[bad_host]),
        ("quotes", b"a\"b<script>".to_vec(), &[bad_host]),
        ("blank inside", b"a b".to_vec(), &[bad_host]),
        ("8 KB", "h".repeat(8 * 1024).into_bytes(), &either),
        ("userinfo", b"user:pass@evil.example".to_vec(), &either),
        ("bad port", b"api.example:http".to_vec(), &either),
        ("non-ASCII", "hôte".as_bytes().to_vec(), &[bad_host]),
        ("non-UTF-8", b"\xff\xfe".to_vec(), &[bad_host]),
    ] {
        for path in [
            "/v3",
            "/v3/organizations",
            "/smoke/notes",
            "/data-jobs/sync/reports",
        ] {
            cases.push(
                Case::new("GET", path)
                    .label(format!("Host: {label}"))
                    .token(&w.admin)
                    .header("Host", &host)
                    .want(want),
            );
        }
    }
    // RFC 9112 §3.2: an HTTP/1.1 request needs exactly one Host; HTTP/1.0 may have none.
    for path in ["/v3", "/v3/organizations", "/smoke/notes"] {
        let mut c = Case::new("GET", path).label("no Host").token(&w.admin);
        c.no_host = true;
        cases.push(c.want(&[bad_host]));
        let mut c = Case::new("GET", path)
            .label("HTTP/1.0 without Host")
            .token(&w.admin);
        c.no_host = true;
        c.version = "HTTP/1.0";
        cases.push(c.want(&[Want::Ok(200)]));
        let c = Case::new("GET", path)
            .label("two Host headers")
            .token(&w.admin)
            .header("Host", "a.example")
            .header("Host", "b.example");
        cases.push(c.want(&[bad_host]));
        let mut c = Case::new("GET", path)
            .label("HTTP/2 on HTTP/1")
            .token(&w.admin);
        c.version = "HTTP/2.0";
        cases.push(c.want(&[Want::Protocol(400), Want::Closed]));
        let mut c = Case::new("GET", path).label("HTTP/9.9").token(&w.admin);
        c.version = "HTTP/9.9";
        cases.push(c.want(&[Want::Protocol(400), Want::Closed]));
    }
    // Spin's routing headers come from the host; a client's are dropped.
    cases.push(
        Case::new("GET", "/v3/jobs/not-a-job")
            .label("spoofed spin headers")
            .token(&w.admin)
            .header(
                "spin-path-match-guid",
                format!("data_job.delete~{ABSENT_UUID}"),
            )
            .header("spin-path-info", "/../../etc")
            .header("spin-full-url", "javascript:alert(1)")
            .want(&[NOT_FOUND]),
    );
    cases.push(
        Case::new("GET", &format!("/v3/organizations/{}", w.org))
            .label("spoofed spin headers")
            .token(&w.admin)
            .header("spin-path-info", "/")
            .header("spin-full-url", "http://evil.example/")
            .want(&[Want::Ok(200)]),
    );
    let many: Vec<(String, String)> = (0..90)
        .map(|i| (format!("x-junk-{i}"), "y".repeat(100)))
        .collect();
    let mut c = Case::new("GET", "/v3/organizations")
        .label("90 extra headers")
        .token(&w.admin);
    for (n, v) in &many {
        c = c.header(n, v);
    }
    cases.push(c.want(&[Want::Ok(200)]));
    let too_large = Want::Cf(431, 10004);
    let mut c = Case::new("GET", "/v3/organizations")
        .label("200 extra headers")
        .token(&w.admin);
    for i in 0..200 {
        c = c.header(&format!("x-junk-{i}"), "y");
    }
    cases.push(c.want(&[too_large]));
    // Past what the HTTP layer parses at all, its own bare 431 is the answer.
    let mut c = Case::new("GET", "/v3/organizations")
        .label("1000 extra headers")
        .token(&w.admin);
    for i in 0..1000 {
        c = c.header(&format!("x-junk-{i}"), "y");
    }
    cases.push(c.want(&[too_large, Want::Protocol(431), Want::Closed]));
    cases.push(
        Case::new("GET", "/v3/organizations")
            .label("a 100 KB header")
            .token(&w.admin)
            .header("x-junk", "y".repeat(100 * 1024))
            .want(&[too_large]),
    );
    cases.push(
        Case::new("GET", "/v3/organizations")
            .label("header without colon")
            .token(&w.admin)
            .header("X-Broken\r\nno-colon-here", "")
            .want(&[Want::Protocol(400)]),
    );
}

fn smoke_cases(cases: &mut Vec<Case>) {
    for (name, want) in [
        ("%F0%9F%92%A5", INVALID),
        (&*"a".repeat(64), INVALID),
        ("..", INVALID),
        ("%2e%2e", INVALID),
        ("a%00", INVALID),
        ("a.b", INVALID),
        ("%ff", INVALID),
    ] {
        cases.push(
            Case::new("PUT", &format!("/smoke/notes/{name}"))
                .label("smoke name")
                .body(Body::Bytes(b"hello".to_vec()))
                .want(&[want]),
        );
    }
    for (label, body, want) in [
        ("invalid UTF-8", b"\xff\xfe".to_vec(), PARSE),
        ("truncated UTF-8", b"abc\xe2\x82".to_vec(), PARSE),
        ("surrogate in UTF-8", b"\xed\xa0\x80".to_vec(), PARSE),
        ("NUL", b"a\x00b".to_vec(), INVALID),
        ("empty", Vec::new(), INVALID),
    ] {
        cases.push(
            Case::new("PUT", "/smoke/notes/bad-input-note")
                .label(format!("smoke body: {label}"))
                .body(Body::Bytes(body))
                .want(&[want]),
        );
    }
}

fn nobody_cases(w: &World, cases: &mut Vec<Case>) {
    let org_body = json!({ "name": "nobody-org" }).to_string();
    let space_body = json!({
        "name": "nobody-space",
        "relationships": { "organization": { "data": { "guid": w.org } } },
    })
    .to_string();
    let rows: Vec<(&str, String, Option<String>, Vec<Want>)> = vec![
        ("GET", "/v3/organizations".into(), None, vec![Want::Ok(200)]),
        ("GET", "/v3/spaces".into(), None, vec![Want::Ok(200)]),
        (
            "GET",
            format!("/v3/organizations/{}", w.org),
            None,
            vec![NOT_FOUND],
        ),
        (
            "GET",
            format!("/v3/spaces/{}", w.space),
            None,
            vec![NOT_FOUND],
        ),
        (
            "DELETE",
            format!("/v3/organizations/{}", w.org),
            None,
            vec![NOT_FOUND],
        ),
        (
            "DELETE",
            format!("/v3/spaces/{}", w.space),
            None,
            vec![NOT_FOUND],
        ),
        (
            "POST",
            "/v3/organizations".into(),
            Some(org_body),
            vec![FORBIDDEN],
        ),
        ("POST", "/v3/spaces".into(), Some(space_body), vec![INVALID]),
        // A resource the caller cannot see that is not being deleted: nothing of theirs is left.
        (
            "GET",
            format!("/v3/jobs/org.delete~{}", w.org),
            None,
            vec![Want::Ok(200)],
        ),
        (
            "GET",
            format!("/v3/jobs/data_job.delete~{}", w.job_uid),
            None,
            vec![FORBIDDEN, NOT_FOUND],
        ),
        (
            "GET",
            format!("/data-jobs/for-team/{TEAM}/jobs"),
            None,
            vec![FORBIDDEN],
        ),
        (
            "DELETE",
            format!("/data-jobs/for-team/{TEAM}/jobs/{JOB}"),
            None,
            vec![FORBIDDEN],
        ),
        (
            "POST",
            format!("/data-jobs/for-team/{TEAM}/jobs"),
            Some(json!({ "job_name": "nobody-job" }).to_string()),
            vec![FORBIDDEN],
        ),
        (
            "GET",
            "/data-jobs/sync/reports".into(),
            None,
            vec![FORBIDDEN],
        ),
        ("POST", "/lethe/reconcile/cf".into(), None, vec![FORBIDDEN]),
    ];
    for (method, path, body, want) in rows {
        let mut c = Case::new(method, &path).label("no role").token(NOBODY);
        if let Some(b) = body {
            c = c.json(b);
        }
        cases.push(c.want(&want));
    }
}

/// What must still hold after the table: the host serves, every fixture is intact, and what the
/// hostile requests created reads back exactly as sent.
fn check_nothing_lost(w: &World, failures: &mut Vec<String>) {
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(format!("after the table: {what}"));
        }
    };
    let r = call(
        &w.lethe,
        "GET",
        &format!("/v3/organizations/{}", w.org),
        &w.admin,
        None,
    );
    check(
        r.status == 200 && r.json()["name"] == w.org_name.as_str(),
        format!("the org is intact: {} {}", r.status, r.body),
    );
    let r = call(
        &w.lethe,
        "GET",
        &format!("/v3/spaces/{}", w.space),
        &w.admin,
        None,
    );
    check(
        r.status == 200,
        format!("the space is intact: {} {}", r.status, r.body),
    );
    let r = call(
        &w.lethe,
        "GET",
        &format!("/data-jobs/for-team/{TEAM}/jobs/{JOB}/deployments/production"),
        &w.admin,
        None,
    );
    check(
        r.status == 200 && r.json()["desired"]["job_version"] == "v1",
        format!("the deployment is intact: {} {}", r.status, r.body),
    );
    let names = org_names(&w.lethe, &w.admin);
    check(
        names.iter().all(|n| w.orgs_before.contains(n)),
        format!("no hostile request created an org: {names:?}"),
    );
}

/// Names and texts with control and non-ASCII characters: accepted or refused, and when accepted,
/// read back exactly.
fn round_trips(w: &World, failures: &mut Vec<String>) {
    let texts: Vec<String> = vec![
        "\u{0}nul".into(),
        "tab\tnew\nline\r".into(),
        "\u{202e}gnirts desrever".into(),
        "💥 emoji".into(),
        "zero\u{200b}width".into(),
        "\u{feff}bom".into(),
        "é".repeat(255),
        "\u{7f}\u{1b}[31m".into(),
    ];
    for (i, text) in texts.iter().enumerate() {
        let text = text.as_str();
        let r = call(
            &w.lethe,
            "POST",
            "/v3/organizations",
            &w.admin,
            Some(&json!({ "name": text }).to_string()),
        );
        match r.status {
            201 => {
                let guid = r.json()["guid"].as_str().unwrap_or_default().to_string();
                let got = call(
                    &w.lethe,
                    "GET",
                    &format!("/v3/organizations/{guid}"),
                    &w.admin,
                    None,
                );
                if got.status != 200 || got.json()["name"] != *text {
                    failures.push(format!(
                        "org name {text:?} did not read back: {} {}",
                        got.status, got.body
                    ));
                }
                // Leave no extra orgs behind for the checks that follow.
                let deleted = call(
                    &w.lethe,
                    "DELETE",
                    &format!("/v3/organizations/{guid}"),
                    &w.admin,
                    None,
                );
                if deleted.status != 202 {
                    failures.push(format!(
                        "org {guid} could not be deleted: {}",
                        deleted.status
                    ));
                }
            }
            422 if envelope_codes(&r) == Some(vec![10008]) => {}
            _ => failures.push(format!("org name {text:?}: {} {}", r.status, r.body)),
        }
        let name = format!("round-trip-{i}");
        let body = json!({ "job_name": name, "description": text });
        let r = call(
            &w.lethe,
            "POST",
            &format!("/data-jobs/for-team/{TEAM}/jobs"),
            &w.admin,
            Some(&body.to_string()),
        );
        match r.status {
            201 => {
                let got = call(
                    &w.lethe,
                    "GET",
                    &format!("/data-jobs/for-team/{TEAM}/jobs/{name}"),
                    &w.admin,
                    None,
                );
                if got.status != 200 || got.json()["description"] != *text {
                    failures.push(format!(
                        "description {text:?} did not read back: {} {}",
                        got.status, got.body
                    ));
                }
            }
            422 if envelope_codes(&r) == Some(vec![10008]) => {}
            _ => failures.push(format!("description {text:?}: {} {}", r.status, r.body)),
        }
        let note = format!("round-trip-{i}");
        let r = request(
            "PUT",
            &format!("{}/smoke/notes/{note}", w.lethe.url),
            Some(text),
            &[],
        );
        match r.status {
            200 | 201 => {
                let got = support::get(&format!("{}/smoke/notes/{note}", w.lethe.url));
                if got.status != 200 || got.json()["body"] != *text {
                    failures.push(format!(
                        "note {text:?} did not read back: {} {}",
                        got.status, got.body
                    ));
                }
            }
            400 | 422 if envelope_codes(&r).is_some() => {}
            _ => failures.push(format!("note {text:?}: {} {}", r.status, r.body)),
        }
    }
    // A note of exactly the largest body a component takes is stored whole.
    let big = "n".repeat(1024 * 1024);
    let r = request(
        "PUT",
        &format!("{}/smoke/notes/bad-input-big", w.lethe.url),
        Some(&big),
        &[],
    );
    if r.status != 201 && r.status != 200 {
        failures.push(format!("a 1 MiB note: {} {}", r.status, r.body));
    } else {
        let got = support::get(&format!("{}/smoke/notes/bad-input-big", w.lethe.url));
        if got.json()["body"].as_str().map(str::len) != Some(big.len()) {
            failures.push("a 1 MiB note did not read back whole".into());
        }
    }
}

/// More clients holding requests open mid-body than the host has instances (`max_instances` is
/// 128 in `spin.toml`): whoever comes next is told to retry (503), never given a 500, and the
/// host serves again once they are gone.
fn held_requests(w: &World, failures: &mut Vec<String>) {
    use std::io::Write as _;
    let authority = w.lethe.url.trim_start_matches("http://").to_string();
    let head = format!(
        "POST /v3/organizations HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {}\r\nContent-Length: 100\r\n\r\n{{",
        w.admin
    );
    let held: Vec<std::net::TcpStream> = (0..140)
        .filter_map(|_| {
            let mut s = std::net::TcpStream::connect(&authority).ok()?;
            s.write_all(head.as_bytes()).ok()?;
            Some(s)
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    for path in ["/v3", "/smoke/notes"] {
        // Bodies are read before an instance is taken, so held bodies hold no instance.
        let mut c = Case::new("GET", path).label("while 140 requests are held");
        c.want = vec![Want::Ok(200)];
        let answer = raw_request(&w.lethe.url, c.bytes(&authority), false);
        if let Some(why) = judge(&c, answer.as_ref()) {
            failures.push(format!("{}: {why}", c.describe()));
        }
    }
    drop(held);
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let probe = support::get(&format!("{}/v3", w.lethe.url));
        if probe.status == 200 {
            break;
        }
        if Instant::now() > deadline {
            failures.push(format!(
                "the host did not serve again after the held requests went: {} {}",
                probe.status, probe.body
            ));
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn hostile_requests_get_documented_4xx_envelopes_and_the_host_keeps_serving() {
    let started = Instant::now();
    let w = setup();
    let setup_took = started.elapsed();
    let mut cases = Vec::new();
    auth_cases(&w, &mut cases);
    guid_cases(&w, &mut cases);
    path_cases(&w, &mut cases);
    query_cases(&w, &mut cases);
    body_cases(&w, &mut cases);
    size_cases(&w, &mut cases);
    header_cases(&w, &mut cases);
    smoke_cases(&mut cases);
    // The no-role user's token exists only in the embedded cluster's token file.
    if !support::skip_without_test_users("the no-role cases of the hostile-request table") {
        nobody_cases(&w, &mut cases);
    }
    method_cases(&w, &mut cases);
    let authority = w.lethe.url.trim_start_matches("http://").to_string();
    let probe = Case::new("GET", "/v3").bytes(&authority);
    let mut failures = Vec::new();
    for case in &cases {
        let answer = raw_request(&w.lethe.url, case.bytes(&authority), case.half_close);
        if let Some(why) = judge(case, answer.as_ref()) {
            failures.push(format!("{}: {why}", case.describe()));
        }
        let probe = raw_request(&w.lethe.url, probe.clone(), false);
        if probe.as_ref().map(|p| p.status) != Some(200) {
            failures.push(format!(
                "{}: the host stopped serving ({probe:?})",
                case.describe(),
            ));
            break;
        }
    }
    let table_took = started.elapsed() - setup_took;
    check_nothing_lost(&w, &mut failures);
    round_trips(&w, &mut failures);
    held_requests(&w, &mut failures);
    let log = w.lethe.log();
    for needle in ["panicked", "wasm trap", "trapped"] {
        if let Some(line) = log.lines().find(|l| l.contains(needle)) {
            failures.push(format!("the log shows a failure: {line}"));
        }
    }
    if log.contains(&w.admin) || log.contains("not-a-real-token") {
        failures.push("a token appears in the log".into());
    }
    eprintln!(
        "{} cases; setup {setup_took:?}, table {table_took:?}, total {:?}",
        cases.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
