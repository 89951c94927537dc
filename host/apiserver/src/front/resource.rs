//! Resource requests: the target a path names, authorization, and each verb handed to
//! [`crate::verbs`] with the request's warnings.

use crate::auth::{Attributes, UserInfo, require};
use crate::front::list_watch::{list, list_bytes, selectors, watch};
use crate::front::negotiate::{Printer, as_served, obj_bytes};
use crate::front::respond::{
    Body, decode_body, parse_json, parse_yaml, patch_type, read_body, respond, respond_value,
};
use crate::front::shared::{Query, Shared, Target, crd_of, delete_opts, find_def};
use crate::front::subresources::{review, token_request};
use crate::resources::{self, ResourceDef, Shape};
use crate::selector::FieldSelector;
use crate::status::{ApiError, Warnings, delete_success};
use crate::store::{ListRange, Store};
use crate::util::meta_str;
use crate::verbs::{self, DeleteOpts, Deleted, PatchType, Sub};
use http::{Method, Request, Response, header};
use hyper::body::Incoming;
use serde_json::Value;

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

/// The object a create or update sends, decoded from its media type (an Event's checked the
/// way its served version decodes it).
async fn object_body(req: Request<Incoming>, def: &ResourceDef) -> Result<Value, ApiError> {
    let (headers, body) = read_body(req).await?;
    let body = decode_body(&headers, &body)?;
    if def.key() == crate::shape::EVENTS_KEY {
        crate::kinds::event::check_decodable(&body, def.shape)?;
    }
    Ok(body)
}

/// The resource part of a request's path: `/api/v1/<rest>` (the core group) or
/// `/apis/<group>/<version>/<rest>`, with `rest` split into its segments.
#[derive(Clone, Copy)]
pub(crate) struct ResourcePath<'a> {
    /// The API group; empty for the core group.
    pub group: &'a str,
    /// The group's version.
    pub version: &'a str,
    /// The segments after the version: `[namespaces, <ns>,] <resource>[, <name>[, <sub>]]`.
    pub rest: &'a [&'a str],
}

