//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which
//! `kubectl get` asks for: the columns the real server prints for each kind, and the CRD's
//! `additionalPrinterColumns` for custom resources.

use crate::resources::ResourceDef;
use crate::store::Obj;
use serde_json::{Value, json};
use std::sync::Arc;

/// Whether the client asked for a Table.
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Like Kubernetes' `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn age(ts: &Value) -> String {
    match ts
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    {
        Some(t) => {
            human_duration((chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds())
        }
        None => "<unknown>".into(),
    }
}

fn col(name: &str, ty: &str, format: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": 0})
}

/// A column kubectl shows only with `-o wide`.
fn wide_col(name: &str, ty: &str) -> Value {
    json!({"name": name, "type": ty, "format": "", "description": "", "priority": 1})
}

fn non_empty_strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The EXTERNAL-IP cell of a Service, as kubectl's printer makes it (the server prints wide).
fn service_external_ip(o: &Value) -> String {
    let external = non_empty_strings(&o["spec"]["externalIPs"]);
    match o["spec"]["type"].as_str().unwrap_or_default() {
        "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".into(),
        "LoadBalancer" => {
            let mut all: Vec<String> = o["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    i["ip"]
                        .as_str()
                        .filter(|s| !s.is_empty())
                        .or_else(|| i["hostname"].as_str().filter(|s| !s.is_empty()))
                        .map(str::to_string)
                })
                .collect();
            all.extend(external);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => o["spec"]["externalName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        _ => "<unknown>".into(),
    }
}

fn service_ports(o: &Value) -> String {
    let ports: Vec<String> = o["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let port = p["port"].as_i64().unwrap_or(0);
            let proto = p["protocol"].as_str().unwrap_or_default();
            match p["nodePort"].as_i64().filter(|n| *n > 0) {
                Some(n) => format!("{port}:{n}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect();
    if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    }
}

/// `k=v,k2=v2` in key order, or `<none>`, as labels.FormatLabels prints a selector.
fn format_labels(v: &Value) -> String {
    let mut pairs: Vec<String> = v
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

fn timestamp(ts: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    ts.as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// A Job's DURATION: empty before it starts, running time until it completes.
fn job_duration(status: &Value) -> String {
    let Some(start) = timestamp(&status["startTime"]) else {
        return String::new();
    };
    let end = timestamp(&status["completionTime"]).unwrap_or_else(chrono::Utc::now);
    human_duration((end - start).num_seconds())
}

/// The CONTAINERS and IMAGES cells of a pod template, comma separated.
fn container_cells(pod_spec: &Value) -> (String, String) {
    let containers = pod_spec["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let field = |k: &str| {
        containers
            .iter()
            .map(|c| c[k].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    (field("name"), field("image"))
}

/// `metav1.FormatLabelSelector`: requirements sorted by key, `<none>` when there are none.
fn format_label_selector(sel: &Value) -> String {
    let mut reqs: Vec<(String, String)> = vec![];
    for (k, v) in sel["matchLabels"].as_object().into_iter().flatten() {
        reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let mut values = non_empty_strings(&e["values"]);
        values.sort();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".into(),
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    if reqs.is_empty() {
        "<none>".into()
    } else {
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn count(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "<none>".into(),
        Value::String(s) if s.is_empty() => "<none>".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A tiny JSONPath subset for printer columns: `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`.
pub fn json_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    rest = rest.strip_prefix('$').unwrap_or(rest);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Ok(i) = inner.parse::<usize>() {
                cur = cur.get(i)?;
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, want) = f.split_once("==")?;
                let want = want.trim().trim_matches(['"', '\'']);
                cur = cur
                    .as_array()?
                    .iter()
                    .find(|e| e.get(k.trim()).and_then(Value::as_str) == Some(want))?;
            } else {
                return None;
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

fn columns(def: &ResourceDef, crd: Option<&Value>) -> Vec<Value> {
    let name = col("Name", "string", "name");
    let age = col("Age", "string", "");
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => vec![name, col("Status", "string", ""), age],
        ("", "configmaps") => vec![name, col("Data", "string", ""), age],
        ("", "secrets") => vec![
            name,
            col("Type", "string", ""),
            col("Data", "string", ""),
            age,
        ],
        ("", "services") => vec![
            name,
            col("Type", "string", ""),
            col("Cluster-IP", "string", ""),
            col("External-IP", "string", ""),
            col("Port(s)", "string", ""),
            age,
            wide_col("Selector", "string"),
        ],
        ("", "serviceaccounts") => vec![name, col("Secrets", "string", ""), age],
        ("batch", "cronjobs") => vec![
            name,
            col("Schedule", "string", ""),
            col("Timezone", "string", ""),
            col("Suspend", "boolean", ""),
            col("Active", "integer", ""),
            col("Last Schedule", "string", ""),
            age,
            wide_col("Containers", "string"),
            wide_col("Images", "string"),
            wide_col("Selector", "string"),
        ],
        ("batch", "jobs") => vec![
            name,
            col("Status", "string", ""),
            col("Completions", "string", ""),
            col("Duration", "string", ""),
            age,
            wide_col("Containers", "string"),
            wide_col("Images", "string"),
            wide_col("Selector", "string"),
        ],
        ("coordination.k8s.io", "leases") => vec![name, col("Holder", "string", ""), age],
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![name, col("Created At", "date", "")]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            vec![name, col("Role", "string", ""), age]
        }
        _ if def.custom => {
            let extra = printer_columns(def, crd);
            if extra.is_empty() {
                vec![name, age]
            } else {
                let mut v = vec![name];
                v.extend(extra.iter().map(|c| {
                    col(
                        c["name"].as_str().unwrap_or_default(),
                        c["type"].as_str().unwrap_or("string"),
                        c["format"].as_str().unwrap_or_default(),
                    )
                }));
                v
            }
        }
        _ => vec![name, age],
    }
}

fn printer_columns(def: &ResourceDef, crd: Option<&Value>) -> Vec<Value> {
    let Some(crd) = crd else { return vec![] };
    crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| {
            vs.iter()
                .find(|v| v["name"].as_str() == Some(def.version.as_str()))
        })
        .and_then(|v| v["additionalPrinterColumns"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["priority"].as_i64().unwrap_or(0) == 0)
        .collect()
}

fn cells(def: &ResourceDef, crd: Option<&Value>, o: &Value) -> Vec<Value> {
    let name = json!(o["metadata"]["name"].as_str().unwrap_or_default());
    let created = &o["metadata"]["creationTimestamp"];
    let a = json!(age(created));
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => vec![name, json!(text(&o["status"]["phase"])), a],
        ("", "configmaps") => vec![name, json!(count(&o["data"]) + count(&o["binaryData"])), a],
        ("", "secrets") => vec![name, json!(text(&o["type"])), json!(count(&o["data"])), a],
        ("", "services") => vec![
            name,
            json!(o["spec"]["type"].as_str().unwrap_or_default()),
            json!(
                o["spec"]["clusterIPs"][0]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("<none>")
            ),
            json!(service_external_ip(o)),
            json!(service_ports(o)),
            a,
            json!(format_labels(&o["spec"]["selector"])),
        ],
        ("batch", "cronjobs") => vec![
            name,
            json!(text(&o["spec"]["schedule"])),
            json!(text(&o["spec"]["timeZone"])),
            json!(o["spec"]["suspend"].as_bool().unwrap_or(false)),
            json!(count(&o["status"]["active"])),
            json!(if o["status"]["lastScheduleTime"].is_string() {
                age(&o["status"]["lastScheduleTime"])
            } else {
                "<none>".into()
            }),
            a,
        ]
        .into_iter()
        .chain(template_cells(&o["spec"]["jobTemplate"]["spec"]))
        .collect(),
        ("", "serviceaccounts") => vec![name, json!(count(&o["secrets"])), a],
        ("batch", "jobs") => {
            let conds = o["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let has = |t: &str| {
                conds
                    .iter()
                    .any(|c| c["type"] == t && c["status"] == "True")
            };
            let status = if has("Complete") {
                "Complete"
            } else if has("Failed") {
                "Failed"
            } else if o["metadata"]["deletionTimestamp"].is_string() {
                "Terminating"
            } else if has("Suspended") || o["spec"]["suspend"].as_bool() == Some(true) {
                // No job controller here adds the Suspended condition; spec.suspend stands in.
                "Suspended"
            } else if has("FailureTarget") {
                "FailureTarget"
            } else if has("SuccessCriteriaMet") {
                "SuccessCriteriaMet"
            } else {
                "Running"
            };
            let done = o["status"]["succeeded"].as_i64().unwrap_or(0);
            let completions = match o["spec"]["completions"].as_i64() {
                Some(want) => format!("{done}/{want}"),
                None => match o["spec"]["parallelism"].as_i64().unwrap_or(0) {
                    p if p > 1 => format!("{done}/1 of {p}"),
                    _ => format!("{done}/1"),
                },
            };
            let mut v = vec![
                name,
                json!(status),
                json!(completions),
                json!(job_duration(&o["status"])),
                a,
            ];
            v.extend(template_cells(&o["spec"]));
            v
        }
        ("coordination.k8s.io", "leases") => {
            vec![name, json!(text(&o["spec"]["holderIdentity"])), a]
        }
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![name, json!(created.as_str().unwrap_or_default())]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => vec![
            name,
            json!(format!(
                "{}/{}",
                o["roleRef"]["kind"].as_str().unwrap_or_default(),
                o["roleRef"]["name"].as_str().unwrap_or_default()
            )),
            a,
        ],
        _ if def.custom => {
            let extra = printer_columns(def, crd);
            if extra.is_empty() {
                return vec![name, a];
            }
            let mut v = vec![name];
            for c in &extra {
                let val = json_path(o, c["jsonPath"].as_str().unwrap_or_default());
                v.push(match (c["type"].as_str(), val) {
                    (_, None) | (_, Some(Value::Null)) => Value::Null,
                    (Some("date"), Some(t)) => json!(age(t)),
                    (_, Some(x)) => x.clone(),
                });
            }
            v
        }
        _ => vec![name, a],
    }
}

/// The wide CONTAINERS, IMAGES and SELECTOR cells of a Job spec.
fn template_cells(job_spec: &Value) -> [Value; 3] {
    let (names, images) = container_cells(&job_spec["template"]["spec"]);
    [
        json!(names),
        json!(images),
        json!(format_label_selector(&job_spec["selector"])),
    ]
}

fn row(def: &ResourceDef, crd: Option<&Value>, o: &Obj) -> Value {
    json!({
        "cells": cells(def, crd, &o.value),
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.value["metadata"].clone(),
        },
    })
}

/// A Table of `items`.
pub fn render(
    def: &ResourceDef,
    crd: Option<&Value>,
    rv: u64,
    items: &[Arc<Obj>],
    cont: Option<&str>,
) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns(def, crd),
        "rows": items.iter().map(|o| row(def, crd, o)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 120), "3h2m");
        assert_eq!(human_duration(50 * 3600), "2d2h");
    }

    #[test]
    fn json_path_subset() {
        let v = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {"n": [1, 2]}});
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(json_path(&v, ".spec.n[1]"), Some(&json!(2)));
        assert_eq!(json_path(&v, ".spec.missing"), None);
    }
}
