//! The HTTP surface of the `cf-api` component: root links, orgs and spaces (list, create, get,
//! delete), in Cloud Controller V3 shapes. Every error uses the V3 envelope.

use serde_json::{Value as Json, json};

use lethe_guest::env::Env;
use lethe_guest::kube::{Identity, Kube, KubeError, ListOptions, Object, ObjectRef};
use lethe_guest::{Request, Response};

use crate::access;
use crate::config::{CF_API_VERSION, JobRule, ResourceType};
use crate::context::RequestContext;
use crate::errors::HttpError;
use crate::kind::{self, ResourceKind};
use crate::names::NameClaim;
use crate::ownership::{self, OWNER_LABEL, Owner};
use crate::{FINALIZER, deletion};

/// Routes one request of the CF API.
pub fn handle(kube: &dyn Kube, env: &dyn Env, req: &Request) -> Response {
    let ctx = match RequestContext::new(kube, env, req) {
        Ok(ctx) => ctx,
        Err(answer) => return answer,
    };
    let path = req.path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let result = match (req.method.as_str(), segments.as_slice()) {
        ("GET", []) => Ok(Response::json(200, &root_links(&ctx.base))),
        ("GET", ["v3"]) => Ok(Response::json(200, &v3_links(&ctx.base))),
        ("GET", ["whoami"]) => whoami(kube, req),
        ("POST", ["v3", "roles"]) => {
            access::caller(req).and_then(|caller| crate::roles::create(&ctx, &caller))
        }
        (method, ["v3", collection, rest @ ..]) => {
            match ResourceKind::from_collection(collection) {
                Some(kind) => resource_route(&ctx, method, kind, rest),
                None => configured_route(&ctx, method, collection, rest),
            }
        }
        _ => Err(HttpError::unknown_request()),
    };
    result.unwrap_or_else(HttpError::into_response)
}

fn resource_route(
    ctx: &RequestContext<'_>,
    method: &str,
    kind: ResourceKind,
    rest: &[&str],
) -> Result<Response, HttpError> {
    // A request no route takes is 404 `CF-NotFound`, with or without a token, as Cloud
    // Controller's router answers it. lethe creates only the kinds it reconciles: another
    // controller's (Korifi's CFOrg and CFSpace under `job_types = "korifi"`) are created through
    // that controller's own API, never by lethe's privileged identity.
    let t = ctx
        .settings
        .kind(kind)
        .filter(|t| match (method, rest) {
            ("GET", []) | ("GET" | "DELETE", [_]) => true,
            ("POST", []) => t.reconcile,
            _ => false,
        })
        .ok_or_else(HttpError::unknown_request)?;
    let caller = access::caller(ctx.req)?;
    let kube = ctx.kube;
    match (method, rest) {
        ("GET", []) => list(ctx, &caller, kind, t),
        ("POST", []) => create(ctx, &caller, kind, t),
        ("GET", [guid]) => {
            access::authenticate(kube, &caller)?;
            let not_found = format!("{} not found", t.display);
            let object = access::locate(kube, t, guid)
                .map_err(|e| HttpError::from_kube(e, &not_found))?
                .ok_or_else(|| HttpError::not_found(&not_found))?;
            if !access::visible(kube, &caller, t, &object)
                .map_err(|e| HttpError::from_kube(e, &not_found))?
            {
                return Err(HttpError::not_found(&not_found));
            }
            Ok(Response::json(200, &kind.render(&ctx.base, &object)))
        }
        ("DELETE", [guid]) => {
            let accepted =
                deletion::accept(kube, ctx.env, &ctx.settings, kind.name(), guid, &caller)?;
            Ok(answer(ctx, &accepted))
        }
        _ => Err(HttpError::unknown_request()),
    }
}