/// Serves a resource request: `rest` (the path after `group/version`) names the target,
/// the method and whether it names an object give the verb, RBAC authorizes it, and the verb
/// runs in the store, answering in the representation `Accept` asks for. 404 for a resource
/// or subresource not served, 405 for a verb the resource does not allow, 403 when RBAC
/// denies; a denied request for an unknown resource is a 403 too, as on a real server.
pub(crate) async fn resource_request(
    shared: &Shared,
    user: &UserInfo,
    req: Request<Incoming>,
    path: ResourcePath<'_>,
    query: &Query,
    warnings: &mut Warnings,
) -> Result<Response<Body>, ApiError> {
    let ResourcePath {
        group,
        version,
        rest,
    } = path;
    let store = &shared.store;
    let t = match parse_target(store, group, version, rest) {
        Ok(t) => t,
        Err(e) => {
            // Authorization comes before routing on a real server: a resource it does not
            // serve is 404 only to those who may ask for it.
            if let Some(attrs) = unrouted_attributes(req.method(), query, group, rest) {
                require(store, user, &attrs)?;
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
    let sub = subresource(&def, &t.sub, verb)?;
    if !def.allows(verb) {
        return Err(ApiError::method_not_allowed(&def.group, &def.plural));
    }
    authorize_request(store, user, &t, verb, query)?;
    let ns = t.namespace.as_str();
    let name = t.name.as_str();
    // Writes run under the rules of the kind the objects are stored as; answers and errors
    // speak of the kind asked for.
    let stored = resources::stored_def(&def);
    let served = |e: ApiError| as_served(&def, &stored, e);
    let target = verbs::WriteTarget {
        def: &stored,
        ns,
        name,
        sub,
    };
    if let Some(crd) = crd_of(store, &def) {
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
    // Escalation prevention judges what an RBAC write would store, patches included.
    let admit = |inner: &crate::store::Inner, object: &Value| {
        if def.group == "rbac.authorization.k8s.io" {
            crate::auth::escalation_check(inner, user, &def.plural, ns, object)
        } else {
            Ok(())
        }
    };
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
            if def.virtual_create_only {
                let (headers, body) = read_body(req).await?;
                return review(shared, user, &def, decode_body(&headers, &body)?);
            }
            let body = object_body(req, &def).await?;
            if def.shape == Shape::EventsV1 {
                let causes = crate::kinds::event::create_causes(&body);
                let name = meta_str(&body, "name");
                ApiError::invalid_if_any(&def.group, &def.kind, name, causes)?;
            }
            let body = def.shape.stored(body);
            let opts = query.write_opts("CreateOptions", None)?;
            store.read(|inner| admit(inner, &body))?;
            let dry_run = opts.dry_run;
            let obj = verbs::create(store, &stored, ns, body, opts, warnings).map_err(served)?;
            if def.is_namespace() && !dry_run {
                // The service-account controller's work, done before the namespace is answered,
                // so that a client asking for its `default` account right after finds it (on a real
                // cluster the controller usually wins that race; here it always does).
                let name = obj.meta_str("name");
                crate::controllers::create_default_account(store, name);
            }
            Ok(respond(201, obj_bytes(&def, &obj)))
        }
        "update" => {
            let body = def.shape.stored(object_body(req, &def).await?);
            store.read(|inner| admit(inner, &body))?;
            let (out, created) = verbs::update(
                store,
                target,
                body,
                query.write_opts("UpdateOptions", None)?,
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
            let pt = patch_type(&headers)?;
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
            let mut opts = query.write_opts("PatchOptions", Some(pt))?;
            opts.shape = def.shape;
            let (out, created) =
                verbs::patch(store, target, pt, &body, opts, &admit, warnings).map_err(served)?;
            Ok(respond(
                if created { 201 } else { 200 },
                obj_bytes(&def, out.obj()),
            ))
        }
        "delete" => {
            let (headers, body) = read_body(req).await?;
            let opts = delete_opts(&headers, &body, query)?;
            match verbs::delete(store, &def, ns, name, &opts)? {
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
            delete_collection(store, &def, ns, query, &opts)
        }
        _ => Err(ApiError::method_not_allowed(&def.group, &def.plural)),
    }
}

/// DELETECOLLECTION: deletes every object the selectors match (one already gone is skipped),
/// answering with the list of them as they were before.
fn delete_collection(
    store: &Store,
    def: &ResourceDef,
    ns: &str,
    query: &Query,
    opts: &DeleteOpts,
) -> Result<Response<Body>, ApiError> {
    let (labels, fields) = selectors(store, def, query)?;
    let ns_filter = (def.namespaced && !ns.is_empty()).then_some(ns);
    let page = store.list(
        ListRange::now(def.key(), ns_filter),
        |o| labels.matches(&o.value) && fields.matches(&o.value),
        usize::MAX,
    );
    let mut items = vec![];
    for o in page.map(|p| p.items).unwrap_or_default() {
        let (ons, oname) = (o.meta_str("namespace"), o.meta_str("name"));
        match verbs::delete(store, def, ons, oname, opts) {
            Ok(Deleted::Gone(_)) | Ok(Deleted::Pending(_)) => items.push(o.clone()),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let rv = store.current_rv();
    Ok(respond(200, list_bytes(def, rv, &items, None, None)))
}

/// What `sub` (empty: the object itself) means for `verb` on `def`: 404 for a subresource the
/// kind does not serve for that verb.
fn subresource(def: &ResourceDef, sub: &str, verb: &str) -> Result<Sub, ApiError> {
    Ok(match sub {
        "" => Sub::Main,
        "status" if def.status_subresource && matches!(verb, "get" | "update" | "patch") => {
            Sub::Status
        }
        "finalize" if def.is_namespace() && verb == "update" => Sub::Finalize,
        _ => return Err(ApiError::path_not_found()),
    })
}

/// RBAC on a routed request: 403 unless `user` may `verb` the target.
fn authorize_request(
    store: &Store,
    user: &UserInfo,
    t: &Target,
    verb: &str,
    query: &Query,
) -> Result<(), ApiError> {
    let auth_ns = if t.def.is_namespace() && !t.name.is_empty() {
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
        group: t.def.group.clone(),
        resource: t.def.plural.clone(),
        subresource: t.sub.clone(),
        name: selected_name.unwrap_or_else(|| t.name.clone()),
        namespace: auth_ns,
        path: String::new(),
    };
    // As the real server: the subresource shows in the reason, not in the prefix.
    require(store, user, &attrs)
}
