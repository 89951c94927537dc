//! HTTP handling: authentication, impersonation, authorization, routing and the verbs.

use crate::FaultConfig;
use crate::auth::{Attributes, Tokens, UserInfo, authorize};
use crate::ops::{self, DeleteOpts, Deleted, PatchType, Sub};
use crate::resources::{self, CRD_KEY, ResourceDef, Shape, builtins};
use crate::selector::{FieldSelector, LabelSelector, field_label_supported};
use crate::status::{ApiError, Cause, Warnings, delete_success};
use crate::store::{EventType, Obj, Store};
use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use parking_lot::RwLock;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

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

pub struct Shared {
    pub store: Arc<Store>,
    pub tokens: Tokens,
    pub sa_tokens: Arc<crate::sa_token::Signer>,
    pub admin_token: String,
    pub faults: RwLock<FaultConfig>,
    pub faults_active: AtomicBool,
    pub server_address: String,
    /// The URL clients reach the server at (`https://host:port`).
    pub url: String,
}

impl Shared {
    /// The user a bearer token stands for: a static token, else a service-account JWT.
    pub fn user_for_token(&self, token: &str) -> Option<Arc<UserInfo>> {
        if let Some(user) = self.tokens.lookup(token) {
            return Some(user);
        }
        if !crate::sa_token::looks_like_jwt(token) {
            return None;
        }
        let now = chrono::Utc::now().timestamp();
        self.sa_tokens
            .authenticate(&self.store, token, now)
            .map(Arc::new)
    }

    pub fn set_faults(&self, mut f: FaultConfig) {
        // Only 429, 500 and 503 are meaningful injected errors; anything else becomes 500.
        if !matches!(f.error_status, 429 | 500 | 503) {
            f.error_status = 500;
        }
        f.error_rate = f.error_rate.clamp(0.0, 1.0);
        f.throttle_rate = f.throttle_rate.clamp(0.0, 1.0);
        f.drop_rate = f.drop_rate.clamp(0.0, 1.0);
        let active =
            f.latency_ms > 0 || f.error_rate > 0.0 || f.throttle_rate > 0.0 || f.drop_rate > 0.0;
        self.store
            .stale_ms
            .store(f.stale_read_ms, Ordering::Relaxed);
        *self.faults.write() = f;
        self.faults_active.store(active, Ordering::Relaxed);
    }
}

const MAX_BODY: usize = 3 * 1024 * 1024;

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

fn respond(code: u16, bytes: Bytes) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

fn respond_value(code: u16, v: &Value) -> Response<Body> {
    respond(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

pub fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = respond_value(e.code, &e.to_value());
    if let Some(ra) = e.retry_after
        && let Ok(v) = header::HeaderValue::from_str(&ra.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Parsed query string.
struct Query(Vec<(String, String)>);

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

impl Query {
    fn parse(q: Option<&str>) -> Query {
        Query(
            q.unwrap_or_default()
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1") | Some(""))
    }

    /// The deprecated `/watch/` form of a resource path (still served by v1.32): the path after
    /// `watch`, as the watch it stands for. A named object's watch is a watch of its collection
    /// selected by that name. `None` for a path that is neither.
    fn deprecated_watch<'a>(&mut self, watched: &[&'a str]) -> Option<Vec<&'a str>> {
        let (prefix, parts) = match watched {
            ["namespaces", _, tail @ ..] if !tail.is_empty() => watched.split_at(2),
            _ => watched.split_at(0),
        };
        let mut rest = prefix.to_vec();
        match parts {
            [resource] => rest.push(resource),
            [resource, name] => {
                rest.push(resource);
                let by_name = format!("metadata.name={name}");
                match self.0.iter_mut().find(|(k, _)| k == "fieldSelector") {
                    Some((_, v)) if !v.is_empty() => *v = format!("{by_name},{v}"),
                    Some((_, v)) => *v = by_name,
                    None => self.0.push(("fieldSelector".into(), by_name)),
                }
            }
            _ => return None,
        }
        self.0.retain(|(k, _)| k != "watch");
        self.0.push(("watch".into(), "true".into()));
        Some(rest)
    }

    fn dry_run(&self) -> bool {
        self.0.iter().any(|(k, v)| k == "dryRun" && v == "All")
    }

    fn all(&self, k: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The options of a write sent with `user_agent`, checked as the server's
    /// `Validate{Create,Update,Patch}Options` check them for `options_kind`; `patch` is the patch
    /// type of a PATCH.
    fn write_opts(
        &self,
        user_agent: &str,
        options_kind: &str,
        patch: Option<PatchType>,
    ) -> Result<ops::WriteOpts, ApiError> {
        let field_manager = self.get("fieldManager").map(str::to_string);
        let mut causes = Vec::new();
        match patch {
            Some(PatchType::Apply) if field_manager.as_deref().unwrap_or_default().is_empty() => {
                causes.push(crate::status::Cause {
                    reason: "FieldValueRequired",
                    message: "Required value: is required for apply patch".into(),
                    field: "fieldManager".into(),
                });
            }
            Some(pt) if pt != PatchType::Apply && self.get("force").is_some() => {
                causes.push(crate::status::Cause {
                    reason: "FieldValueForbidden",
                    message: "Forbidden: may not be specified for non-apply patch".into(),
                    field: "force".into(),
                });
            }
            _ => {}
        }
        if let Some(m) = &field_manager {
            causes.extend(crate::managed::field_manager_causes(m));
        }
        causes.extend(dry_run_causes(&self.all("dryRun")));
        if let Some(v) = self.get("fieldValidation")
            && !matches!(v, "" | "Ignore" | "Strict" | "Warn")
        {
            causes.push(crate::status::Cause {
                reason: "FieldValueNotSupported",
                message: format!(
                    "Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                    crate::validation::go_quote(v)
                ),
                field: "fieldValidation".into(),
            });
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", options_kind, "", causes));
        }
        let manager = match field_manager.as_deref() {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => crate::managed::manager_from_user_agent(user_agent),
        };
        Ok(ops::WriteOpts {
            dry_run: self.dry_run(),
            strict: self.get("fieldValidation") == Some("Strict"),
            field_manager,
            force: self.flag("force"),
            manager: Some(manager),
            shape: Default::default(),
        })
    }
}

/// `ValidateDryRun`: `All` is the only dry-run mode.
fn dry_run_causes(values: &[String]) -> Vec<crate::status::Cause> {
    if values.iter().all(|v| v == "All") {
        return vec![];
    }
    let quoted: Vec<String> = values
        .iter()
        .map(|v| crate::validation::go_quote(v))
        .collect();
    vec![crate::status::Cause {
        reason: "FieldValueNotSupported",
        message: format!(
            "Unsupported value: []string{{{}}}: supported values: \"All\"",
            quoted.join(", ")
        ),
        field: "dryRun".into(),
    }]
}

/// The bearer credential of a request, read as kube-apiserver's bearer-token authenticator
/// reads it: `None` when there is none (no `Authorization` header, another scheme, or an empty
/// token), which makes the request anonymous; `Some(Err(()))` for a token that cannot be one (not
/// text), which fails authentication like any unknown token.
fn bearer_credential(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    let raw = headers.get(header::AUTHORIZATION)?.as_bytes();
    let raw = raw.trim_ascii();
    let split = raw.iter().position(|b| *b == b' ')?;
    let (scheme, rest) = raw.split_at(split);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest[1..].split(|b| *b == b' ').next().unwrap_or_default();
    if token.is_empty() {
        return None;
    }
    Some(std::str::from_utf8(token).map_err(|_| ()))
}

/// The bearer token of a request, if it has a usable one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    bearer_credential(headers)?.ok()
}

/// The service entry point.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, DropConnection> {
    let path = req.uri().path().to_string();
    if path == "/lethe" || path.starts_with("/lethe/") {
        return Ok(lethe_endpoint(&shared, req)
            .await
            .unwrap_or_else(|e| error_response(&e)));
    }
    if shared.faults_active.load(Ordering::Relaxed) {
        let f = shared.faults.read().clone();
        let (drop, fail) = {
            use rand::Rng;
            let mut rng = rand::rng();
            // One draw decides between an error, throttling and neither, so the two rates add up.
            let draw = rng.random::<f64>();
            let fail = if draw < f.error_rate {
                Some(f.error_status)
            } else if draw < f.error_rate + f.throttle_rate {
                Some(429)
            } else {
                None
            };
            (f.drop_rate > 0.0 && rng.random::<f64>() < f.drop_rate, fail)
        };
        if f.latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(f.latency_ms)).await;
        }
        if drop {
            return Err(DropConnection);
        }
        if let Some(status) = fail {
            return Ok(error_response(&ApiError::injected(
                status,
                f.retry_after_seconds,
            )));
        }
    }
    let method = req.method().clone();
    // What the request's operations warn of, sent with its answer, whether it succeeded or not.
    let mut warnings = Warnings::default();
    let mut resp = match serve(&shared, req, &mut warnings).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    for w in warnings.iter() {
        let text = format!("299 - {}", json!(w));
        if let Ok(v) = header::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    Ok(resp)
}