/// `DELETE /v3/<collection>/<guid>` of any configured type with deletion jobs whose Cloud
/// Controller collection this is (`apps`, `routes`, `service_instances` under
/// `job_types = "korifi"`): deleted as the caller, answered `202` with its job's absolute
/// `Location`, the same on a repeated DELETE while the deletion is under way (or `204` when the
/// type says there is nothing to wait for: a user-provided service instance). Anything else on
/// such a collection is not a route of lethe's.
fn configured_route(
    ctx: &RequestContext<'_>,
    method: &str,
    collection: &str,
    rest: &[&str],
) -> Result<Response, HttpError> {
    let (("DELETE", [guid]), Some((type_name, _))) = (
        (method, rest),
        ctx.settings.types.iter().find(|(_, t)| {
            t.jobs.get("delete") == Some(&JobRule::Delete) && t.api_collection() == collection
        }),
    ) else {
        return Err(HttpError::unknown_request());
    };
    let caller = access::caller(ctx.req)?;
    let accepted = deletion::accept(ctx.kube, ctx.env, &ctx.settings, type_name, guid, &caller)?;
    Ok(answer(ctx, &accepted))
}

/// A DELETE's answer: `202 Accepted` with the absolute `Location` of the job that tracks the
/// deletion, or `204 No Content` when there is nothing to wait for.
fn answer(ctx: &RequestContext<'_>, accepted: &deletion::Accepted) -> Response {
    if accepted.at_once {
        return Response::empty(204);
    }
    let job = accepted.job.render();
    Response::empty(202).with_header("location", format!("{}/v3/jobs/{job}", ctx.base))
}

/// Who the caller is, as Cloud Foundry on Kubernetes answers `GET /whoami` (Korifi's shape):
/// the cf CLI asks it, since the root document says `cf_on_k8s`, to name the user in its output.
fn whoami(kube: &dyn Kube, req: &Request) -> Result<Response, HttpError> {
    let caller = access::caller(req)?;
    let username =
        access::user_name(kube, &caller).map_err(|e| HttpError::from_kube(e, "User not found"))?;
    // A service account is named by its own name, as Korifi names it.
    let (kind, name) = match access::service_account(&username) {
        Some((_, name)) => ("ServiceAccount", name),
        None => ("User", username.as_str()),
    };
    Ok(Response::json(200, &json!({"name": name, "kind": kind})))
}

/// The root document, as a Cloud Foundry on Kubernetes serves it (Korifi's shape): the cf CLI
/// reads `login` for where to authenticate, and `cf_on_k8s` tells it to take the user's
/// Kubernetes credentials from their kubeconfig. Services lethe does not run are null.
fn root_links(base: &str) -> Json {
    json!({
        "links": {
            "self": { "href": base },
            "bits_service": null,
            "cloud_controller_v2": null,
            "cloud_controller_v3": { "href": format!("{base}/v3"), "meta": { "version": "3.117.0+cf-k8s" } },
            "network_policy_v0": null,
            "network_policy_v1": null,
            "login": { "href": base },
            "uaa": null,
            "credhub": null,
            "routing": null,
            "logging": null,
            "log_cache": null,
            "log_stream": null,
            "app_ssh": null,
        },
        "cf_on_k8s": true,
    })
}

fn v3_links(base: &str) -> Json {
    json!({
        "links": {
            "self": { "href": format!("{base}/v3") },
            "organizations": { "href": format!("{base}/v3/organizations") },
            "spaces": { "href": format!("{base}/v3/spaces") },
            "jobs": { "href": format!("{base}/v3/jobs") },
        }
    })
}

/// Query parameters of a list.
struct Query {
    names: Option<Vec<String>>,
    guids: Option<Vec<String>>,
    organization_guids: Option<Vec<String>>,
    /// `isolation_segment_guid`: lethe runs no isolation segments, so it matches nothing.
    isolation_segment: bool,
    /// `created_ats` / `updated_ats` (equal to any, or `[lt]`/`[lte]`/`[gt]`/`[gte]` one).
    times: Vec<(String, Vec<String>)>,
    /// Whether `label_selector` holds for an object without labels (lethe keeps none).
    labels_match: bool,
    include_orgs: bool,
    page: usize,
    per_page: usize,
    order: Order,
    descending: bool,
}

