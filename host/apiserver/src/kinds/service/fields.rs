//! Reading a Service spec: its fields, what its type needs, and the causes its rules report.

use serde_json::{Map, Value, json};

/// Where Services are stored.
pub const SERVICES_KEY: &str = "/services";

pub(super) const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

pub(super) const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

pub(super) const POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];

pub(super) const FAMILIES: &[&str] = &["IPv4", "IPv6"];

/// A Go-style rendering of a `[]string` for field errors, as `%#v` prints it.
pub(super) fn go_strings(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| json!(s).to_string()).collect();
    format!("[]string{{{}}}", items.join(", "))
}

pub(super) fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or_default()
}

pub(super) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn set_strings(m: &mut Map<String, Value>, key: &str, v: &[String]) {
    if v.is_empty() {
        m.remove(key);
    } else {
        m.insert(key.into(), json!(v));
    }
}

pub(super) fn ports_of(m: &Map<String, Value>) -> Vec<Value> {
    m.get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn node_port(p: &Value) -> i64 {
    p["nodePort"].as_i64().unwrap_or(0)
}

pub(super) fn spec_type(m: &Map<String, Value>) -> &str {
    str_of(m, "type")
}

pub(super) fn needs_cluster_ip(m: &Map<String, Value>) -> bool {
    spec_type(m) != "ExternalName"
}

pub(super) fn needs_node_ports(m: &Map<String, Value>) -> bool {
    matches!(spec_type(m), "NodePort" | "LoadBalancer")
}

pub(super) fn needs_health_check_port(m: &Map<String, Value>) -> bool {
    spec_type(m) == "LoadBalancer" && str_of(m, "externalTrafficPolicy") == "Local"
}

pub(super) fn externally_accessible(m: &Map<String, Value>) -> bool {
    match spec_type(m) {
        "LoadBalancer" | "NodePort" => true,
        "ClusterIP" => m
            .get("externalIPs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
        _ => false,
    }
}

pub(super) fn is_headless(m: &Map<String, Value>) -> bool {
    let ips = strings(m.get("clusterIPs"));
    ips.len() == 1 && ips[0] == "None"
}

pub(super) fn has_selector(m: &Map<String, Value>) -> bool {
    m.get("selector")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty())
}

pub(super) fn missing(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).is_none_or(Value::is_null)
}