async fn read_body(req: Request<Incoming>) -> Result<(HeaderMap, Bytes), ApiError> {
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

/// Decodes a request body: JSON, or Kubernetes protobuf for the kinds kubectl's typed
/// clients send; anything else is 415.
fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
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

/// Why a query parameter is not an integer, as the server's parameter decoding (Go's
/// `strconv.ParseInt`) says it.
fn go_parse_int_error(text: &str) -> String {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let why = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!(
        "strconv.ParseInt: parsing {}: {why}",
        crate::validation::go_quote(text)
    )
}

/// A YAML body as the server's YAML serializer reads it: its first document, as JSON. JSON is
/// YAML too, and is read as JSON.
fn parse_yaml(b: &[u8]) -> Result<Value, String> {
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

fn parse_json(b: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(b).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

async fn lethe_endpoint(
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let Some(token) = bearer(req.headers()) else {
        return Err(ApiError::unauthorized());
    };
    if token != shared.admin_token {
        if shared.user_for_token(token).is_none() {
            return Err(ApiError::unauthorized());
        }
        return Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: only the admin token may use {}",
                req.uri().path()
            ),
        ));
    }
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    match (method, path.as_str()) {
        (Method::GET, "/lethe/faults") => {
            let f = shared.faults.read().clone();
            Ok(respond_value(
                200,
                &serde_json::to_value(f).unwrap_or_default(),
            ))
        }
        (Method::PUT, "/lethe/faults") | (Method::POST, "/lethe/faults") => {
            let (_, body) = read_body(req).await?;
            let f: FaultConfig = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("invalid fault config: {e}")))?;
            let rates = [f.error_rate, f.throttle_rate, f.drop_rate];
            if rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
                return Err(ApiError::bad_request("rates must be between 0 and 1"));
            }
            if f.error_rate > 0.0 && !matches!(f.error_status, 429 | 500 | 503) {
                return Err(ApiError::bad_request(
                    "error_status must be 429, 500 or 503",
                ));
            }
            shared.set_faults(f.clone());
            Ok(respond_value(
                200,
                &serde_json::to_value(f).unwrap_or_default(),
            ))
        }
        (Method::POST, "/lethe/compact") => {
            let rv = shared.store.compact();
            Ok(respond_value(
                200,
                &json!({"compactedResourceVersion": rv.to_string()}),
            ))
        }
        _ => Err(ApiError::path_not_found()),
    }
}

fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect()
}

/// Authenticates the caller and applies impersonation.
fn authenticate(shared: &Shared, headers: &HeaderMap) -> Result<Arc<UserInfo>, ApiError> {
    let user = match bearer_credential(headers) {
        Some(Ok(token)) => shared
            .user_for_token(token)
            .ok_or_else(ApiError::unauthorized)?,
        Some(Err(())) => return Err(ApiError::unauthorized()),
        // A real server's default (`--anonymous-auth=true`): a request without credentials is
        // system:anonymous's, which RBAC then refuses everything but health and version. A
        // token that does not authenticate stays a 401.
        None => Arc::new(UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }),
    };
    let imp_user = header_values(headers, "impersonate-user")
        .into_iter()
        .next();
    let imp_groups = header_values(headers, "impersonate-group");
    let imp_uid = header_values(headers, "impersonate-uid").into_iter().next();
    let mut imp_extras: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(name, value)| {
            let key = name.as_str().strip_prefix("impersonate-extra-")?;
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .into_owned();
            Some((key, value.to_str().ok()?.to_string()))
        })
        .collect();
    imp_extras.sort();
    if imp_user.is_none() && imp_groups.is_empty() && imp_uid.is_none() && imp_extras.is_empty() {
        return Ok(user);
    }
    let Some(target) = imp_user else {
        // The requests as Go prints the object references it made of them.
        let mut requested: Vec<String> = imp_groups
            .iter()
            .map(|g| format!("{{Group  {g}    }}"))
            .collect();
        requested.extend(
            imp_extras
                .iter()
                .map(|(k, v)| format!("{{UserExtra  {v}  authentication.k8s.io/v1  {k}}}")),
        );
        if let Some(uid) = &imp_uid {
            requested.push(format!("{{UID  {uid}  authentication.k8s.io/v1  }}"));
        }
        return Err(ApiError::bad_request(format!(
            "requested [{}] without impersonating a user",
            requested.join(" ")
        )));
    };
    let mut attrs = Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        resource: "users".into(),
        name: target.clone(),
        ..Default::default()
    };
    if let Some(rest) = target.strip_prefix("system:serviceaccount:")
        && let Some((ns, name)) = rest.split_once(':')
    {
        attrs.resource = "serviceaccounts".into();
        attrs.namespace = ns.into();
        attrs.name = name.into();
    }
    if !authorize(&shared.store, &user, &attrs) {
        return Err(ApiError::forbidden(
            "",
            &attrs.resource,
            &attrs.name,
            &attrs.forbidden_reason(&user.name),
        ));
    }
    for g in &imp_groups {
        let ga = Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            resource: "groups".into(),
            name: g.clone(),
            ..Default::default()
        };
        if !authorize(&shared.store, &user, &ga) {
            return Err(ApiError::forbidden(
                "",
                "groups",
                g,
                &ga.forbidden_reason(&user.name),
            ));
        }
    }
    // A uid and extra values are impersonated only with permission for them too.
    let mut other = Vec::new();
    if let Some(uid) = &imp_uid {
        other.push(("uids".to_string(), String::new(), uid.clone()));
    }
    for (key, value) in &imp_extras {
        other.push(("userextras".to_string(), key.clone(), value.clone()));
    }
    for (resource, subresource, name) in other {
        let a = Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            group: "authentication.k8s.io".into(),
            resource,
            subresource,
            name,
            ..Default::default()
        };
        if !authorize(&shared.store, &user, &a) {
            return Err(ApiError::forbidden(
                "authentication.k8s.io",
                &a.resource,
                &a.name,
                &a.forbidden_reason(&user.name),
            ));
        }
    }
    let mut groups = imp_groups;
    if groups.is_empty()
        && let Some(rest) = target.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".into());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if target != "system:anonymous" && !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Ok(Arc::new(UserInfo {
        name: target,
        uid: imp_uid.unwrap_or_default(),
        groups,
    }))
}

fn all_defs(store: &Store) -> Vec<Arc<ResourceDef>> {
    let mut v: Vec<Arc<ResourceDef>> = builtins().to_vec();
    v.extend(store.custom_defs());
    v
}

fn find_def(store: &Store, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
    if let Some(d) = builtins()
        .iter()
        .find(|d| d.group == group && d.version == version && d.plural == plural)
    {
        return Some(d.clone());
    }
    store.read(|inner| {
        inner
            .custom
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    })
}

fn method_verb(m: &Method) -> String {
    m.as_str().to_ascii_lowercase()
}

