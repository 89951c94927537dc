//! What every request shares: the server's state ([`Shared`]), the parsed query ([`Query`]) and
//! the lookups of resource definitions.

use crate::FaultConfig;
use crate::auth::{Tokens, UserInfo};
use crate::front::respond::decode_body;
use crate::resources::{CRD_KEY, ResourceDef, builtins};
use crate::status::ApiError;
use crate::store::{Obj, Store};
use crate::verbs::{self, DeleteOpts, PatchType};
use http::{HeaderMap, Method};
use parking_lot::RwLock;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The state every request handler shares: the store, the authenticators and the fault
/// injection in force.
pub struct Shared {
    /// The cluster's objects.
    pub store: Arc<Store>,
    /// The static bearer tokens (`tokens.csv`).
    pub tokens: Tokens,
    /// Signs and verifies service-account JWTs, and serves their key at the OIDC JWKS endpoint.
    pub sa_tokens: Arc<crate::sa_token::Signer>,
    /// The admin's token: the only one the `/lethe/...` endpoints accept.
    pub admin_token: String,
    /// The fault injection in force; set through [`Shared::set_faults`] so `faults_active` agrees.
    pub faults: RwLock<FaultConfig>,
    /// Whether any fault is on, so that requests skip reading `faults` when none is.
    pub faults_active: AtomicBool,
    /// The `host:port` the API advertises in `serverAddressByClientCIDRs`.
    pub server_address: String,
    /// The requests answered so far (`/lethe/...` aside).
    pub requests: crate::front::RequestCounts,
    /// The last writes, with who made them (`/lethe/audit`).
    pub audit: crate::front::AuditLog,
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

    /// Puts `f` in force for the next requests, and its `stale_read_ms` on the store. Rates are
    /// clamped to 0..1, and an `error_status` other than 429, 500 or 503 becomes 500.
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

/// Parsed query string.
pub(crate) struct Query(Vec<(String, String)>);

/// A query-string component percent-decoded, with `+` as a space; invalid UTF-8 is replaced.
pub(crate) fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
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

impl Query {
    /// The `key=value` pairs of a URL's query, decoded and in order; a key without `=` has an
    /// empty value. None (no query) is an empty query.
    pub(crate) fn parse(q: Option<&str>) -> Query {
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

    /// The first value of parameter `k`, or None when it is absent.
    pub(crate) fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    /// Integer parameter `k`, 0 when absent or empty; a 400 in `strconv.ParseInt`'s words when
    /// it is not an integer.
    pub(crate) fn int(&self, k: &str) -> Result<i64, ApiError> {
        match self.get(k) {
            Some(text) if !text.is_empty() => text
                .parse()
                .map_err(|_| ApiError::bad_request(go_parse_int_error(text))),
            _ => Ok(0),
        }
    }

    /// Whether boolean parameter `k` is set: `true`, `1`, or the key alone (`?watch`).
    pub(crate) fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1") | Some(""))
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

    /// The options of a write, checked as the server's
    /// `Validate{Create,Update,Patch}Options` check them for `options_kind`; `patch` is the patch
    /// type of a PATCH.
    pub(crate) fn write_opts(
        &self,
        options_kind: &str,
        patch: Option<PatchType>,
    ) -> Result<verbs::WriteOpts, ApiError> {
        let field_manager = self.get("fieldManager").map(str::to_string);
        let mut causes = Vec::new();
        match patch {
            Some(PatchType::Apply) if field_manager.as_deref().unwrap_or_default().is_empty() => {
                causes.push(crate::validation::required(
                    "fieldManager",
                    "is required for apply patch",
                ));
            }
            Some(pt) if pt != PatchType::Apply && self.get("force").is_some() => {
                causes.push(crate::validation::forbidden(
                    "force",
                    "may not be specified for non-apply patch",
                ));
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
            causes.push(not_supported(
                "fieldValidation",
                &crate::validation::go_quote(v),
                r#""", "Ignore", "Strict", "Warn""#,
            ));
        }
        ApiError::invalid_if_any("meta.k8s.io", options_kind, "", causes)?;
        Ok(verbs::WriteOpts {
            dry_run: self.dry_run(),
            strict: self.get("fieldValidation") == Some("Strict"),
            field_manager,
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
    vec![not_supported(
        "dryRun",
        &format!("[]string{{{}}}", quoted.join(", ")),
        r#""All""#,
    )]
}

/// The cause the real server gives a query parameter whose value (`shown` as Go prints it) is
/// not one of `supported` (quoted and listed as its message lists them).
fn not_supported(field: &str, shown: &str, supported: &str) -> crate::status::Cause {
    crate::status::Cause {
        reason: "FieldValueNotSupported",
        message: format!("Unsupported value: {shown}: supported values: {supported}"),
        field: field.into(),
    }
}

/// Every resource served: the built-in ones, then those of the CustomResourceDefinitions.
pub(crate) fn all_defs(store: &Store) -> Vec<Arc<ResourceDef>> {
    let mut v: Vec<Arc<ResourceDef>> = builtins().to_vec();
    v.extend(store.custom_defs());
    v
}

/// The resource `plural` of `group`/`version`, built-in or custom; None when no such resource
/// is served.
pub(crate) fn find_def(
    store: &Store,
    group: &str,
    version: &str,
    plural: &str,
) -> Option<Arc<ResourceDef>> {
    let this =
        |d: &&Arc<ResourceDef>| d.group == group && d.version == version && d.plural == plural;
    let builtin = builtins().iter().find(this).cloned();
    builtin.or_else(|| store.read(|inner| inner.custom.iter().find(this).cloned()))
}

/// The CustomResourceDefinition that serves `def`; none for a built-in kind.
pub(crate) fn crd_of(store: &Store, def: &ResourceDef) -> Option<Arc<Obj>> {
    let name = def
        .custom
        .then(|| format!("{}.{}", def.plural, def.group))?;
    store.get(CRD_KEY, "", &name, false)
}

/// The RBAC verb of a non-resource request: its HTTP method, lowercased (`get`, `post`...).
pub(crate) fn method_verb(m: &Method) -> String {
    m.as_str().to_ascii_lowercase()
}

/// The options of a DELETE, from its body and its query, checked as `ValidateDeleteOptions`
/// checks them.
pub(crate) fn delete_opts(
    headers: &HeaderMap,
    body: &[u8],
    query: &Query,
) -> Result<DeleteOpts, ApiError> {
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
        causes.push(crate::validation::invalid(
            "propagationPolicy",
            crate::validation::go_quote(p),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(p) = &opts.propagation
        && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
    {
        causes.push(not_supported(
            "propagationPolicy",
            &crate::validation::go_quote(p),
            r#""Foreground", "Background", "Orphan", "nil""#,
        ));
    }
    causes.extend(dry_run_causes(&dry_run));
    ApiError::invalid_if_any("meta.k8s.io", "DeleteOptions", "", causes)?;
    Ok(opts)
}

/// Where a resource request points.
pub(crate) struct Target {
    /// The resource addressed.
    pub(crate) def: Arc<ResourceDef>,
    /// The namespace of the path; empty for cluster-scoped and all-namespace requests.
    pub(crate) namespace: String,
    /// The object's name; empty for a collection.
    pub(crate) name: String,
    /// The subresource (`status`, `scale`...); empty for the object itself.
    pub(crate) sub: String,
}
