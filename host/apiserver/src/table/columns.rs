//! Which columns each kind prints, and each object's cells in them.

use crate::resources::ResourceDef;
use crate::table::cells::{
    age, count, format_labels, job_duration, json_path, service_external_ip, service_ports,
    template_cells, text,
};
use crate::table::pod::{event_cells, node_cells, pod_cells};
use serde_json::{Value, json};

pub(super) fn col(name: &str, ty: &str, format: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": 0})
}

/// A column kubectl shows only with `-o wide`.
pub(super) fn wide_col(name: &str, ty: &str) -> Value {
    json!({"name": name, "type": ty, "format": "", "description": "", "priority": 1})
}

pub(super) fn columns(def: &ResourceDef, crd: Option<&Value>) -> Vec<Value> {
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

pub(super) fn printer_columns(def: &ResourceDef, crd: Option<&Value>) -> Vec<Value> {
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

pub(super) fn cells(def: &ResourceDef, crd: Option<&Value>, o: &Value) -> Vec<Value> {
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