async fn serve(
    shared: &Shared,
    req: Request<Incoming>,
    warnings: &mut Warnings,
) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_string();
    let user = authenticate(shared, req.headers())?;
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let mut query = Query::parse(req.uri().query());
    // Resource requests.
    let resource_req = match s.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => Some(("", "v1", rest)),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => Some((*g, *v, rest)),
        _ => None,
    };
    if let Some((group, version, rest)) = resource_req {
        if let ["watch", watched @ ..] = rest
            && !watched.is_empty()
            && req.method() == Method::GET
        {
            let Some(rest) = query.deprecated_watch(watched) else {
                return Err(ApiError::path_not_found());
            };
            return resource_request(shared, &user, req, group, version, &rest, &query, warnings)
                .await;
        }
        return resource_request(shared, &user, req, group, version, rest, &query, warnings).await;
    }
    // Non-resource requests.
    let attrs = Attributes {
        verb: method_verb(req.method()),
        resource_request: false,
        path: path.clone(),
        ..Default::default()
    };
    if !authorize(&shared.store, &user, &attrs) {
        return Err(ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!("forbidden: {}", attrs.forbidden_reason(&user.name)),
            details: Some(Box::default()),
            retry_after: None,
            continue_token: None,
        });
    }
    if req.method() != Method::GET {
        return Err(ApiError::path_not_found());
    }
    let store = &shared.store;
    // Aggregated discovery, which kubectl asks for first (it falls back to the legacy form).
    if let ["api"] | ["apis"] = s.as_slice()
        && let Some(version) = aggregated_discovery_version(req.headers())
    {
        let crds = crd_values(store);
        let groups = resources::groups(&store.custom_defs(), &crds);
        let body = resources::aggregated_discovery(
            s.as_slice() == ["api"],
            &all_defs(store),
            &groups,
            &format!("apidiscovery.k8s.io/{version}"),
        );
        let mut r = respond_value(200, &body);
        if let Ok(ct) = header::HeaderValue::from_str(&format!(
            "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
        )) {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        return Ok(r);
    }
    let body = match s.as_slice() {
        [] => {
            json!({"paths": ["/.well-known/openid-configuration", "/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/openid/v1/jwks", "/readyz", "/version"]})
        }
        ["version"] => json!({
            "major": "1", "minor": "32", "gitVersion": "v1.32.0-lethe",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc",
            "platform": "linux/amd64",
        }),
        ["healthz" | "livez" | "readyz", ..] => {
            let mut r = Response::new(full("ok"));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return Ok(r);
        }
        // Service-account issuer discovery, for relying parties that verify the tokens.
        [".well-known", "openid-configuration"] => {
            return Ok(openid_response(json!({
                "issuer": crate::sa_token::ISSUER,
                "jwks_uri": format!("{}/openid/v1/jwks", shared.url),
                "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["ES256"],
            })));
        }
        ["openid", "v1", "jwks"] => {
            return Ok(openid_response(json!({"keys": [shared.sa_tokens.jwk()]})));
        }
        ["api"] => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.server_address}],
        }),
        ["api", "v1"] => resources::resource_list("", "v1", &all_defs(store)),
        ["apis"] => {
            let crds = crd_values(store);
            let groups: Vec<Value> = resources::groups(&store.custom_defs(), &crds)
                .iter()
                .map(resources::group_json)
                .collect();
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        ["apis", g] => {
            let crds = crd_values(store);
            let groups = resources::groups(&store.custom_defs(), &crds);
            let Some(gi) = groups.iter().find(|x| x.name == *g) else {
                return Err(ApiError::path_not_found());
            };
            let mut v = resources::group_json(gi);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        }
        ["apis", g, v] => {
            let defs = all_defs(store);
            if !defs.iter().any(|d| d.group == *g && d.version == *v) {
                return Err(ApiError::path_not_found());
            }
            resources::resource_list(g, v, &defs)
        }
        ["openapi", "v2"] => {
            // An empty Swagger 2.0 document: kubectl's client-side validation (used for `List`
            // files) then skips kinds it has no schema for, as it does on a real cluster for
            // custom resources without one.
            let wants_proto = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|a| a.contains("protobuf"));
            if wants_proto {
                let mut r = Response::new(full(openapi_v2_protobuf()));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static(
                        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                    ),
                );
                return Ok(r);
            }
            json!({
                "swagger": "2.0",
                "info": {"title": "Kubernetes", "version": "v1.32.0"},
                "paths": {},
                "definitions": {},
            })
        }
        ["openapi", "v3"] => resources::openapi_v3_index(&all_defs(store), store.current_rv()),
        ["openapi", "v3", "api", v] => resources::openapi_v3_doc("", v, &all_defs(store))
            .ok_or_else(ApiError::path_not_found)?,
        ["openapi", "v3", "apis", g, v] => resources::openapi_v3_doc(g, v, &all_defs(store))
            .ok_or_else(ApiError::path_not_found)?,
        _ => return Err(ApiError::path_not_found()),
    };
    Ok(respond_value(200, &body))
}

/// An issuer-discovery document, with the caching the real server allows for it.
fn openid_response(body: Value) -> Response<Body> {
    let mut r = respond_value(200, &body);
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("public, max-age=3600"),
    );
    r
}

/// The protobuf (gnostic `openapi_v2.Document`) form of an empty Swagger 2.0 document:
/// `swagger: "2.0"` (field 1) and `info: {title: "Kubernetes", version: "v1.32.0"}` (field 2).
fn openapi_v2_protobuf() -> Bytes {
    fn field(num: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(num << 3) | 2, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }
    let info = [field(1, b"Kubernetes"), field(2, b"v1.32.0")].concat();
    Bytes::from([field(1, b"2.0"), field(2, &info)].concat())
}

/// The aggregated-discovery version (`v2` or `v2beta1`) the client prefers, if it asked for one
/// before any plain `application/json`.
fn aggregated_discovery_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    for media in accept.split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        if !params.contains(&"as=APIGroupDiscoveryList")
            || !params.contains(&"g=apidiscovery.k8s.io")
        {
            if params.first() == Some(&"application/json") || params.first() == Some(&"*/*") {
                return None;
            }
            continue;
        }
        if params.contains(&"v=v2") {
            return Some("v2");
        }
        if params.contains(&"v=v2beta1") {
            return Some("v2beta1");
        }
    }
    None
}

fn crd_values(store: &Store) -> Vec<Value> {
    store.read(|inner| {
        inner
            .entries(CRD_KEY)
            .map(|(_, o)| o.value.clone())
            .collect()
    })
}

/// Alternative representations a client can ask for with `Accept`.
#[derive(Clone)]
enum Printer {
    /// Server-side printing (with the CRD, for custom resources' printer columns), each row
    /// carrying what `includeObject` asked for.
    Table {
        crd: Option<Value>,
        include: crate::table::Include,
    },
    /// `PartialObjectMetadata` (metadata-only clients).
    Metadata,
}

fn partial_metadata(o: &Obj) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.value["metadata"].clone(),
    })
}

impl Printer {
    fn from_accept(
        store: &Store,
        def: &ResourceDef,
        accept: &str,
        query: &Query,
    ) -> Result<Option<Printer>, ApiError> {
        let first = accept.split(',').next().unwrap_or_default();
        if first.contains("as=PartialObjectMetadata") {
            return Ok(Some(Printer::Metadata));
        }
        if !crate::table::wanted(accept) {
            return Ok(None);
        }
        let include = crate::table::Include::parse(query.get("includeObject"))?;
        let crd = if def.custom {
            store
                .get(CRD_KEY, "", &format!("{}.{}", def.plural, def.group), false)
                .map(|o| o.value.clone())
        } else {
            None
        };
        Ok(Some(Printer::Table { crd, include }))
    }

    /// One object.
    fn one(&self, def: &ResourceDef, o: &Arc<Obj>) -> Value {
        match self {
            Printer::Table { crd, include } => crate::table::render(
                def,
                crd.as_ref(),
                o.rv,
                std::slice::from_ref(o),
                None,
                *include,
                &|o| served_value(def, o),
            ),
            Printer::Metadata => partial_metadata(o),
        }
    }

    fn encode(&self, def: &ResourceDef, o: &Arc<Obj>) -> Bytes {
        Bytes::from(serde_json::to_vec(&self.one(def, o)).unwrap_or_default())
    }

    /// A list.
    fn many(&self, def: &ResourceDef, rv: u64, items: &[Arc<Obj>], cont: Option<&str>) -> Value {
        match self {
            Printer::Table { crd, include } => {
                crate::table::render(def, crd.as_ref(), rv, items, cont, *include, &|o| {
                    served_value(def, o)
                })
            }
            Printer::Metadata => {
                let mut meta = json!({"resourceVersion": rv.to_string()});
                if let Some(c) = cont {
                    meta["continue"] = json!(c);
                }
                json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                    "items": items.iter().map(|o| partial_metadata(o)).collect::<Vec<_>>(),
                })
            }
        }
    }
}

/// Where a resource request points.
struct Target {
    def: Arc<ResourceDef>,
    namespace: String,
    name: String,
    sub: String,
}

