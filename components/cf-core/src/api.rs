//! The HTTP surface of the `cf-api` component: root links, orgs and spaces (list, create, get,
//! delete), in Cloud Controller V3 shapes. Every error uses the V3 envelope.

use serde_json::{Value as Json, json};

use lethe_guest::env::Env;
use lethe_guest::kube::{Identity, Kube, KubeError, ListOptions, Object};
use lethe_guest::{Request, Response};

use crate::access;
use crate::config::{CF_API_VERSION, NamespaceRule, ResourceType, Settings};
use crate::errors::HttpError;
use crate::{FINALIZER, deletion, reconcile};

/// Routes one request of the CF API.
pub fn handle(kube: &dyn Kube, env: &dyn Env, req: &Request) -> Response {
    let settings = match Settings::from_env(env) {
        Ok(s) => s,
        Err(e) => {
            env.log(lethe_guest::env::Level::Error, &e);
            return lethe_guest::cf::unknown_error();
        }
    };
    let base = base_url(&settings, req);
    let path = req.path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let result = match (req.method.as_str(), segments.as_slice()) {
        ("GET", []) => Ok(Response::json(200, &root_links(&base))),
        ("GET", ["v3"]) => Ok(Response::json(200, &v3_links(&base))),
        (method, ["v3", collection @ ("organizations" | "spaces"), rest @ ..]) => {
            let type_name = if *collection == "organizations" {
                "org"
            } else {
                "space"
            };
            resource_route(kube, env, &settings, &base, req, method, type_name, rest)
        }
        _ => Err(HttpError::not_found("Unknown request")),
    };
    result.unwrap_or_else(HttpError::into_response)
}

#[allow(clippy::too_many_arguments)]
fn resource_route(
    kube: &dyn Kube,
    env: &dyn Env,
    settings: &Settings,
    base: &str,
    req: &Request,
    method: &str,
    type_name: &str,
    rest: &[&str],
) -> Result<Response, HttpError> {
    let caller = access::caller(req)?;
    let t = settings
        .resource_type(type_name)
        .ok_or_else(|| HttpError::not_found("Unknown request"))?;
    match (method, rest) {
        ("GET", []) => list(kube, base, req, &caller, type_name, t),
        ("POST", []) => create(kube, env, settings, base, req, &caller, type_name, t),
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
            Ok(Response::json(200, &render(base, type_name, &object)))
        }
        ("DELETE", [guid]) => {
            let job = deletion::delete(kube, env, settings, type_name, guid, &caller)?;
            Ok(Response::empty(202)
                .with_header("location", format!("{base}/v3/jobs/{}", job.render())))
        }
        (_, [] | [_]) => Err(HttpError::method_not_allowed()),
        _ => Err(HttpError::not_found("Unknown request")),
    }
}

/// The external base URL for links: configured, or the scheme and authority the request came to.
pub fn base_url(settings: &Settings, req: &Request) -> String {
    if let Some(url) = &settings.external_url {
        return url.clone();
    }
    // Spin's full URL: scheme://authority/path…; keep scheme://authority.
    req.header("spin-full-url")
        .and_then(|full| {
            let (scheme, rest) = full.split_once("://")?;
            let authority = rest.split('/').next()?;
            Some(format!("{scheme}://{authority}"))
        })
        .unwrap_or_else(|| "http://localhost".to_string())
}

