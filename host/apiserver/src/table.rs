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

/// A Node's cells after its name, as printNode writes them: its readiness (and whether it is
/// cordoned), its roles from the `node-role.kubernetes.io/` labels, its age (`age`), the
/// kubelet's version, and for `-o wide` its addresses and what it runs.
fn node_cells(o: &Value, age: Value) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    let mut status = vec![match ready {
        Some(c) if c["status"] == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if o["spec"]["unschedulable"] == true {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<String> = o["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            _ if k == "kubernetes.io/role" => v.as_str().map(str::to_string),
            _ => None,
        })
        .collect();
    roles.sort();
    roles.dedup();
    let info = &o["status"]["nodeInfo"];
    let address = |kind: &str| {
        o["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == kind)
            .and_then(|a| a["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    let or_unknown = |v: &Value| match v.as_str() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<unknown>".to_string(),
    };
    vec![
        json!(status.join(",")),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        age,
        json!(info["kubeletVersion"].as_str().unwrap_or_default()),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or_unknown(&info["osImage"])),
        json!(or_unknown(&info["kernelVersion"])),
        json!(or_unknown(&info["containerRuntimeVersion"])),
    ]
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
        ("", "pods") => vec![
            name,
            col("Ready", "string", ""),
            col("Status", "string", ""),
            col("Restarts", "string", ""),
            age,
            wide_col("IP", "string"),
            wide_col("Node", "string"),
            wide_col("Nominated Node", "string"),
            wide_col("Readiness Gates", "string"),
        ],
        ("", "events") | ("events.k8s.io", "events") => vec![
            col("Last Seen", "string", ""),
            col("Type", "string", ""),
            col("Reason", "string", ""),
            col("Object", "string", ""),
            wide_col("Subobject", "string"),
            wide_col("Source", "string"),
            col("Message", "string", ""),
            wide_col("First Seen", "string"),
            wide_col("Count", "string"),
            json!({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 1}),
        ],
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
        ("", "nodes") => vec![
            name,
            col("Status", "string", ""),
            col("Roles", "string", ""),
            age,
            col("Version", "string", ""),
            wide_col("Internal-IP", "string"),
            wide_col("External-IP", "string"),
            wide_col("OS-Image", "string"),
            wide_col("Kernel-Version", "string"),
            wide_col("Container-Runtime", "string"),
        ],
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![name, col("Created At", "date", "")]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            vec![
                name,
                col("Role", "string", ""),
                age,
                wide_col("Users", "string"),
                wide_col("Groups", "string"),
                wide_col("ServiceAccounts", "string"),
            ]
        }
        _ if def.custom => {
            let extra = printer_columns(def, crd);
            if extra.is_empty() {
                vec![name, age]
            } else {
                let mut v = vec![name];
                // Columns of a higher priority are sent too; kubectl shows them with `-o wide`.
                v.extend(extra.iter().map(|c| {
                    let mut column = col(
                        c["name"].as_str().unwrap_or_default(),
                        c["type"].as_str().unwrap_or("string"),
                        c["format"].as_str().unwrap_or_default(),
                    );
                    column["priority"] = json!(c["priority"].as_i64().unwrap_or(0));
                    column["description"] = json!(c["description"].as_str().unwrap_or_default());
                    column
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
        ("", "pods") => pod_cells(o).into_iter().map(Value::String).collect(),
        ("", "events") | ("events.k8s.io", "events") => event_cells(o),
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
        ("", "nodes") => {
            let mut v = vec![name];
            v.extend(node_cells(o, a));
            v
        }
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![name, json!(created.as_str().unwrap_or_default())]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            // The subjects by kind, as SubjectsStrings lists them (service accounts with their
            // namespace).
            let subjects = o["subjects"].as_array().cloned().unwrap_or_default();
            let of_kind = |kind: &str| {
                let names: Vec<String> = subjects
                    .iter()
                    .filter(|s| s["kind"] == kind)
                    .map(|s| {
                        let name = s["name"].as_str().unwrap_or_default();
                        if kind == "ServiceAccount" {
                            format!("{}/{name}", s["namespace"].as_str().unwrap_or_default())
                        } else {
                            name.to_string()
                        }
                    })
                    .collect();
                json!(names.join(", "))
            };
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    o["roleRef"]["kind"].as_str().unwrap_or_default(),
                    o["roleRef"]["name"].as_str().unwrap_or_default()
                )),
                a,
                of_kind("User"),
                of_kind("Group"),
                of_kind("ServiceAccount"),
            ]
        }
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

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` when it is unset.
fn since(ts: &Value) -> String {
    age(ts)
}

fn has_condition(status: &Value, ty: &str) -> bool {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == ty && c["status"] == "True")
}

/// The real printer's Pod row: NAME, READY, STATUS, RESTARTS, AGE, then the wide IP, NODE,
/// NOMINATED NODE and READINESS GATES.
pub fn pod_cells(o: &Value) -> Vec<String> {
    let spec = &o["spec"];
    let status = &o["status"];
    let arr = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let init_specs = arr(&spec["initContainers"]);
    let restartable = |name: &Value| {
        init_specs
            .iter()
            .any(|c| &c["name"] == name && c["restartPolicy"] == "Always")
    };
    let total = arr(&spec["containers"]).len()
        + init_specs
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut ready = 0;
    let phase = status["phase"].as_str().unwrap_or_default();
    let mut reason = status["reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .unwrap_or(phase)
        .to_string();
    if arr(&status["conditions"])
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    // (count, latest finish of a last termination) over all and over restartable init containers.
    let mut restarts = 0i64;
    let mut last: Option<chrono::DateTime<chrono::Utc>> = None;
    let mut sidecar_restarts = 0i64;
    let mut sidecar_last: Option<chrono::DateTime<chrono::Utc>> = None;
    let later = |a: Option<chrono::DateTime<chrono::Utc>>,
                 b: Option<chrono::DateTime<chrono::Utc>>| {
        match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        }
    };
    let init_statuses = arr(&status["initContainerStatuses"]);
    let n_init = init_specs.len();
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        let count = c["restartCount"].as_i64().unwrap_or(0);
        let finished = timestamp(&c["lastState"]["terminated"]["finishedAt"]);
        restarts = restarts.saturating_add(count);
        last = later(last, finished);
        let sidecar = restartable(&c["name"]);
        if sidecar {
            sidecar_restarts = sidecar_restarts.saturating_add(count);
            sidecar_last = later(sidecar_last, finished);
        }
        let term = &c["state"]["terminated"];
        let waiting = c["state"]["waiting"]["reason"].as_str().unwrap_or_default();
        if term.is_object() && term["exitCode"].as_i64().unwrap_or(0) == 0 {
            continue;
        }
        if sidecar && c["started"].as_bool() == Some(true) {
            if c["ready"].as_bool() == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if term.is_object() {
            match term["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None => match term["signal"].as_i64().filter(|s| *s != 0) {
                    Some(sig) => format!("Init:Signal:{sig}"),
                    None => format!("Init:ExitCode:{}", term["exitCode"].as_i64().unwrap_or(0)),
                },
            }
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{i}/{n_init}")
        };
        initializing = true;
        break;
    }
    let initialized = arr(&status["conditions"])
        .iter()
        .find(|c| c["type"] == "Initialized")
        .is_some_and(|c| c["status"] == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last = sidecar_last;
        let mut has_running = false;
        for c in arr(&status["containerStatuses"]).iter().rev() {
            restarts = restarts.saturating_add(c["restartCount"].as_i64().unwrap_or(0));
            last = later(last, timestamp(&c["lastState"]["terminated"]["finishedAt"]));
            let state = &c["state"];
            let waiting = state["waiting"]["reason"].as_str().unwrap_or_default();
            let term = &state["terminated"];
            let term_reason = term["reason"].as_str().unwrap_or_default();
            if state["waiting"].is_object() && !waiting.is_empty() {
                reason = waiting.to_string();
            } else if term.is_object() && !term_reason.is_empty() {
                reason = term_reason.to_string();
            } else if term.is_object() {
                reason = match term["signal"].as_i64().filter(|s| *s != 0) {
                    Some(sig) => format!("Signal:{sig}"),
                    None => format!("ExitCode:{}", term["exitCode"].as_i64().unwrap_or(0)),
                };
            } else if c["ready"].as_bool() == Some(true) && state["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(status, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let deleting = o["metadata"]["deletionTimestamp"].is_string();
    if deleting && status["reason"] == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".into();
    }
    let restarts_cell = match last {
        Some(t) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            human_duration((chrono::Utc::now() - t).num_seconds())
        ),
        _ => restarts.to_string(),
    };
    let or_none = |v: &Value| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("<none>")
            .to_string()
    };
    let gates = arr(&spec["readinessGates"]);
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conds = arr(&status["conditions"]);
        let true_ones = gates
            .iter()
            .filter(|g| {
                conds
                    .iter()
                    .find(|c| c["type"] == g["conditionType"])
                    .is_some_and(|c| c["status"] == "True")
            })
            .count();
        format!("{true_ones}/{}", gates.len())
    };
    vec![
        o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        format!("{ready}/{total}"),
        reason,
        restarts_cell,
        age(&o["metadata"]["creationTimestamp"]),
        or_none(&status["podIPs"][0]["ip"]),
        or_none(&spec["nodeName"]),
        or_none(&status["nominatedNodeName"]),
        gates_cell,
    ]
}

/// The conditions the real printer puts on the row of a finished Pod.
fn pod_row_conditions(o: &Value) -> Option<Value> {
    match o["status"]["phase"].as_str() {
        Some("Succeeded") => Some(json!([{"type": "Completed", "status": "True",
            "reason": "Succeeded", "message": "The pod has completed successfully."}])),
        Some("Failed") => Some(json!([{"type": "Completed", "status": "True",
            "reason": "Failed", "message": "The pod failed."}])),
        _ => None,
    }
}

/// The real printer's Event row, wide: LAST SEEN, TYPE, REASON, OBJECT, SUBOBJECT, SOURCE,
/// MESSAGE, FIRST SEEN, COUNT, NAME.
pub fn event_cells(o: &Value) -> Vec<Value> {
    let first = if timestamp(&o["firstTimestamp"]).is_some() {
        since(&o["firstTimestamp"])
    } else {
        since(&o["eventTime"])
    };
    let mut last = if timestamp(&o["lastTimestamp"]).is_some() {
        since(&o["lastTimestamp"])
    } else {
        first.clone()
    };
    let mut count = o["count"].as_i64().unwrap_or(0);
    if o["series"].is_object() {
        last = since(&o["series"]["lastObservedTime"]);
        count = o["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let involved = &o["involvedObject"];
    let kind = s(&involved["kind"]).to_lowercase();
    let target = match involved["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let first_non_empty = |a: &Value, b: &Value| {
        a.as_str()
            .filter(|x| !x.is_empty())
            .or_else(|| b.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let component = first_non_empty(&o["source"]["component"], &o["reportingComponent"]);
    let instance = first_non_empty(&o["source"]["host"], &o["reportingInstance"]);
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, _) => "<unknown>".to_string(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    };
    vec![
        json!(last),
        json!(s(&o["type"])),
        json!(s(&o["reason"])),
        json!(target),
        json!(s(&involved["fieldPath"])),
        json!(source),
        json!(s(&o["message"]).trim()),
        json!(first),
        json!(count),
        json!(s(&o["metadata"]["name"])),
    ]
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

/// What each row carries as its `object` (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Include {
    /// `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object (kubectl asks for it to sort by a field).
    Object,
    /// Nothing.
    None,
}

impl Include {
    /// The `includeObject` parameter; the server refuses a value it does not know.
    pub fn parse(value: Option<&str>) -> Result<Include, crate::status::ApiError> {
        match value {
            None | Some("") | Some("Metadata") => Ok(Include::Metadata),
            Some("Object") => Ok(Include::Object),
            Some("None") => Ok(Include::None),
            Some(other) => Err(crate::status::ApiError::bad_request(format!(
                "unrecognized includeObject value: {}",
                crate::validation::go_quote(other)
            ))),
        }
    }
}

fn row(
    def: &ResourceDef,
    crd: Option<&Value>,
    o: &Obj,
    include: Include,
    whole: &dyn Fn(&Obj) -> Value,
) -> Value {
    let object = match include {
        Include::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.value["metadata"].clone(),
        }),
        Include::Object => whole(o),
        Include::None => Value::Null,
    };
    let mut r = json!({
        "cells": cells(def, crd, &o.value),
        "object": object,
    });
    if def.group.is_empty()
        && def.plural == "pods"
        && let Some(c) = pod_row_conditions(&o.value)
    {
        r["conditions"] = c;
    }
    r
}

/// A Table of `items`; `whole` gives an object as the client reads it, for rows that carry it.
pub fn render(
    def: &ResourceDef,
    crd: Option<&Value>,
    rv: u64,
    items: &[Arc<Obj>],
    cont: Option<&str>,
    include: Include,
    whole: &dyn Fn(&Obj) -> Value,
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
        "rows": items
            .iter()
            .map(|o| row(def, crd, o, include, whole))
            .collect::<Vec<_>>(),
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

    #[test]
    fn huge_restart_counts_do_not_overflow() {
        let max = json!({"restartCount": i64::MAX});
        let sidecar = json!({"name": "s", "restartCount": i64::MAX, "started": true});
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}],
                "initContainers": [{"name": "s", "restartPolicy": "Always"}]},
            "status": {"containerStatuses": [max, max],
                "initContainerStatuses": [sidecar, sidecar]}});
        assert_eq!(pod_cells(&pod)[3], i64::MAX.to_string());
    }

    #[test]
    fn pod_cells_follow_the_real_printer() {
        let now = chrono::Utc::now();
        let ago = |s: i64| (now - chrono::Duration::seconds(s)).to_rfc3339();
        let pending = json!({"metadata": {"name": "p", "creationTimestamp": ago(5)},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}});
        assert_eq!(
            pod_cells(&pending),
            [
                "p", "0/2", "Pending", "0", "5s", "<none>", "<none>", "<none>", "<none>"
            ]
        );
        let running = json!({"metadata": {"name": "r", "creationTimestamp": ago(600)},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1",
                "readinessGates": [{"conditionType": "x"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
                "conditions": [{"type": "x", "status": "True"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                     "lastState": {"terminated": {"finishedAt": ago(90)}}},
                    {"name": "b", "ready": false, "restartCount": 1,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(
            pod_cells(&running),
            [
                "r",
                "1/2",
                "CrashLoopBackOff",
                "3 (90s ago)",
                "10m",
                "10.0.0.5",
                "n1",
                "<none>",
                "1/1"
            ]
        );
        let init = json!({"metadata": {"name": "i"},
            "spec": {"initContainers": [{"name": "i1"}, {"name": "side", "restartPolicy": "Always"}],
                "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "restartCount": 4, "state": {"running": {}}}]}});
        let c = pod_cells(&init);
        assert_eq!(c[1..4], ["0/2", "Init:0/2", "4"]);
        let failed = json!({"metadata": {"name": "f", "deletionTimestamp": ago(1)},
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 2}}}]}});
        assert_eq!(pod_cells(&failed)[2], "Terminating");
        let exited = json!({"metadata": {"name": "f"}, "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 2, "signal": 0}}}]}});
        assert_eq!(pod_cells(&exited)[2], "ExitCode:2");
        assert!(pod_row_conditions(&exited).is_some());
        let gated = json!({"metadata": {"name": "g"}, "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
        assert_eq!(pod_cells(&gated)[2], "SchedulingGated");
    }

    #[test]
    fn event_cells_follow_the_real_printer() {
        let now = chrono::Utc::now();
        let ago = |s: i64| (now - chrono::Duration::seconds(s)).to_rfc3339();
        let e = json!({"metadata": {"name": "e1"}, "type": "Normal", "reason": "Pulled",
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{a}"},
            "source": {"component": "kubelet", "host": "n1"},
            "message": " done \n", "firstTimestamp": ago(300), "lastTimestamp": ago(30)});
        assert_eq!(
            event_cells(&e),
            vec![
                json!("30s"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/web"),
                json!("spec.containers{a}"),
                json!("kubelet, n1"),
                json!("done"),
                json!("5m"),
                json!(1),
                json!("e1")
            ]
        );
        let new_api = json!({"metadata": {"name": "e2"}, "type": "Warning",
            "involvedObject": {"kind": "Node"}, "reportingComponent": "ctl",
            "eventTime": ago(10), "series": {"count": 4, "lastObservedTime": ago(3)}});
        let c = event_cells(&new_api);
        assert_eq!(c[0], json!("3s"));
        assert_eq!(c[3], json!("node"));
        assert_eq!(c[5], json!("ctl"));
        assert_eq!(c[7], json!("10s"));
        assert_eq!(c[8], json!(4));
        let bare = json!({"metadata": {"name": "e3"}, "involvedObject": {}});
        let c = event_cells(&bare);
        assert_eq!(c[0], json!("<unknown>"));
        assert_eq!(c[5], json!("<unknown>"));
    }
}