fn parse_target(
    store: &Store,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, ApiError> {
    let (namespace, parts): (&str, &[&str]) = match rest {
        ["namespaces", ns, tail @ ..]
            if !(tail.is_empty()
                || tail.len() == 1 && matches!(tail[0], "status" | "finalize")) =>
        {
            (ns, tail)
        }
        _ => ("", rest),
    };
    let (resource, name, sub) = match parts {
        [r] => (*r, "", ""),
        [r, n] => (*r, *n, ""),
        [r, n, s] => (*r, *n, *s),
        _ => return Err(ApiError::path_not_found()),
    };
    let def = find_def(store, group, version, resource).ok_or_else(ApiError::path_not_found)?;
    if !namespace.is_empty() && !def.namespaced {
        return Err(ApiError::path_not_found());
    }
    Ok(Target {
        def,
        namespace: namespace.to_string(),
        name: name.to_string(),
        sub: sub.to_string(),
    })
}

/// `GET …/pods/<name>/log`. Nothing runs Pods here, so a Pod never has a node and its log is
/// empty, as the real server streams nothing for a Pod not yet on a node; the container is
/// checked first, as the real server checks it.
fn pod_log(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    let pod = store
        .get(def.key(), ns, name, false)
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
    let names = |list: &str| -> Vec<String> {
        pod.value["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect()
    };
    let containers = names("containers");
    let all: Vec<String> = containers
        .iter()
        .cloned()
        .chain(names("initContainers"))
        .chain(names("ephemeralContainers"))
        .collect();
    match query.get("container").filter(|c| !c.is_empty()) {
        Some(c) if !all.iter().any(|n| n == c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None if containers.len() != 1 => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
        _ => {}
    }
    let mut r = Response::new(full(Bytes::new()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    Ok(r)
}

/// The verb of a resource request, as the real server's request-info parser derives it from
/// the method and whether the path names an object.
fn request_verb(method: &Method, named: bool, query: &Query) -> Option<&'static str> {
    Some(match (method, named) {
        (&Method::GET, false) if query.flag("watch") => "watch",
        (&Method::GET, false) => "list",
        (&Method::GET, true) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, false) => "deletecollection",
        (&Method::DELETE, true) => "delete",
        _ => return None,
    })
}

/// What a resource request the server cannot route asks for, read from its path as the real
/// server's request-info parser reads any resource path: the namespace, then resource, name and
/// subresource.
fn unrouted_attributes(
    method: &Method,
    query: &Query,
    group: &str,
    rest: &[&str],
) -> Option<Attributes> {
    let (mut namespace, parts): (&str, &[&str]) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (ns, tail),
        _ => ("", rest),
    };
    let (resource, name, subresource) = match parts {
        [r] => (*r, "", ""),
        [r, n] => (*r, *n, ""),
        [r, n, s, ..] => (*r, *n, *s),
        [] => return None,
    };
    if namespace.is_empty() && resource == "namespaces" {
        namespace = name;
    }
    let verb = request_verb(method, !name.is_empty(), query)?;
    Some(Attributes {
        verb: verb.into(),
        resource_request: true,
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        namespace: namespace.into(),
        path: String::new(),
    })
}

/// `POST …/serviceaccounts/<name>/token` (`kubectl create token`): a bearer token that
/// authenticates as `system:serviceaccount:<namespace>:<name>` until it expires.
/// The `scale` subresource of a custom resource.
#[allow(clippy::too_many_arguments)]
async fn scale_request(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    verb: &str,
    query: &Query,
    user_agent: &str,
    req: Request<Incoming>,
    warnings: &mut Warnings,
) -> Result<Response<Body>, ApiError> {
    let scale = match verb {
        "get" => crate::scale::get(store, def, ns, name)?,
        "update" => {
            let (headers, body) = read_body(req).await?;
            let body = decode_body(&headers, &body)?;
            let opts = query.write_opts(user_agent, "UpdateOptions", None)?;
            crate::scale::update(store, def, ns, name, &body, opts, warnings)?
        }
        _ => {
            let (headers, body) = read_body(req).await?;
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let pt =
                PatchType::from_content_type(ct).ok_or_else(ApiError::unsupported_media_type)?;
            let body = parse_json(&body)?;
            let opts = query.write_opts(user_agent, "PatchOptions", Some(pt))?;
            crate::scale::patch(store, def, ns, name, pt, &body, opts, warnings)?
        }
    };
    Ok(respond_value(200, &scale))
}

async fn token_request(
    shared: &Shared,
    user: &UserInfo,
    t: &Target,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let attrs = Attributes {
        verb: "create".into(),
        resource_request: true,
        group: String::new(),
        resource: "serviceaccounts".into(),
        subresource: "token".into(),
        name: t.name.clone(),
        namespace: t.namespace.clone(),
        path: String::new(),
    };
    if !authorize(&shared.store, user, &attrs) {
        return Err(ApiError::forbidden(
            "",
            "serviceaccounts",
            &t.name,
            &attrs.forbidden_reason(&user.name),
        ));
    }
    let (headers, body) = read_body(req).await?;
    let request = if body.is_empty() {
        json!({})
    } else {
        decode_body(&headers, &body)?
    };
    let account = shared
        .store
        .get(t.def.key(), &t.namespace, &t.name, false)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", &t.name))?;
    // As the real server: at least ten minutes, an hour unless asked; anything but a whole
    // number is refused by the decoder.
    let asked = &request["spec"]["expirationSeconds"];
    let seconds = match asked.as_i64() {
        Some(s) => s,
        None if asked.is_null() => 3600,
        None => {
            let found = match asked {
                Value::Number(n) => format!("number {n}"),
                other => crate::validation::json_type(other).to_string(),
            };
            return Err(ApiError::bad_request(format!(
                "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot unmarshal {found} into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"
            )));
        }
    };
    let out_of_range = if seconds < 600 {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > 1 << 32 {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(why) = out_of_range {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            &t.name,
            vec![crate::status::Cause {
                reason: "FieldValueInvalid",
                message: format!("Invalid value: {seconds}: {why}"),
                field: "spec.expirationSeconds".into(),
            }],
        ));
    }
    let namespace = &t.namespace;
    let bound_ref = &request["spec"]["boundObjectRef"];
    let bound = if bound_ref.is_object() {
        Some(bound_object(shared, namespace, &t.name, bound_ref)?)
    } else {
        None
    };
    // Without audiences a token is for the API server itself.
    let mut audiences = crate::util::string_list(&request["spec"]["audiences"]);
    if audiences.is_empty() {
        audiences.push(crate::sa_token::ISSUER.to_string());
    }
    let now = chrono::Utc::now();
    let claims = crate::sa_token::claims(
        namespace,
        &t.name,
        account.uid(),
        &audiences,
        bound
            .as_ref()
            .map(|(claim, name, uid)| (*claim, name.as_str(), uid.as_str())),
        now.timestamp(),
        seconds,
    );
    let token = shared
        .sa_tokens
        .sign(&claims)
        .map_err(|e| ApiError::internal(format!("failed to sign the token: {e}")))?;
    let expires = now + chrono::Duration::seconds(seconds);
    let rfc3339 =
        |at: chrono::DateTime<chrono::Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Ok(respond_value(
        201,
        &json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": t.name, "namespace": namespace, "creationTimestamp": rfc3339(now)},
            "spec": {
                "audiences": audiences,
                "expirationSeconds": seconds,
                "boundObjectRef": request["spec"]["boundObjectRef"].clone(),
            },
            "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
        }),
    ))
}