fn root_links(base: &str) -> Json {
    json!({
        "links": {
            "self": { "href": base },
            "cloud_controller_v3": { "href": format!("{base}/v3"), "meta": { "version": "3.0.0" } },
        }
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

/// Cloud Controller's JSON for an org or a space.
pub fn render(base: &str, type_name: &str, o: &Object) -> Json {
    let guid = &o.target.name;
    let created = o.creation_timestamp.clone().unwrap_or_default();
    let name = o.str_at("/spec/displayName").unwrap_or_default();
    let metadata = json!({ "labels": {}, "annotations": {} });
    if type_name == "org" {
        json!({
            "guid": guid,
            "created_at": created,
            "updated_at": created,
            "name": name,
            "suspended": o.json.pointer("/spec/suspended").and_then(Json::as_bool).unwrap_or(false),
            "relationships": { "quota": { "data": null } },
            "metadata": metadata,
            "links": { "self": { "href": format!("{base}/v3/organizations/{guid}") } },
        })
    } else {
        let org = o
            .str_at("/spec/orgGUID")
            .or(o.target.namespace.as_deref())
            .unwrap_or_default();
        json!({
            "guid": guid,
            "created_at": created,
            "updated_at": created,
            "name": name,
            "relationships": { "organization": { "data": { "guid": org } }, "quota": { "data": null } },
            "metadata": metadata,
            "links": {
                "self": { "href": format!("{base}/v3/spaces/{guid}") },
                "organization": { "href": format!("{base}/v3/organizations/{org}") },
            },
        })
    }
}

/// Query parameters of a list.
struct Query {
    names: Option<Vec<String>>,
    guids: Option<Vec<String>>,
    organization_guids: Option<Vec<String>>,
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

fn parse_query(req: &Request, type_name: &str) -> Result<Query, HttpError> {
    let pairs = req.query_pairs().map_err(|_| {
        HttpError::bad_query("The query parameter is invalid: it has a malformed percent-encoding")
    })?;
    let mut allowed = vec!["names", "guids", "page", "per_page", "order_by"];
    if type_name == "space" {
        allowed.push("organization_guids");
    }
    if let Some((key, _)) = pairs.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
        return Err(HttpError::bad_query(format!(
            "The query parameter is invalid: {key}"
        )));
    }
    let values = |name: &str| -> Vec<&str> {
        pairs
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let list = |name: &str| -> Option<Vec<String>> {
        let values = values(name);
        (!values.is_empty()).then(|| {
            values
                .iter()
                .flat_map(|v| v.split(','))
                .map(str::to_string)
                .collect()
        })
    };
    let number = |name: &str, default: usize, max: usize| -> Result<usize, HttpError> {
        match values(name).last() {
            None => Ok(default),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(HttpError::bad_query(format!(
                    "The query parameter is invalid: {name} must be between 1 and {max}"
                ))),
            },
        }
    };
    let (order, descending) = match values("order_by").last().copied() {
        None => (Order::CreatedAt, false),
        Some(v) => {
            let (field, descending) = match v.strip_prefix('-') {
                Some(field) => (field, true),
                None => (v, false),
            };
            let order = match field {
                "created_at" | "updated_at" => Order::CreatedAt,
                "name" => Order::Name,
                _ => {
                    return Err(HttpError::bad_query(
                        "The query parameter is invalid: Order by can only be: 'created_at', 'updated_at', 'name'",
                    ));
                }
            };
            (order, descending)
        }
    };
    Ok(Query {
        names: list("names"),
        guids: list("guids"),
        organization_guids: list("organization_guids"),
        page: number("page", 1, 1_000_000)?,
        per_page: number("per_page", 50, 5000)?,
        order,
        descending,
    })
}

fn all_of_type(kube: &dyn Kube, t: &ResourceType) -> Result<Vec<Object>, KubeError> {
    let namespace = match &t.namespace {
        NamespaceRule::Fixed(ns) => Some(ns.as_str()),
        NamespaceRule::Any => None,
    };
    match kube.list_all(
        &Identity::Privileged,
        &t.api_version,
        &t.kind,
        namespace,
        &ListOptions::default(),
    ) {
        Err(KubeError::NotFound(_)) => Ok(Vec::new()),
        other => other,
    }
}

/// Whether the caller may see every object of `t` (CF admins): they can list the kind where
/// it lives.
fn sees_everything(
    kube: &dyn Kube,
    caller: &Identity,
    t: &ResourceType,
) -> Result<bool, KubeError> {
    let namespace = match &t.namespace {
        NamespaceRule::Fixed(ns) => Some(ns.as_str()),
        NamespaceRule::Any => None,
    };
    let options = ListOptions {
        limit: Some(1),
        ..Default::default()
    };
    match kube.list(caller, &t.api_version, &t.kind, namespace, &options) {
        Ok(_) => Ok(true),
        Err(KubeError::Forbidden(_) | KubeError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

fn list(
    kube: &dyn Kube,
    base: &str,
    req: &Request,
    caller: &Identity,
    type_name: &str,
    t: &ResourceType,
) -> Result<Response, HttpError> {
    // Cloud Controller authenticates before it validates: a bad token is 401 whatever else is
    // wrong with the request.
    access::authenticate(kube, caller)?;
    let query = parse_query(req, type_name)?;
    let kube_err = |e| HttpError::from_kube(e, "Unknown request");
    let admin = sees_everything(kube, caller, t).map_err(kube_err)?;
    let mut matching = Vec::new();
    for o in all_of_type(kube, t).map_err(kube_err)? {
        let name = o
            .str_at("/spec/displayName")
            .unwrap_or_default()
            .to_string();
        let org = o.str_at("/spec/orgGUID").unwrap_or_default().to_string();
        let keep = query.names.as_ref().is_none_or(|n| n.contains(&name))
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
            Order::CreatedAt => a.creation_timestamp.cmp(&b.creation_timestamp),
            Order::Name => a
                .str_at("/spec/displayName")
                .cmp(&b.str_at("/spec/displayName")),
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
    let collection = if type_name == "org" {
        "organizations"
    } else {
        "spaces"
    };
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
    let resources: Vec<Json> = matching
        .iter()
        .skip((query.page - 1).saturating_mul(query.per_page))
        .take(query.per_page)
        .map(|o| render(base, type_name, o))
        .collect();
    Ok(Response::json(
        200,
        &json!({
            "pagination": {
                "total_results": total,
                "total_pages": total_pages,
                "first": page_link(1),
                "last": page_link(total_pages),
                "next": if query.page < total_pages { page_link(query.page + 1) } else { Json::Null },
                "previous": if query.page > 1 { page_link(query.page - 1) } else { Json::Null },
            },
            "resources": resources,
        }),
    ))
}

/// A random v4 UUID from the host's CSPRNG, formatted like Cloud Controller's guids.
fn new_guid(env: &dyn Env) -> String {
    let mut b = [0u8; 16];
    for (dst, src) in b.iter_mut().zip(env.random_bytes(16)) {
        *dst = src;
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

#[allow(clippy::too_many_arguments)]
fn create(
    kube: &dyn Kube,
    env: &dyn Env,
    settings: &Settings,
    base: &str,
    req: &Request,
    caller: &Identity,
    type_name: &str,
    t: &ResourceType,
) -> Result<Response, HttpError> {
    // As for lists: a bad token is 401 before the body is looked at.
    access::authenticate(kube, caller)?;
    let body: Json = serde_json::from_slice(&req.body)
        .map_err(|e| HttpError::parse_error(format!("Request invalid due to parse error: {e}")))?;
    let Some(fields) = body.as_object() else {
        return Err(HttpError::parse_error(
            "Request invalid due to parse error: the body must be a JSON object",
        ));
    };
    check_fields(type_name, fields)?;
    let name = match fields.get("name") {
        Some(Json::String(n)) if !n.is_empty() && n.chars().count() <= 255 => n.clone(),
        Some(Json::String(n)) if n.is_empty() => {
            return Err(HttpError::unprocessable(
                "Name is too short (minimum is 1 character)",
            ));
        }
        Some(Json::String(_)) => {
            return Err(HttpError::unprocessable(
                "Name is too long (maximum is 255 characters)",
            ));
        }
        Some(_) => return Err(HttpError::unprocessable("Name must be a string")),
        None => return Err(HttpError::unprocessable("Name can't be blank")),
    };
    let kube_err = |e| HttpError::from_kube(e, "Unknown request");
    let guid = new_guid(env);
    let (namespace, spec, labels, display) = if type_name == "org" {
        let Some(root) = fixed_namespace(t) else {
            return Err(HttpError::unprocessable(
                "organizations are not configured with a fixed namespace",
            ));
        };
        if fields.get("suspended").is_some_and(|s| !s.is_boolean()) {
            return Err(HttpError::unprocessable("Suspended must be a boolean"));
        }
        let taken = all_of_type(kube, t)
            .map_err(kube_err)?
            .iter()
            .any(|o| o.str_at("/spec/displayName") == Some(name.as_str()));
        if taken {
            return Err(HttpError::unprocessable(format!(
                "Organization '{name}' already exists."
            )));
        }
        let suspended = fields
            .get("suspended")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        (
            root.to_string(),
            json!({ "displayName": name, "suspended": suspended }),
            json!({}),
            "Organization",
        )
    } else {
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
        let org_type = settings.resource_type("org").ok_or_else(invalid_org)?;
        let org = access::locate(kube, org_type, &org_guid)
            .map_err(kube_err)?
            .ok_or_else(invalid_org)?;
        if org.deletion_timestamp.is_some()
            || !access::visible(kube, caller, org_type, &org).map_err(kube_err)?
        {
            return Err(invalid_org());
        }
        let options = ListOptions::default();
        let siblings = match kube.list_all(
            &Identity::Privileged,
            &t.api_version,
            &t.kind,
            Some(&org_guid),
            &options,
        ) {
            Err(KubeError::NotFound(_)) => Vec::new(),
            other => other.map_err(kube_err)?,
        };
        if siblings
            .iter()
            .any(|o| o.str_at("/spec/displayName") == Some(name.as_str()))
        {
            return Err(HttpError::unprocessable(
                "Name must be unique per organization",
            ));
        }
        (
            org_guid.clone(),
            json!({ "displayName": name, "orgGUID": org_guid }),
            json!({ crate::OWNER_LABEL: format!("org.{org_guid}") }),
            "Space",
        )
    };
    let object = json!({
        "apiVersion": CF_API_VERSION,
        "kind": t.kind,
        "metadata": { "name": guid, "namespace": namespace, "finalizers": [FINALIZER], "labels": labels },
        "spec": spec,
    });
    // Created as the caller: RBAC decides who may create orgs (admins) and spaces (admins and
    // org managers).
    let created = kube.create(caller, &object).map_err(|e| match e {
        KubeError::Forbidden(_) => HttpError::not_authorized(),
        other => HttpError::from_kube(other, display),
    })?;
    // The namespace it owns, with the host's identity; the reconciler repairs it if this fails.
    if let Err(e) = reconcile::ensure_namespace(kube, type_name, &guid) {
        env.log(
            lethe_guest::env::Level::Warn,
            &format!("namespace {guid} not created yet ({e}); the reconciler will retry"),
        );
    }
    Ok(Response::json(201, &render(base, type_name, &created)))
}

/// Refuses, as Cloud Controller does, fields a create does not take, and metadata it cannot keep:
/// labels and annotations are not stored, so accepting them would lose them.
fn check_fields(type_name: &str, fields: &serde_json::Map<String, Json>) -> Result<(), HttpError> {
    let known: &[&str] = if type_name == "org" {
        &["name", "suspended", "metadata"]
    } else {
        &["name", "relationships", "metadata"]
    };
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

fn fixed_namespace(t: &ResourceType) -> Option<&str> {
    match &t.namespace {
        NamespaceRule::Fixed(ns) => Some(ns),
        NamespaceRule::Any => None,
    }
}