/// What `order_by` sorts on (Cloud Controller's values; `updated_at` is `created_at` here,
/// since the rendered resources are never updated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    CreatedAt,
    Name,
}

/// `created_ats[lt]` → (`created_ats`, `lt`).
fn split_operator(key: &str) -> (&str, Option<&str>) {
    match key.split_once('[') {
        Some((base, rest)) => (base, rest.strip_suffix(']')),
        None => (key, None),
    }
}

/// Cloud Controller's timestamp filter format, `YYYY-MM-DDThh:mm:ssZ`.
fn valid_timestamp(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// Whether a Kubernetes label selector holds for an object with no labels; `None` when it does
/// not parse.
fn selector_holds_without_labels(selector: &str) -> Option<bool> {
    let mut requirements = vec![];
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                requirements.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    requirements.push(&selector[start..]);
    let key_ok = |k: &str| {
        !k.is_empty()
            && k.len() <= 317
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    };
    let mut holds = true;
    for r in requirements.iter().map(|r| r.trim()) {
        let result = if let Some(key) = r.strip_prefix('!') {
            key_ok(key.trim()).then_some(true)
        } else if let Some((key, _)) = r.split_once("!=") {
            key_ok(key.trim()).then_some(true)
        } else if let Some((key, _)) = r.split_once('=') {
            key_ok(key.trim()).then_some(false)
        } else if let Some((key, values)) = r.split_once(" notin ") {
            (key_ok(key.trim()) && values.trim().starts_with('(')).then_some(true)
        } else if let Some((key, values)) = r.split_once(" in ") {
            (key_ok(key.trim()) && values.trim().starts_with('(')).then_some(false)
        } else {
            key_ok(r).then_some(false)
        };
        holds &= result?;
    }
    Some(holds)
}

fn parse_query(req: &Request, kind: ResourceKind) -> Result<Query, HttpError> {
    let pairs = req.query_pairs().map_err(|_| {
        HttpError::bad_query("The query parameter is invalid: it has a malformed percent-encoding")
    })?;
    let allowed = kind.list_parameters();
    let mut unknown: Vec<&str> = vec![];
    for (key, _) in &pairs {
        let (base, op) = split_operator(key);
        let known = allowed.contains(&base)
            && (op.is_none()
                || matches!(base, "created_ats" | "updated_ats")
                    && matches!(op, Some("lt" | "lte" | "gt" | "gte")));
        if !known && !unknown.contains(&key.as_str()) {
            unknown.push(key);
        }
    }
    if !unknown.is_empty() {
        let quote = |names: &[&str]| {
            names
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(HttpError::bad_query(format!(
            "The query parameter is invalid: Unknown query parameter(s): {}. Valid parameters are: {}",
            quote(&unknown),
            quote(&allowed)
        )));
    }
    let values = |name: &str| -> Vec<&str> {
        pairs
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    // Lists are comma-separated, with spaces after the commas allowed.
    let list = |name: &str| -> Option<Vec<String>> {
        let values = values(name);
        (!values.is_empty()).then(|| {
            values
                .iter()
                .flat_map(|v| v.split(','))
                .map(|v| v.trim_start().to_string())
                .collect()
        })
    };
    let mut errors: Vec<String> = vec![];
    let positive = |name: &str| -> Option<Result<usize, ()>> {
        values(name)
            .last()
            .map(|v| v.parse::<usize>().ok().filter(|n| *n > 0).ok_or(()))
    };
    let page = match positive("page") {
        None => 1,
        Some(Ok(n)) => n,
        Some(Err(())) => {
            errors.push("Page must be a positive integer".into());
            1
        }
    };
    let per_page = match positive("per_page") {
        None => 50,
        Some(Ok(n)) if n <= 5000 => n,
        Some(Ok(_)) => {
            errors.push("Per page must be between 1 and 5000".into());
            50
        }
        Some(Err(())) => {
            errors.push("Per page must be a positive integer".into());
            50
        }
    };
    let (order, descending) = match values("order_by").last().copied() {
        None => (Order::CreatedAt, false),
        Some(v) => {
            let (field, descending) = match (v.strip_prefix('-'), v.strip_prefix('+')) {
                (Some(field), _) => (field, true),
                (None, Some(field)) => (field, false),
                (None, None) => (v, false),
            };
            match field {
                "created_at" | "updated_at" => (Order::CreatedAt, descending),
                "name" => (Order::Name, descending),
                _ => {
                    errors.push("Order by can only be: 'created_at', 'updated_at', 'name'".into());
                    (Order::CreatedAt, false)
                }
            }
        }
    };
    let mut times = vec![];
    for (key, value) in &pairs {
        let (base, op) = split_operator(key);
        if !matches!(base, "created_ats" | "updated_ats") {
            continue;
        }
        let stamps: Vec<String> = value.split(',').map(|v| v.trim().to_string()).collect();
        if !stamps.iter().all(|t| valid_timestamp(t)) {
            let field = if base == "created_ats" {
                "Created ats"
            } else {
                "Updated ats"
            };
            errors.push(format!(
                "{field} has an invalid timestamp format. Timestamps should be formatted as 'YYYY-MM-DDThh:mm:ssZ'"
            ));
            continue;
        }
        times.push((op.unwrap_or("").to_string(), stamps));
    }
    let labels_match = match values("label_selector").last() {
        None => true,
        Some(selector) => selector_holds_without_labels(selector).unwrap_or_else(|| {
            errors.push("Invalid label_selector value".into());
            false
        }),
    };
    let include_orgs = match values("include").last() {
        None => false,
        Some(v) => {
            let parts: Vec<&str> = v.split(',').collect();
            if parts.iter().all(|p| matches!(*p, "org" | "organization")) {
                true
            } else {
                errors.push(format!(
                    "Invalid included resource: '{v}'. Valid included resources are: 'org', 'organization'"
                ));
                false
            }
        }
    };
    if !errors.is_empty() {
        return Err(HttpError::bad_query(format!(
            "The query parameter is invalid: {}",
            errors.join(", ")
        )));
    }
    Ok(Query {
        names: list("names"),
        guids: list("guids"),
        organization_guids: list("organization_guids"),
        isolation_segment: !values("isolation_segment_guid").is_empty(),
        times,
        labels_match,
        include_orgs,
        page,
        per_page,
        order,
        descending,
    })
}

/// Whether a creation time (RFC 3339, second precision) passes the time filters.
fn in_time_range(created: &str, times: &[(String, Vec<String>)]) -> bool {
    times.iter().all(|(op, stamps)| {
        let at = stamps[0].as_str();
        match op.as_str() {
            "lt" => created < at,
            "lte" => created <= at,
            "gt" => created > at,
            "gte" => created >= at,
            _ => stamps.iter().any(|s| s == created),
        }
    })
}

fn all_of_type(kube: &dyn Kube, t: &ResourceType) -> Result<Vec<Object>, KubeError> {
    match kube.list_all(
        &Identity::Privileged,
        &t.collection(t.fixed_namespace()),
        &ListOptions::default(),
    ) {
        Err(KubeError::NotFound(_)) => Ok(Vec::new()),
        other => other,
    }
}

fn list(
    ctx: &RequestContext<'_>,
    caller: &Identity,
    kind: ResourceKind,
    t: &ResourceType,
) -> Result<Response, HttpError> {
    let (kube, req, base) = (ctx.kube, ctx.req, ctx.base.as_str());
    // Cloud Controller authenticates before it validates: a bad token is 401 whatever else is
    // wrong with the request.
    access::authenticate(kube, caller)?;
    let query = parse_query(req, kind)?;
    let kube_err = |e| HttpError::from_kube(e, "Unknown request");
    let admin = access::sees_everything(kube, caller, t).map_err(kube_err)?;
    let mut matching = Vec::new();
    for o in all_of_type(kube, t).map_err(kube_err)? {
        let name = o
            .str_at("/spec/displayName")
            .unwrap_or_default()
            .to_string();
        let org = o.str_at("/spec/orgGUID").unwrap_or_default().to_string();
        let created = o.metadata.creation_timestamp.clone().unwrap_or_default();
        let keep = query.labels_match
            && !query.isolation_segment
            && in_time_range(&created, &query.times)
            // Names match regardless of case, as Cloud Controller's name columns do.
            && query
                .names
                .as_ref()
                .is_none_or(|n| n.iter().any(|n| n.to_lowercase() == name.to_lowercase()))
            && query
                .guids
                .as_ref()
                .is_none_or(|g| g.contains(&o.target.name))
            && query
                .organization_guids
                .as_ref()
                .is_none_or(|g| g.contains(&org));
        if keep && (admin || access::visible(kube, caller, t, &o).map_err(kube_err)?) {
            matching.push(o);
        }
    }
    matching.sort_by(|a, b| {
        let by_field = match query.order {
            Order::CreatedAt => a
                .metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp),
            Order::Name => {
                let name = |o: &Object| o.str_at("/spec/displayName").map(str::to_lowercase);
                name(a).cmp(&name(b))
            }
        };
        let ordering = by_field.then(a.target.name.cmp(&b.target.name));
        if query.descending {
            ordering.reverse()
        } else {
            ordering
        }
    });
    let total = matching.len();
    let total_pages = total.div_ceil(query.per_page).max(1);
    let collection = kind.collection();
    let page_link = |page: usize| {
        let mut q: Vec<String> = req
            .query
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("page=") && !p.starts_with("per_page="))
            .map(str::to_string)
            .collect();
        q.push(format!("page={page}"));
        q.push(format!("per_page={}", query.per_page));
        json!({ "href": format!("{base}/v3/{collection}?{}", q.join("&")) })
    };
    let shown: Vec<&Object> = matching
        .iter()
        .skip((query.page - 1).saturating_mul(query.per_page))
        .take(query.per_page)
        .collect();
    let resources: Vec<Json> = shown.iter().map(|o| kind.render(base, o)).collect();
    let mut body = json!({
        "pagination": {
            "total_results": total,
            "total_pages": total_pages,
            "first": page_link(1),
            "last": page_link(total_pages),
            "next": if query.page < total_pages { page_link(query.page + 1) } else { Json::Null },
            "previous": if query.page > 1 { page_link(query.page - 1) } else { Json::Null },
        },
        "resources": resources,
    });
    // `include=organization`: the organizations of the spaces on this page, once each.
    if query.include_orgs
        && let Some(org_type) = ctx.settings.kind(ResourceKind::Org)
    {
        let mut seen = std::collections::BTreeSet::new();
        let mut orgs = vec![];
        for space in &shown {
            let Some(guid) = space.str_at("/spec/orgGUID") else {
                continue;
            };
            if seen.insert(guid.to_string())
                && let Some(org) = access::locate(kube, org_type, guid).map_err(kube_err)?
            {
                orgs.push(ResourceKind::Org.render(base, &org));
            }
        }
        body["included"] = json!({ "organizations": orgs });
    }
    Ok(Response::json(200, &body))
}

fn create(
    ctx: &RequestContext<'_>,
    caller: &Identity,
    kind: ResourceKind,
    t: &ResourceType,
) -> Result<Response, HttpError> {
    let (kube, env) = (ctx.kube, ctx.env);
    // As for lists: a bad token is 401 before the body is looked at.
    access::authenticate(kube, caller)?;
    let kube_err = |e| HttpError::from_kube(e, "Unknown request");
    // Only admins create organizations (user org creation is off, as by default in Cloud
    // Controller), and they are told so before anything about the body.
    if kind == ResourceKind::Org && !access::sees_everything(kube, caller, t).map_err(kube_err)? {
        return Err(HttpError::not_authorized());
    }
    // An empty body is an empty object, as Cloud Controller reads it.
    let body: Json = if ctx.req.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&ctx.req.body).map_err(|_| {
            HttpError::parse_error("Request invalid due to parse error: invalid request body")
        })?
    };
    let Some(fields) = body.as_object() else {
        return Err(HttpError::parse_error(
            "Request invalid due to parse error: invalid request body",
        ));
    };
    check_fields(kind, fields)?;
    let name = match fields.get("name") {
        None | Some(Json::Null) => return Err(HttpError::unprocessable("Name can't be blank")),
        Some(Json::String(n)) if n.is_empty() => {
            return Err(HttpError::unprocessable(
                "Name is too short (minimum is 1 character), Name can't be blank",
            ));
        }
        Some(Json::String(n)) if n.chars().count() > 255 => {
            return Err(HttpError::unprocessable(
                "Name is too long (maximum is 255 characters)",
            ));
        }
        // `[[:alnum:][:punct:][:print:]]+`: no control characters.
        Some(Json::String(n)) if n.chars().any(char::is_control) => {
            return Err(HttpError::unprocessable(
                "Name must not contain escaped characters",
            ));
        }
        Some(Json::String(n)) => n.clone(),
        Some(_) => return Err(HttpError::unprocessable("Name must be a string")),
    };
    let guid = env.new_uuid();
    let placement = match kind {
        ResourceKind::Org => org_placement(t, fields, &name)?,
        ResourceKind::Space => space_placement(ctx, caller, &body, &name)?,
    };
    // The name is claimed last, so that only the create itself can fail after it.
    let claim = NameClaim {
        root: &ctx.settings.root_namespace,
        kind,
        namespace: &placement.namespace,
        t,
        name: &name,
    };
    if !claim.take(kube, env, &guid).map_err(kube_err)? {
        return Err(HttpError::unprocessable(kind.name_taken(&name)));
    }
    let object = json!({
        "apiVersion": CF_API_VERSION,
        "kind": t.kind,
        "metadata": { "name": guid, "namespace": placement.namespace, "finalizers": [FINALIZER], "labels": placement.labels },
        "spec": placement.spec,
    });
    // Orgs are created as the caller: RBAC decides (admins). Spaces are created privileged,
    // after the checks above (SECURITY.md P4).
    let creator = match kind {
        ResourceKind::Org => caller,
        ResourceKind::Space => &Identity::Privileged,
    };
    let created = ownership::create_once(kube, env, creator, object).map_err(|e| {
        // The name is free again at once, rather than once its claim is stale, unless the
        // create may have been made: an unknown outcome keeps the claim while the object is
        // there to read (or cannot be read). One that lands later still is claimed by the
        // reconciler's next full pass.
        let unknown = matches!(e, KubeError::Unavailable(_) | KubeError::Timeout(_));
        let target = ObjectRef::new(&t.api_version, &t.kind, Some(&placement.namespace), &guid);
        if !unknown
            || matches!(
                kube.get(&Identity::Privileged, &target),
                Err(KubeError::NotFound(_))
            )
        {
            claim.release(kube, &guid);
        }
        match e {
            KubeError::Forbidden(_) => HttpError::not_authorized(),
            other => HttpError::from_kube(other, &t.display),
        }
    })?;
    // The namespace it owns, marked with its uid; the reconciler repairs it if this fails.
    if let Err(e) = ownership::ensure_namespace_now(kube, env, Owner::new(kind.name(), &created)) {
        env.log(
            lethe_guest::env::Level::Warn,
            &format!("namespace {guid} not created yet ({e}); the reconciler will retry"),
        );
    }
    Ok(Response::json(201, &kind.render(&ctx.base, &created)))
}