/// Checks a TokenRequest's `boundObjectRef` as the real server does and returns the claim it
/// becomes: `("pod" | "secret", name, uid)`.
fn bound_object(
    shared: &Shared,
    namespace: &str,
    account: &str,
    r: &Value,
) -> Result<(&'static str, String, String), ApiError> {
    let kind = r["kind"].as_str().unwrap_or_default();
    let api_version = r["apiVersion"].as_str().unwrap_or_default();
    let name = r["name"].as_str().unwrap_or_default();
    let (claim, key, plural) = match (api_version, kind) {
        ("v1", "Pod") => ("pod", "/pods", "pods"),
        ("v1", "Secret") => ("secret", "/secrets", "secrets"),
        _ => {
            let gvk = match api_version.split_once('/') {
                Some((g, v)) => format!("{g}/{v}, Kind={kind}"),
                None => format!("/{api_version}, Kind={kind}"),
            };
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {gvk}"
            )));
        }
    };
    let obj = shared
        .store
        .get(key, namespace, name, false)
        .ok_or_else(|| ApiError::not_found("", plural, name))?;
    if claim == "pod" {
        let runs_as = obj.value["spec"]["serviceAccountName"]
            .as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        if runs_as != account {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
            )));
        }
    }
    if let Some(want) = r["uid"].as_str().filter(|u| !u.is_empty())
        && want != obj.uid()
    {
        return Err(ApiError::conflict(
            "",
            kind,
            name,
            &format!(
                "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok((claim, name.to_string(), obj.uid().to_string()))
}

#[allow(clippy::too_many_arguments)]
async fn resource_request(
    shared: &Shared,
    user: &UserInfo,
    req: Request<Incoming>,
    group: &str,
    version: &str,
    rest: &[&str],
    query: &Query,
    warnings: &mut Warnings,
) -> Result<Response<Body>, ApiError> {
    let store = &shared.store;
    let t = match parse_target(store, group, version, rest) {
        Ok(t) => t,
        Err(e) => {
            // Authorization comes before routing on a real server: a resource it does not
            // serve is 404 only to those who may ask for it.
            if let Some(attrs) = unrouted_attributes(req.method(), query, group, rest)
                && !authorize(store, user, &attrs)
            {
                return Err(ApiError::forbidden(
                    &attrs.group,
                    &attrs.resource,
                    &attrs.name,
                    &attrs.forbidden_reason(&user.name),
                ));
            }
            return Err(e);
        }
    };
    let def = t.def.clone();
    let method = req.method().clone();
    if method == Method::POST
        && t.sub == "token"
        && !t.name.is_empty()
        && def.group.is_empty()
        && def.plural == "serviceaccounts"
    {
        return token_request(shared, user, &t, req).await;
    }
    // Creates go to a collection; replaces and patches to an object.
    let named = !t.name.is_empty();
    let verb = match request_verb(&method, named, query) {
        Some("create") if named => None,
        Some("update" | "patch") if !named => None,
        verb => verb,
    }
    .ok_or_else(|| ApiError::method_not_allowed(&def.group, &def.plural))?;
    let sub = match t.sub.as_str() {
        "" => Sub::Main,
        "status" if def.status_subresource && matches!(verb, "get" | "update" | "patch") => {
            Sub::Status
        }
        "finalize" if def.is_namespace() && verb == "update" => Sub::Finalize,
        // A scale write is a write of the main object's replica count (see `scale_request`).
        "scale" if def.scale.is_some() && matches!(verb, "get" | "update" | "patch") => Sub::Main,
        "log" if def.is_pods() && verb == "get" => Sub::Main,
        _ => return Err(ApiError::path_not_found()),
    };
    if !def.allows(verb) {
        return Err(ApiError::method_not_allowed(&def.group, &def.plural));
    }
    let auth_ns = if def.is_namespace() && !t.name.is_empty() {
        t.name.clone()
    } else {
        t.namespace.clone()
    };
    // A list or watch of one object by name is authorized as a request for that name, as the
    // real server's request info reads it from the field selector (`kubectl get x NAME -w`).
    let selected_name = if t.name.is_empty() && matches!(verb, "list" | "watch") {
        query
            .get("fieldSelector")
            .and_then(|s| FieldSelector::parse(s).ok())
            .and_then(|s| s.exact_match("metadata.name").map(str::to_string))
            .filter(|n| !n.is_empty() && n != "." && n != ".." && !n.contains(['/', '%']))
    } else {
        None
    };
    let attrs = Attributes {
        verb: verb.to_string(),
        resource_request: true,
        group: def.group.clone(),
        resource: def.plural.clone(),
        subresource: t.sub.clone(),
        name: selected_name.unwrap_or_else(|| t.name.clone()),
        namespace: auth_ns,
        path: String::new(),
    };
    if !authorize(store, user, &attrs) {
        // As the real server: the subresource shows in the reason, not in the prefix.
        return Err(ApiError::forbidden(
            &def.group,
            &def.plural,
            &attrs.name,
            &attrs.forbidden_reason(&user.name),
        ));
    }
    let ns = t.namespace.as_str();
    let name = t.name.as_str();
    // Writes run under the rules of the kind the objects are stored as; answers and errors
    // speak of the kind asked for.
    let stored = resources::stored_def(&def);
    let served = |e: ApiError| as_served(&def, &stored, e);
    if def.custom
        && let Some(crd) = store.get(CRD_KEY, "", &format!("{}.{}", def.plural, def.group), false)
    {
        if let Some(warning) = resources::crd_deprecation_warning(&crd.value, &def.version) {
            warnings.push(warning);
        }
        // A CRD being deleted takes no new instances while its old ones are removed.
        if verb == "create" && crd.deleting() {
            let mut e = ApiError::method_not_allowed(&def.group, &def.plural);
            e.message = "create not allowed while custom resource definition is terminating".into();
            return Err(e);
        }
    }
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if t.sub == "scale" {
        return scale_request(
            store,
            &def,
            ns,
            name,
            verb,
            query,
            &user_agent,
            req,
            warnings,
        )
        .await;
    }
    if t.sub == "log" {
        return pod_log(store, &def, ns, name, query);
    }
    let printer = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(|accept| Printer::from_accept(store, &def, accept, query))
        .transpose()?
        .flatten();
    match verb {
        "get" => {
            let obj = store
                .get(def.key(), ns, name, true)
                .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            if let Some(p) = &printer {
                return Ok(respond_value(200, &p.one(&def, &obj)));
            }
            Ok(respond(200, obj_bytes(&def, &obj)))
        }
        "list" => list(store, &def, ns, query, printer.as_ref()).await,
        "watch" => watch(store, &def, ns, query, printer).await,
        "create" => {
            if def.namespaced && ns.is_empty() && !def.virtual_create_only {
                return Err(ApiError::method_not_allowed(&def.group, &def.plural));
            }
            let (headers, body) = read_body(req).await?;
            let body = decode_body(&headers, &body)?;
            if def.virtual_create_only {
                return review(shared, user, &def, ns, body);
            }
            if def.key() == crate::shape::EVENTS_KEY {
                crate::events_v1::check_decodable(&body, def.shape)?;
            }
            if def.shape == Shape::EventsV1 {
                let causes = crate::events_v1::create_causes(&body);
                if !causes.is_empty() {
                    let name = body["metadata"]["name"].as_str().unwrap_or_default();
                    return Err(ApiError::invalid(&def.group, &def.kind, name, causes));
                }
            }
            let body = def.shape.stored(body);
            let opts = query.write_opts(&user_agent, "CreateOptions", None)?;
            if def.group == "rbac.authorization.k8s.io" {
                crate::auth::escalation_check(store, user, &def.plural, ns, &body)?;
            }
            let dry_run = opts.dry_run;
            let obj = ops::create(store, &stored, ns, body, opts, warnings).map_err(served)?;
            if def.is_namespace() && !dry_run {
                // The service-account controller's work, done before the namespace is answered,
                // so that a Pod created right after it finds its `default` account (on a real
                // cluster the controller usually wins that race; here it always does).
                let name = obj.value["metadata"]["name"].as_str().unwrap_or_default();
                crate::controller::create_default_account(store, name);
            }
            Ok(respond(201, obj_bytes(&def, &obj)))
        }
        "update" => {
            let (headers, body) = read_body(req).await?;
            let body = decode_body(&headers, &body)?;
            if def.key() == crate::shape::EVENTS_KEY {
                crate::events_v1::check_decodable(&body, def.shape)?;
            }
            let body = def.shape.stored(body);
            if def.group == "rbac.authorization.k8s.io" {
                crate::auth::escalation_check(store, user, &def.plural, ns, &body)?;
            }
            let (out, created) = ops::update(
                store,
                &stored,
                ns,
                name,
                body,
                sub,
                query.write_opts(&user_agent, "UpdateOptions", None)?,
                warnings,
            )
            .map_err(served)?;
            Ok(respond(
                if created { 201 } else { 200 },
                obj_bytes(&def, out.obj()),
            ))
        }
        "patch" => {
            let (headers, body) = read_body(req).await?;
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let pt =
                PatchType::from_content_type(&ct).ok_or_else(ApiError::unsupported_media_type)?;
            if def.custom && pt == PatchType::Strategic {
                // As the real server: custom resources have no strategic-merge metadata.
                return Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                ));
            }
            // An applied configuration is YAML (JSON being YAML too); other patches are JSON.
            let body = if pt == PatchType::Apply {
                parse_yaml(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
            } else {
                parse_json(&body)?
            };
            let mut opts = query.write_opts(&user_agent, "PatchOptions", Some(pt))?;
            opts.shape = def.shape;
            // The patched object is what escalation prevention judges, as for an update.
            let admit = |inner: &crate::store::Inner, patched: &Value| {
                if def.group == "rbac.authorization.k8s.io" {
                    crate::auth::escalation_check_in(inner, user, &def.plural, ns, patched)
                } else {
                    Ok(())
                }
            };
            let (out, created) = ops::patch(
                store, &stored, ns, name, pt, &body, sub, opts, &admit, warnings,
            )
            .map_err(served)?;
            Ok(respond(
                if created { 201 } else { 200 },
                obj_bytes(&def, out.obj()),
            ))
        }
        "delete" => {
            let (headers, body) = read_body(req).await?;
            let opts = delete_opts(&headers, &body, query)?;
            match ops::delete(store, &def, ns, name, &opts, warnings)? {
                Deleted::Gone(o) => Ok(respond_value(
                    200,
                    &delete_success(&def.group, &def.plural, name, o.uid()),
                )),
                Deleted::Pending(o) => {
                    let code = if opts.orphan_dependents == Some(false) {
                        202
                    } else {
                        200
                    };
                    Ok(respond(code, obj_bytes(&def, &o)))
                }
            }
        }
        "deletecollection" => {
            let (headers, body) = read_body(req).await?;
            let opts = delete_opts(&headers, &body, query)?;
            let (labels, fields) = selectors(store, &def, query)?;
            let page = store.list(
                def.key(),
                if def.namespaced && !ns.is_empty() {
                    Some(ns)
                } else {
                    None
                },
                None,
                None,
                false,
                |o| labels.matches(&o.value) && fields.matches(&o.value),
                usize::MAX,
            );
            let mut items = vec![];
            for o in page.map(|p| p.items).unwrap_or_default() {
                let oname = o.meta_str("name").to_string();
                let ons = o.meta_str("namespace").to_string();
                // The answer lists the items as they were listed, before their deletion.
                match ops::delete(store, &def, &ons, &oname, &opts, warnings) {
                    Ok(Deleted::Gone(_)) | Ok(Deleted::Pending(_)) => items.push(o),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(respond(
                200,
                list_bytes(&def, store.current_rv(), &items, None, None),
            ))
        }
        _ => Err(ApiError::method_not_allowed(&def.group, &def.plural)),
    }
}

/// The options of a DELETE, from its body and its query, checked as `ValidateDeleteOptions`
/// checks them.
fn delete_opts(headers: &HeaderMap, body: &[u8], query: &Query) -> Result<DeleteOpts, ApiError> {
    let mut opts = DeleteOpts::default();
    let mut dry_run = Vec::new();
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v = decode_body(headers, body)?;
        opts.propagation = v["propagationPolicy"].as_str().map(str::to_string);
        opts.orphan_dependents = v["orphanDependents"].as_bool();
        opts.uid = v["preconditions"]["uid"].as_str().map(str::to_string);
        opts.resource_version = v["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string);
        dry_run = crate::util::string_list(&v["dryRun"]);
    }
    if let Some(p) = query.get("propagationPolicy") {
        opts.propagation = Some(p.to_string());
    }
    if let Some(o) = query.get("orphanDependents") {
        opts.orphan_dependents = Some(o == "true");
    }
    dry_run.extend(query.all("dryRun"));
    opts.dry_run = !dry_run.is_empty();
    let mut causes = Vec::new();
    if let (Some(p), Some(_)) = (&opts.propagation, opts.orphan_dependents) {
        causes.push(crate::status::Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {}: orphanDependents and deletionPropagation cannot be both set",
                crate::validation::go_quote(p)
            ),
            field: "propagationPolicy".into(),
        });
    }
    if let Some(p) = &opts.propagation
        && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
    {
        causes.push(crate::status::Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                crate::validation::go_quote(p)
            ),
            field: "propagationPolicy".into(),
        });
    }
    causes.extend(dry_run_causes(&dry_run));
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            causes,
        ));
    }
    Ok(opts)
}

