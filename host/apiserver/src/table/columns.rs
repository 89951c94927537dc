//! Which columns each kind prints, and each object's cells in them.

use crate::resources::ResourceDef;
use crate::table::cells::{age, count, json_path, text};
use crate::table::event::event_cells;
use crate::util::meta_str;
use serde_json::{Value, json};

/// The columns of each built-in kind, as kubectl prints them, by API group and resource: `+`
/// marks a column kubectl shows only with `-o wide`, and `:boolean`, `:integer` or `:date` a
/// column of that type rather than a string. `Name` is the object's name (format `name`).
const HEADERS: &[(&str, &str, &str)] = &[
    ("", "namespaces", "Name, Status, Age"),
    ("", "configmaps", "Name, Data, Age"),
    ("", "secrets", "Name, Type, Data, Age"),
    ("", "serviceaccounts", "Name, Secrets, Age"),
    ("", "events", EVENTS),
    ("events.k8s.io", "events", EVENTS),
    ("batch", "cronjobs", CRON_JOBS),
    ("coordination.k8s.io", "leases", "Name, Holder, Age"),
    ("rbac.authorization.k8s.io", "roles", CREATED),
    ("rbac.authorization.k8s.io", "clusterroles", CREATED),
    ("apiextensions.k8s.io", "customresourcedefinitions", CREATED),
    ("rbac.authorization.k8s.io", "rolebindings", BINDINGS),
    ("rbac.authorization.k8s.io", "clusterrolebindings", BINDINGS),
];
const EVENTS: &str = "Last Seen, Type, Reason, Object, Message";
// The wide CONTAINERS, IMAGES and SELECTOR columns are left out: `-o wide` shows these too.
const CRON_JOBS: &str = "Name, Schedule, Timezone, Suspend:boolean, Active:integer, \
    Last Schedule, Age";
const CREATED: &str = "Name, Created At:date";
// The wide USERS, GROUPS and SERVICEACCOUNTS columns are left out: `-o wide` shows these too.
const BINDINGS: &str = "Name, Role, Age";

/// A column definition of the Table kind.
fn col(name: &str, ty: &str, format: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

/// The column one entry of a [`HEADERS`] line describes.
fn header_column(entry: &str) -> Value {
    let (wide, entry) = match entry.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, entry),
    };
    let (name, ty) = entry.split_once(':').unwrap_or((entry, "string"));
    let format = if name == "Name" { "name" } else { "" };
    col(name, ty, format, i64::from(wide))
}

pub(super) fn columns(def: &ResourceDef, crd: Option<&Value>) -> Vec<Value> {
    let built_in = HEADERS
        .iter()
        .find(|(group, plural, _)| *group == def.group && *plural == def.plural);
    if let Some((_, _, header)) = built_in {
        return header.split(", ").map(header_column).collect();
    }
    let mut v = vec![header_column("Name")];
    let extra = if def.custom {
        printer_columns(def, crd)
    } else {
        vec![]
    };
    if extra.is_empty() {
        v.push(header_column("Age"));
    }
    // Columns of a higher priority are sent too; kubectl shows them with `-o wide`.
    v.extend(extra.iter().map(|c| {
        let mut column = col(
            c["name"].as_str().unwrap_or_default(),
            c["type"].as_str().unwrap_or("string"),
            c["format"].as_str().unwrap_or_default(),
            c["priority"].as_i64().unwrap_or(0),
        );
        column["description"] = json!(c["description"].as_str().unwrap_or_default());
        column
    }));
    v
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
    let name = json!(meta_str(o, "name"));
    let created = &o["metadata"]["creationTimestamp"];
    let a = json!(age(created));
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => vec![name, json!(text(&o["status"]["phase"])), a],
        ("", "configmaps") => vec![name, json!(count(&o["data"]) + count(&o["binaryData"])), a],
        ("", "secrets") => vec![name, json!(text(&o["type"])), json!(count(&o["data"])), a],
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
        ],
        ("", "serviceaccounts") => vec![name, json!(count(&o["secrets"])), a],
        ("", "events") | ("events.k8s.io", "events") => event_cells(o),
        ("coordination.k8s.io", "leases") => {
            vec![name, json!(text(&o["spec"]["holderIdentity"])), a]
        }
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![name, json!(created.as_str().unwrap_or_default())]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    o["roleRef"]["kind"].as_str().unwrap_or_default(),
                    o["roleRef"]["name"].as_str().unwrap_or_default()
                )),
                a,
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