/// Where a new resource goes and what it says: its namespace, spec and labels.
struct Placement {
    namespace: String,
    spec: Json,
    labels: Json,
}

/// A new organization, in the root namespace.
fn org_placement(
    t: &ResourceType,
    fields: &serde_json::Map<String, Json>,
    name: &str,
) -> Result<Placement, HttpError> {
    let Some(root) = t.fixed_namespace() else {
        return Err(HttpError::unprocessable(
            "organizations are not configured with a fixed namespace",
        ));
    };
    if fields
        .get("suspended")
        .is_some_and(|s| !s.is_boolean() && !s.is_null())
    {
        return Err(HttpError::unprocessable("Suspended must be a boolean"));
    }
    let suspended = fields
        .get("suspended")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    Ok(Placement {
        namespace: root.to_string(),
        spec: json!({ "displayName": name, "suspended": suspended }),
        labels: json!({}),
    })
}

/// A new space: in its organization's namespace, which the caller must see and manage (or be an
/// admin).
fn space_placement(
    ctx: &RequestContext<'_>,
    caller: &Identity,
    body: &Json,
    name: &str,
) -> Result<Placement, HttpError> {
    let kube = ctx.kube;
    let kube_err = |e| HttpError::from_kube(e, "Unknown request");
    let org_guid = body
        .pointer("/relationships/organization/data/guid")
        .and_then(Json::as_str)
        .ok_or_else(|| HttpError::unprocessable("Relationships Organization must be provided"))?
        .to_string();
    let invalid_org = || {
        HttpError::unprocessable(
            "Invalid organization. Ensure the organization exists and you have access to it.",
        )
    };
    let org_type = ctx
        .settings
        .kind(ResourceKind::Org)
        .ok_or_else(invalid_org)?;
    let org = access::locate(kube, org_type, &org_guid)
        .map_err(kube_err)?
        .ok_or_else(invalid_org)?;
    if org.metadata.deletion_timestamp.is_some()
        || !access::visible(kube, caller, org_type, &org).map_err(kube_err)?
    {
        return Err(invalid_org());
    }
    // Who may create a space is Cloud Controller's rule (admins, and the org's managers),
    // checked here: the space is created with the host's identity, since no CF role may
    // create Space objects itself (a user-made Space could name any namespace).
    let admin = access::sees_everything(kube, caller, org_type).map_err(kube_err)?;
    let allowed = admin || access::manages(kube, caller, &org_guid).map_err(kube_err)?;
    // A suspended org takes spaces from admins only (SECURITY.md A1).
    if kind::suspended(&org) && !admin {
        return Err(HttpError::org_suspended());
    }
    // Cloud Controller checks the caller's right to create before the name: a caller who
    // may not create spaces here is told that, not that the name is taken.
    if !allowed {
        return Err(HttpError::not_authorized());
    }
    // SECURITY.md P4: the space goes into the org's namespace only if that namespace is the
    // org's by its mark.
    ownership::ensure_namespace_now(kube, ctx.env, Owner::new(ResourceKind::Org.name(), &org))
        .map_err(|e| e.into_http_error("organization"))?;
    Ok(Placement {
        namespace: org_guid.clone(),
        spec: json!({ "displayName": name, "orgGUID": org_guid }),
        labels: json!({ OWNER_LABEL: format!("org.{org_guid}") }),
    })
}

