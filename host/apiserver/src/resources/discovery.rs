//! Discovery and OpenAPI documents: API groups, resource lists, the aggregated discovery answer
//! and the OpenAPI v3 index and per-group documents.

use crate::resources::builtins::builtins;
use crate::resources::crd::compare_kube_versions;
use crate::resources::def::ResourceDef;
use serde_json::{Value, json};
use std::sync::Arc;

/// A group with its versions, for `/apis`.
pub struct GroupInfo {
    /// The group's name, e.g. `apps`.
    pub name: String,
    /// The versions served, the preferred one first.
    pub versions: Vec<String>,
    /// The version clients should use, `preferredVersion` in discovery.
    pub preferred: String,
}

/// All groups (built-in then custom), in discovery order.
pub fn groups(custom: &[Arc<ResourceDef>], crds: &[Value]) -> Vec<GroupInfo> {
    let mut out: Vec<GroupInfo> = vec![];
    for d in builtins().iter().chain(custom.iter()) {
        if d.group.is_empty() {
            continue;
        }
        match out.iter_mut().find(|g| g.name == d.group) {
            Some(g) => {
                if !g.versions.contains(&d.version) {
                    g.versions.push(d.version.clone());
                }
            }
            None => out.push(GroupInfo {
                name: d.group.clone(),
                versions: vec![d.version.clone()],
                preferred: d.version.clone(),
            }),
        }
    }
    // A group of custom resources lists its versions by Kubernetes version priority (GA before
    // beta before alpha, higher numbers first), and prefers the first, as the real server does.
    for g in out.iter_mut() {
        if crds
            .iter()
            .any(|c| c["spec"]["group"].as_str() == Some(&g.name))
        {
            g.versions
                .sort_by(|a, b| compare_kube_versions(b, a).then_with(|| a.cmp(b)));
            if let Some(first) = g.versions.first() {
                g.preferred = first.clone();
            }
        }
    }
    out
}

/// The `APIGroup` object for `g`, as listed in `/apis` and served at `/apis/<group>`.
pub fn group_json(g: &GroupInfo) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{}/{}", g.name, v), "version": v}))
        .collect();
    json!({
        "name": g.name,
        "versions": versions,
        "preferredVersion": {"groupVersion": format!("{}/{}", g.name, g.preferred), "version": g.preferred},
    })
}

/// The `APIResourceList` for one group/version.
pub fn resource_list(group: &str, version: &str, defs: &[Arc<ResourceDef>]) -> Value {
    let mut resources = vec![];
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        names_and_categories(&mut r, d);
        resources.push(r);
        for (sub, verbs) in subresources(d) {
            resources.push(json!({
                "name": format!("{}/{sub}", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": verbs,
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    })
}

/// The `/openapi/v3` index: one entry per group/version.
pub fn openapi_v3_index(defs: &[Arc<ResourceDef>], hash: u64) -> Value {
    let mut paths = serde_json::Map::new();
    for d in defs {
        let p = if d.group.is_empty() {
            format!("api/{}", d.version)
        } else {
            format!("apis/{}/{}", d.group, d.version)
        };
        let url = format!("/openapi/v3/{p}?hash={hash:016X}");
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({ "paths": Value::Object(paths) })
}

/// A minimal OpenAPI v3 document for one group/version: enough for kubectl to see that the
/// server validates fields itself (`fieldValidation`) and which kinds each path serves. It
/// carries no schemas, so `kubectl explain` finds none, as for a kind published without one.
/// None when no resource of `defs` is in that group/version (the path is a 404).
pub fn openapi_v3_doc(group: &str, version: &str, defs: &[Arc<ResourceDef>]) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let mut any = false;
    for d in defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        any = true;
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let base = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        let gvk = json!({"group": group, "version": version, "kind": d.kind});
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let responses = json!({"200": {"description": "OK"}});
        if d.virtual_create_only {
            paths.insert(
                base.clone(),
                json!({"post": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "post", "parameters": params, "responses": responses}}),
            );
            continue;
        }
        paths.insert(
            base.clone(),
            json!({
                "get": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "list", "responses": responses},
                "post": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "post", "parameters": params, "responses": responses},
            }),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "get", "responses": responses},
                "put": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "put", "parameters": params, "responses": responses},
                "patch": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch", "parameters": params, "responses": responses},
                "delete": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "delete", "responses": responses},
            }),
        );
    }
    if !any {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": Value::Object(paths),
        "components": {"schemas": {}},
    }))
}

/// The subresources `d` serves, with their verbs; each answers with the resource's own kind.
fn subresources(d: &ResourceDef) -> Vec<(&'static str, &'static [&'static str])> {
    let read_write: &[&str] = &["get", "patch", "update"];
    let mut subs = vec![];
    if d.status_subresource {
        subs.push(("status", read_write));
    }
    if d.is_namespace() {
        subs.push(("finalize", &["update"][..]));
    }
    subs
}

/// Adds `shortNames` and `categories` to a discovery entry, when `d` has any.
fn names_and_categories(r: &mut Value, d: &ResourceDef) {
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
}

pub(super) fn aggregated_resource(d: &ResourceDef) -> Value {
    let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
    let mut r = json!({
        "resource": d.plural,
        "responseKind": gvk,
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": d.verbs(),
    });
    names_and_categories(&mut r, d);
    let subs: Vec<Value> = subresources(d)
        .into_iter()
        .map(|(sub, verbs)| json!({"subresource": sub, "responseKind": gvk, "verbs": verbs}))
        .collect();
    if !subs.is_empty() {
        r["subresources"] = Value::Array(subs);
    }
    r
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) for `/api`
/// (`core`) or `/apis` (every named group, preferred version first).
pub fn aggregated_discovery(
    core: bool,
    defs: &[Arc<ResourceDef>],
    groups: &[GroupInfo],
    api_version: &str,
) -> Value {
    let version_entry = |group: &str, version: &str| {
        let resources: Vec<Value> = defs
            .iter()
            .filter(|d| d.group == group && d.version == version)
            .map(|d| aggregated_resource(d))
            .collect();
        json!({"version": version, "resources": resources, "freshness": "Current"})
    };
    let items: Vec<Value> = if core {
        vec![
            json!({"metadata": {"creationTimestamp": null}, "versions": [version_entry("", "v1")]}),
        ]
    } else {
        groups
            .iter()
            .map(|g| {
                let versions: Vec<Value> =
                    g.versions.iter().map(|v| version_entry(&g.name, v)).collect();
                json!({"metadata": {"name": g.name, "creationTimestamp": null}, "versions": versions})
            })
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    })
}