/// An error of the stored kind's operations as the kind asked for reports it: `events "x" not
/// found` is `events.events.k8s.io "x" not found` when asked through `events.k8s.io`.
fn as_served(def: &ResourceDef, stored: &ResourceDef, mut e: ApiError) -> ApiError {
    if def.group == stored.group {
        return e;
    }
    for (from, to) in [
        (
            crate::status::qualified(&stored.group, &stored.plural),
            crate::status::qualified(&def.group, &def.plural),
        ),
        (
            crate::status::qualified(&stored.group, &stored.kind),
            crate::status::qualified(&def.group, &def.kind),
        ),
    ] {
        let (from, to) = (format!("{from} \""), format!("{to} \""));
        if let Some(at) = e.message.find(&from) {
            e.message.replace_range(at..at + from.len(), &to);
            break;
        }
    }
    if let Some(d) = e.details.as_mut()
        && d.group == stored.group
        && (d.kind == stored.plural || d.kind == stored.kind)
    {
        d.group = def.group.clone();
    }
    e
}

/// The serialized object, with apiVersion rewritten when served under another CR version, or
/// in another shape than stored.
/// An object as the client reads it (what [`obj_bytes`] encodes).
fn served_value(def: &ResourceDef, o: &Obj) -> Value {
    if def.shape != Shape::Stored {
        return def.shape.view(&o.value);
    }
    let mut v = o.value.clone();
    if def.custom {
        v["apiVersion"] = json!(def.api_version());
    }
    v
}