/// Refuses, as Cloud Controller does, fields a create does not take, and metadata it cannot keep:
/// labels and annotations are not stored, so accepting them would lose them.
fn check_fields(
    kind: ResourceKind,
    fields: &serde_json::Map<String, Json>,
) -> Result<(), HttpError> {
    let known = kind.create_fields();
    let unknown: Vec<String> = fields
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .take(10)
        .map(|k| format!("'{}'", k.chars().take(64).collect::<String>()))
        .collect();
    if !unknown.is_empty() {
        return Err(HttpError::unprocessable(format!(
            "Unknown field(s): {}",
            unknown.join(", ")
        )));
    }
    let empty = |v: &Json| v.is_null() || v.as_object().is_some_and(|o| o.is_empty());
    match fields.get("metadata") {
        None | Some(Json::Null) => Ok(()),
        Some(Json::Object(m)) => {
            if m.keys().any(|k| k != "labels" && k != "annotations") {
                return Err(HttpError::unprocessable(
                    "Metadata has unknown field(s): only labels and annotations are allowed",
                ));
            }
            if m.values().all(empty) {
                Ok(())
            } else {
                Err(HttpError::unprocessable(
                    "Metadata labels and annotations are not supported",
                ))
            }
        }
        Some(_) => Err(HttpError::unprocessable("Metadata must be an object")),
    }
}