fn obj_bytes(def: &ResourceDef, o: &Obj) -> Bytes {
    if def.shape != Shape::Stored {
        return Bytes::from(serde_json::to_vec(&def.shape.view(&o.value)).unwrap_or_default());
    }
    if !def.custom || o.value["apiVersion"].as_str() == Some(def.api_version().as_str()) {
        return o.bytes.clone();
    }
    let mut v = o.value.clone();
    v["apiVersion"] = json!(def.api_version());
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

fn list_bytes(
    def: &ResourceDef,
    rv: u64,
    items: &[Arc<Obj>],
    cont: Option<&str>,
    remaining: Option<i64>,
) -> Bytes {
    let mut out = Vec::with_capacity(128 + items.iter().map(|o| o.bytes.len() + 1).sum::<usize>());
    out.extend_from_slice(b"{\"kind\":");
    out.extend_from_slice(json!(format!("{}List", def.kind)).to_string().as_bytes());
    out.extend_from_slice(b",\"apiVersion\":");
    out.extend_from_slice(json!(def.api_version()).to_string().as_bytes());
    out.extend_from_slice(b",\"metadata\":{\"resourceVersion\":\"");
    out.extend_from_slice(rv.to_string().as_bytes());
    out.push(b'"');
    if let Some(c) = cont {
        out.extend_from_slice(b",\"continue\":");
        out.extend_from_slice(json!(c).to_string().as_bytes());
    }
    if let Some(r) = remaining {
        out.extend_from_slice(b",\"remainingItemCount\":");
        out.extend_from_slice(r.to_string().as_bytes());
    }
    out.extend_from_slice(b"},\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&obj_bytes(def, o));
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

fn selectors(
    store: &Store,
    def: &ResourceDef,
    query: &Query,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or_default())
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(query.get("fieldSelector").unwrap_or_default())
        .map_err(ApiError::bad_request)?;
    let custom_fields = if def.custom {
        let crd = store
            .get(CRD_KEY, "", &format!("{}.{}", def.plural, def.group), false)
            .map(|o| o.value.clone())
            .unwrap_or_default();
        crate::selector::crd_selectable_fields(&crd, &def.version)
    } else {
        vec![]
    };
    let supported = |f: &str| {
        if def.custom {
            f == "metadata.name"
                || (def.namespaced && f == "metadata.namespace")
                || custom_fields.iter().any(|c| c == f)
        } else {
            field_label_supported(&def.group, &def.plural, f)
        }
    };
    if let Some(f) = fields.fields().find(|f| !supported(f)) {
        return Err(ApiError::bad_request(if def.custom {
            format!("field label not supported: {f}")
        } else {
            crate::selector::field_label_error(&def.group, &def.plural, &f)
        }));
    }
    Ok((labels, fields))
}

/// A continue token as etcd3 storage writes it: unpadded URL-safe base64 of the JSON
/// `{"v","rv","start"}`, `start` being the next key relative to the list's prefix plus NUL.
fn encode_continue(rv: i64, start: &str) -> String {
    let v = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

/// The key relative to the list's prefix: `ns/name` when listing a namespaced kind across
/// namespaces, else `name`.
fn continue_key(def: &ResourceDef, ns_filter: Option<&str>, o: &Obj) -> String {
    if def.namespaced && ns_filter.is_none() {
        format!("{}/{}", o.meta_str("namespace"), o.meta_str("name"))
    } else {
        o.meta_str("name").to_string()
    }
}

/// Decodes a continue token into its resourceVersion (-1: "the latest") and start key,
/// refusing what `storage.DecodeContinue` refuses (400 "invalid continue token: ...").
fn decode_continue(
    tok: &str,
    def: &ResourceDef,
    ns_filter: Option<&str>,
) -> Result<(i64, (String, String)), ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok.trim_end_matches('='))
        .map_err(|e| invalid(&format!("continue key is not valid: {e}")))?;
    let v: Value = serde_json::from_slice(&raw)
        .map_err(|e| invalid(&format!("continue key is not valid: {e}")))?;
    if v["v"].as_str() != Some("meta.k8s.io/v1") {
        return Err(invalid(&format!(
            "continue key is not valid: server does not recognize this encoded version {}",
            v["v"].as_str().unwrap_or_default()
        )));
    }
    let rv = v["rv"].as_i64().unwrap_or(0);
    if rv == 0 {
        return Err(invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = v["start"].as_str().unwrap_or_default();
    if start.is_empty() {
        return Err(invalid(
            "continue key is not valid: encoded start key empty",
        ));
    }
    let key = start.trim_end_matches('\u{0}');
    if key.split('/').any(|seg| seg == ".." || seg == ".") || key.starts_with('/') {
        return Err(invalid(&format!("continue key is not valid: {start}")));
    }
    // The token names the first key to return; `Store::list` wants the last key returned, and
    // a key followed by NUL sorts right after that key.
    let pos = if def.namespaced && ns_filter.is_none() {
        match key.split_once('/') {
            Some((n, name)) => (n.to_string(), name.to_string()),
            None => (key.to_string(), String::new()),
        }
    } else {
        (ns_filter.unwrap_or_default().to_string(), key.to_string())
    };
    Ok((rv, pos))
}

/// A query boolean as Go's `strconv.ParseBool` reads it; None when absent or unreadable.
fn parse_go_bool(v: Option<&str>) -> Option<bool> {
    match v? {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// `ValidateListOptions` (with the WatchList feature on, as in v1.32): 422 on
/// `ListOptions.meta.k8s.io ""`.
fn validate_list_options(query: &Query, watch: bool) -> Result<(), ApiError> {
    let rv = query.get("resourceVersion").unwrap_or_default();
    let rv_match = query.get("resourceVersionMatch").unwrap_or_default();
    let send_initial = query.get("sendInitialEvents").filter(|v| !v.is_empty());
    let cont = query.get("continue").unwrap_or_default();
    let forbidden = |field: &str, why: &str| Cause {
        reason: "FieldValueForbidden",
        message: format!("Forbidden: {why}"),
        field: field.into(),
    };
    let mut causes = vec![];
    if watch {
        if send_initial.is_some() && rv_match != "NotOlderThan" {
            causes.push(forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !rv_match.is_empty() {
            if send_initial.is_none() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if rv_match != "NotOlderThan" {
                causes.push(Cause {
                    reason: "FieldValueNotSupported",
                    message: format!(
                        "Unsupported value: {}: supported values: \"NotOlderThan\"",
                        json!(rv_match)
                    ),
                    field: "resourceVersionMatch".into(),
                });
            }
            if !cont.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        if !rv_match.is_empty() {
            if rv.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !cont.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if rv_match != "Exact" && rv_match != "NotOlderThan" {
                causes.push(Cause {
                    reason: "FieldValueNotSupported",
                    message: format!(
                        "Unsupported value: {}: supported values: \"Exact\", \"NotOlderThan\", \"\"",
                        json!(rv_match)
                    ),
                    field: "resourceVersionMatch".into(),
                });
            }
            if rv_match == "Exact" && rv == "0" {
                causes.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if send_initial.is_some() {
            causes.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes))
    }
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

async fn list(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    query: &Query,
    printer: Option<&Printer>,
) -> Result<Response<Body>, ApiError> {
    validate_list_options(query, false)?;
    let (labels, fields) = selectors(store, def, query)?;
    let limit = match query.get("limit") {
        Some(l) if !l.is_empty() => l
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(go_parse_int_error(l)))?,
        _ => 0,
    };
    let ns_filter = if def.namespaced && !ns.is_empty() {
        Some(ns)
    } else {
        None
    };
    let rv_param = query.get("resourceVersion").unwrap_or_default();
    let rv_match = query.get("resourceVersionMatch").unwrap_or_default();
    // A list at version "0" is the watch cache's, which has no pages: the limit is ignored.
    let from_cache = rv_param == "0"
        && query.get("continue").is_none_or(str::is_empty)
        && matches!(rv_match, "" | "NotOlderThan");
    let max = if limit > 0 && !from_cache {
        limit as usize
    } else {
        usize::MAX
    };
    let parse_rv = || {
        rv_param
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param}")))
    };
    let mut after = None;
    // The version to list at, as etcd3 storage decides it: a continue token's, or the one asked
    // for exactly (`resourceVersionMatch=Exact`, or the legacy form: a limit with a version).
    let mut at = None;
    if let Some(c) = query.get("continue").filter(|c| !c.is_empty()) {
        if !rv_param.is_empty() && rv_param != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rv, start) = decode_continue(c, def, ns_filter)?;
        after = Some(start);
        at = (rv > 0).then_some(rv as u64);
    } else if rv_match == "Exact" || (rv_match.is_empty() && limit > 0 && rv_param != "0") {
        if !rv_param.is_empty() {
            at = Some(parse_rv()?);
        }
    } else if !rv_param.is_empty() && rv_param != "0" {
        // "Not older than": served once the store has caught up, as the watch cache waits.
        let wanted = parse_rv()?;
        let reached = store.wait_for_rv(wanted, Duration::from_secs(3)).await;
        if reached < wanted {
            return Err(ApiError::too_large_resource_version(wanted, reached, 1));
        }
    }
    if let Some(at) = at {
        let current = store.current_rv();
        if at > current {
            return Err(ApiError::too_large_resource_version(at, current, 0));
        }
    }
    let page = store.list(
        def.key(),
        ns_filter,
        after.as_ref(),
        at,
        true,
        |o| labels.matches(&o.value) && fields.matches(&o.value),
        max,
    );
    let page = match page {
        Ok(page) => page,
        Err(_) if query.get("continue").is_some_and(|c| !c.is_empty()) => {
            // etcd3 storage offers a token that continues at the latest version.
            let mut e = ApiError::expired(CONTINUE_EXPIRED);
            if let Some(start) = &after {
                let key = if def.namespaced && ns_filter.is_none() {
                    format!("{}/{}", start.0, start.1)
                } else {
                    start.1.clone()
                };
                e.continue_token = Some(encode_continue(-1, &key));
            }
            return Err(e);
        }
        Err(_) => {
            return Err(ApiError::expired(
                "The resourceVersion for the provided list is too old.",
            ));
        }
    };
    let crate::store::ListPage {
        rv: list_rv,
        items,
        more,
        scanned: total,
    } = page;
    let cont = if more {
        items
            .last()
            .map(|o| encode_continue(list_rv as i64, &continue_key(def, ns_filter, o)))
    } else {
        None
    };
    // Only an unfiltered list knows how many items remain (as etcd3 storage reports it).
    let remaining = (more && labels.is_empty() && fields.is_empty())
        .then(|| total.saturating_sub(items.len()) as i64);
    if let Some(p) = printer {
        let mut v = p.many(def, list_rv, &items, cont.as_deref());
        if let Some(r) = remaining
            && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.insert("remainingItemCount".into(), json!(r));
        }
        return Ok(respond_value(200, &v));
    }
    Ok(respond(
        200,
        list_bytes(def, list_rv, &items, cont.as_deref(), remaining),
    ))
}

fn event_line(etype: &str, obj: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(obj.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(etype.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(obj);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// How often a watch with bookmarks gets one, as the watch cache sends them.
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// When a watch ending at `end` gets its next bookmark, as the watch cache schedules them
/// (`cacheWatcher.nextBookmarkTime`): a minute from `now`, or 2 s before the end when that is
/// sooner, so that the client learns the latest version before it reconnects; none once that
/// moment has passed.
fn next_bookmark_time(
    now: tokio::time::Instant,
    end: tokio::time::Instant,
) -> Option<tokio::time::Instant> {
    let beat = now + BOOKMARK_EVERY;
    let before_end = end.checked_sub(Duration::from_secs(2)).unwrap_or(end);
    let next = beat.min(before_end);
    (next >= now).then_some(next)
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn bookmark(def: &ResourceDef, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta});
    event_line("BOOKMARK", obj.to_string().as_bytes())
}

/// The event a filtered watch reports, and the object it carries: an object that starts
/// matching is ADDED; one that stops matching is DELETED with its previous content (the state
/// that matched) stamped with the event's resourceVersion, as the real server's watch cache does.
fn filtered_event(
    e: &crate::store::Event,
    matches: &impl Fn(&Obj) -> bool,
) -> Option<(&'static str, Arc<Obj>)> {
    let now = matches(&e.obj);
    match e.etype {
        EventType::Modified => {
            let before = e.prev.as_ref().is_none_or(|p| matches(p));
            match (before, now, &e.prev) {
                (true, true, _) => Some(("MODIFIED", e.obj.clone())),
                (false, true, _) => Some(("ADDED", e.obj.clone())),
                (true, false, Some(prev)) => {
                    let mut last = prev.value.clone();
                    last["metadata"]["resourceVersion"] = json!(e.rv.to_string());
                    Some(("DELETED", Obj::new(last, e.rv)))
                }
                (true, false, None) => Some(("DELETED", e.obj.clone())),
                (false, false, _) => None,
            }
        }
        other => now.then(|| (other.as_str(), e.obj.clone())),
    }
}

fn stream_response(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut r = Response::new(StreamBody::new(stream).boxed_unsync());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

async fn watch(
    store: &Arc<Store>,
    def: &Arc<ResourceDef>,
    ns: &str,
    query: &Query,
    printer: Option<Printer>,
) -> Result<Response<Body>, ApiError> {
    let encode = move |def: &ResourceDef, o: &Arc<Obj>| match &printer {
        Some(p) => p.encode(def, o),
        None => obj_bytes(def, o),
    };
    validate_list_options(query, true)?;
    let (labels, fields) = selectors(store, def, query)?;
    let bookmarks = query.flag("allowWatchBookmarks");
    // sendInitialEvents: Some(true) streams the current state then a bookmark marking its end
    // (WatchList); Some(false) starts at the given version (or now) without synthetic events;
    // unset keeps the legacy rule (synthetic ADDED events only for "" and "0").
    let send_initial_param = parse_go_bool(query.get("sendInitialEvents"));
    let rv_param = query.get("resourceVersion").unwrap_or_default();
    let from_now = rv_param.is_empty() || rv_param == "0";
    // With WatchList on (as it is in v1.32), a legacy watch from "" or "0" that says nothing of
    // initial events is defaulted to a watch-list: its initial events end with a bookmark too.
    let send_initial = send_initial_param == Some(true)
        || (send_initial_param.is_none()
            && from_now
            && query.get("resourceVersionMatch").is_none_or(str::is_empty));
    let timeout = match query.get("timeoutSeconds") {
        Some(t) if !t.is_empty() => t
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(go_parse_int_error(t)))?,
        _ => 0,
    };
    let timeout = u64::try_from(timeout)
        .ok()
        .filter(|t| *t > 0)
        .unwrap_or(1800);
    let ns_filter: Option<String> = if def.namespaced && !ns.is_empty() {
        Some(ns.to_string())
    } else {
        None
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1024);
    let mut initial: Vec<Bytes> = vec![];
    let matches = {
        let labels = labels.clone();
        let fields = fields.clone();
        move |o: &Obj| labels.matches(&o.value) && fields.matches(&o.value)
    };
    let parse_rv = || {
        rv_param
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param}")))
    };
    if send_initial && !from_now {
        // A watch-list is served once the cache has caught up with the version asked for; one
        // that does not in time ends in an ERROR event, inside a successful response.
        let wanted = parse_rv()?;
        let reached = store.wait_for_rv(wanted, Duration::from_secs(3)).await;
        if reached < wanted {
            let status = ApiError::too_large_resource_version(wanted, reached, 1);
            let _ = tx.try_send(event_line(
                "ERROR",
                status.to_value().to_string().as_bytes(),
            ));
            return Ok(stream_response(rx));
        }
    }
    let (mut sub, mut last_rv) = if send_initial || from_now {
        let (rv, objs, sub) = store.subscribe_now(def.key(), ns_filter.as_deref());
        if send_initial_param != Some(false) {
            for o in objs.iter().filter(|o| matches(o)) {
                initial.push(event_line("ADDED", &encode(def, o)));
            }
        }
        if send_initial && bookmarks {
            initial.push(bookmark(def, rv, true));
        }
        (sub, rv)
    } else {
        let rv = parse_rv()?;
        // A version the store has not reached: the watch starts now and reports only what comes
        // after that version, as the watch cache does.
        let current = store.current_rv();
        match store.subscribe_from(rv.min(current)) {
            Ok((events, sub)) => {
                let mut last = rv;
                for e in events.into_iter().filter(|e| e.rv > rv) {
                    last = e.rv;
                    if &*e.key == def.key()
                        && ns_filter.as_ref().is_none_or(|n| *n == e.ns)
                        && let Some((et, obj)) = filtered_event(&e, &matches)
                    {
                        initial.push(event_line(et, &encode(def, &obj)));
                    }
                }
                (sub, last)
            }
            Err(oldest) => {
                let status =
                    ApiError::expired(format!("too old resource version: {rv} ({oldest})"));
                let line = event_line("ERROR", status.to_value().to_string().as_bytes());
                let _ = tx.try_send(line);
                return Ok(stream_response(rx));
            }
        }
    };
    let store = store.clone();
    let def = def.clone();
    tokio::spawn(async move {
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let end = tokio::time::Instant::now() + Duration::from_secs(timeout);
        let deadline = tokio::time::sleep_until(end);
        tokio::pin!(deadline);
        let mut next_bookmark = bookmarks
            .then(|| next_bookmark_time(tokio::time::Instant::now(), end))
            .flatten();
        loop {
            tokio::select! {
                ev = sub.recv() => match ev {
                    Ok(e) => {
                        if e.rv <= last_rv {
                            continue;
                        }
                        last_rv = e.rv;
                        if &*e.key != def.key() || ns_filter.as_ref().is_some_and(|n| *n != e.ns) {
                            continue;
                        }
                        let Some((et, obj)) = filtered_event(&e, &matches) else {
                            continue;
                        };
                        if tx.send(event_line(et, &encode(&def, &obj))).await.is_err() {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                },
                _ = sleep_until_some(next_bookmark), if next_bookmark.is_some() => {
                    let (cur, caught_up) = store.read(|inner| (inner.rv, sub.is_empty()));
                    let rv = if caught_up { cur.max(last_rv) } else { last_rv };
                    last_rv = rv;
                    if tx.send(bookmark(&def, rv, false)).await.is_err() {
                        return;
                    }
                    next_bookmark = next_bookmark_time(tokio::time::Instant::now(), end)
                        .filter(|t| Some(*t) != next_bookmark);
                }
                _ = tx.closed() => return,
                _ = &mut deadline => return,
            }
        }
    });
    Ok(stream_response(rx))
}

/// SelfSubjectAccessReview, SubjectAccessReview and LocalSubjectAccessReview.
fn review(
    shared: &Shared,
    user: &UserInfo,
    def: &ResourceDef,
    ns: &str,
    mut body: Value,
) -> Result<Response<Body>, ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    let spec = body["spec"].clone();
    if def.plural == "selfsubjectreviews" {
        let mut groups = user.groups.clone();
        if groups.is_empty() {
            groups.push("system:authenticated".into());
        }
        return Ok(respond_value(
            201,
            &json!({
                "kind": "SelfSubjectReview",
                "apiVersion": def.api_version(),
                "metadata": {"creationTimestamp": null},
                "status": {"userInfo": {"username": user.name, "uid": user.uid, "groups": groups}},
            }),
        ));
    }
    if def.plural == "selfsubjectrulesreviews" {
        let ns = spec["namespace"].as_str().unwrap_or_default();
        let (resource_rules, non_resource_rules) = crate::auth::rules_for(&shared.store, user, ns);
        return Ok(respond_value(
            201,
            &json!({
                "kind": "SelfSubjectRulesReview",
                "apiVersion": def.api_version(),
                "metadata": {"creationTimestamp": null},
                "spec": spec,
                "status": {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false},
            }),
        ));
    }
    let subject = match def.plural.as_str() {
        "selfsubjectaccessreviews" => user.clone(),
        _ => {
            let name = spec["user"].as_str().unwrap_or_default().to_string();
            let groups = crate::util::string_list(&spec["groups"]);
            if name.is_empty() && groups.is_empty() {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    "",
                    vec![crate::status::Cause {
                        reason: "FieldValueRequired",
                        message: "Required value: at least one of user or group must be specified"
                            .into(),
                        field: "spec.user".into(),
                    }],
                ));
            }
            UserInfo {
                name,
                uid: spec["uid"].as_str().unwrap_or_default().to_string(),
                groups,
            }
        }
    };
    let attrs = if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        let s = |k: &str| ra[k].as_str().unwrap_or_default().to_string();
        let mut namespace = s("namespace");
        if def.plural == "localsubjectaccessreviews" {
            namespace = ns.to_string();
        }
        Attributes {
            verb: s("verb"),
            resource_request: true,
            group: s("group"),
            resource: s("resource"),
            subresource: s("subresource"),
            name: s("name"),
            namespace,
            path: String::new(),
        }
    } else if let Some(nra) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        Attributes {
            verb: nra["verb"].as_str().unwrap_or_default().to_string(),
            resource_request: false,
            path: nra["path"].as_str().unwrap_or_default().to_string(),
            ..Default::default()
        }
    } else {
        return Err(ApiError::invalid(&def.group, &def.kind, "", vec![crate::status::Cause {
            reason: "FieldValueRequired",
            message: "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
            field: "spec.resourceAttributes".into(),
        }]));
    };
    let allowed = shared
        .store
        .read(|inner| crate::auth::allowed_by(inner, &subject, &attrs));
    body["kind"] = json!(def.kind);
    body["apiVersion"] = json!(def.api_version());
    if !body["metadata"].is_object() {
        body["metadata"] = json!({});
    }
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = match allowed {
        Some(reason) if !reason.is_empty() => json!({"allowed": true, "reason": reason}),
        Some(_) => json!({"allowed": true}),
        None => json!({"allowed": false}),
    };
    Ok(respond_value(201, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_authorization(value: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            header::HeaderValue::from_bytes(value).expect("a header value"),
        );
        headers
    }

    #[test]
    fn bearer_credentials_are_read_as_the_real_authenticator_reads_them() {
        assert_eq!(bearer_credential(&HeaderMap::new()), None);
        assert_eq!(
            bearer_credential(&with_authorization(b"Bearer abc")),
            Some(Ok("abc"))
        );
        assert_eq!(
            bearer_credential(&with_authorization(b"bearer abc extra")),
            Some(Ok("abc"))
        );
        // Not a bearer credential at all: the request is anonymous.
        for anonymous in [&b"Basic dXNlcjpwdw=="[..], b"Bearer", b"Bearer  abc"] {
            assert_eq!(bearer_credential(&with_authorization(anonymous)), None);
        }
        // A token that is not text fails authentication; it never makes the caller anonymous.
        assert_eq!(
            bearer_credential(&with_authorization(b"Bearer t\xf6ken")),
            Some(Err(()))
        );
    }
}
