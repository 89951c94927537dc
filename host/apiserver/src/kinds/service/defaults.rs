//! The v1 defaults of a Service, what an update keeps of the stored allocation, and the fields
//! its type no longer allows.

use crate::kinds::service::fields::{
    externally_accessible, go_strings, has_selector, missing, needs_cluster_ip,
    needs_health_check_port, needs_node_ports, node_port, ports_of, set_strings, spec_type, str_of,
    strings,
};
use crate::kinds::service::validate::cluster_ip_field_causes;
use crate::status::Cause;
use crate::validation;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// The v1 defaults (`SetDefaults_Service`), applied as the request is decoded.
pub(super) fn apply_defaults(m: &mut Map<String, Value>) {
    if str_of(m, "sessionAffinity").is_empty() {
        m.insert("sessionAffinity".into(), json!("None"));
    }
    match str_of(m, "sessionAffinity") {
        "None" => {
            m.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let timeout = m
                .get("sessionAffinityConfig")
                .map(|c| &c["clientIP"]["timeoutSeconds"]);
            if timeout.is_none_or(Value::is_null) {
                m.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    if spec_type(m).is_empty() {
        m.insert("type".into(), json!("ClusterIP"));
    }
    if let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            if str_of(p, "protocol").is_empty() {
                p.insert("protocol".into(), json!("TCP"));
            }
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                Some(_) => false,
            };
            if unset && let Some(port) = p.get("port").cloned() {
                p.insert("targetPort".into(), port);
            }
        }
    }
    if externally_accessible(m) && str_of(m, "externalTrafficPolicy").is_empty() {
        m.insert("externalTrafficPolicy".into(), json!("Cluster"));
    }
    if missing(m, "internalTrafficPolicy")
        && matches!(spec_type(m), "ClusterIP" | "NodePort" | "LoadBalancer")
    {
        m.insert("internalTrafficPolicy".into(), json!("Cluster"));
    }
    if spec_type(m) == "LoadBalancer" && missing(m, "allocateLoadBalancerNodePorts") {
        m.insert("allocateLoadBalancerNodePorts".into(), json!(true));
    }
}

/// Keeps `clusterIP` and `clusterIPs` in step, guessing what the client meant when it sent
/// only one of them (old clients know only the singular field).
pub(super) fn normalize_cluster_ips(m: &mut Map<String, Value>, old: Option<&Map<String, Value>>) {
    let ip = str_of(m, "clusterIP").to_string();
    let ips = strings(m.get("clusterIPs"));
    let Some(old) = old else {
        if !ip.is_empty() && ips.is_empty() {
            set_strings(m, "clusterIPs", &[ip]);
        }
        return;
    };
    let old_ip = str_of(old, "clusterIP");
    let old_ips = strings(old.get("clusterIPs"));
    if !old_ips.is_empty() && ips.is_empty() && old_ip == ip {
        set_strings(m, "clusterIPs", &old_ips);
    }
    let same_ips = strings(m.get("clusterIPs")) == old_ips;
    if old_ip != ip && same_ips {
        if !old_ip.is_empty() && ip.is_empty() {
            m.remove("clusterIPs");
        } else {
            set_strings(m, "clusterIPs", &[ip]);
        }
    }
}

/// Lets a client resubmit what it first sent without the values allocated for it.
pub(super) fn patch_allocated_values(m: &mut Map<String, Value>, old: &Map<String, Value>) {
    if needs_cluster_ip(old) && needs_cluster_ip(m) {
        let old_ip = str_of(old, "clusterIP");
        if str_of(m, "clusterIP").is_empty() && !old_ip.is_empty() {
            m.insert("clusterIP".into(), json!(old_ip));
        }
        let old_ips = strings(old.get("clusterIPs"));
        if strings(m.get("clusterIPs")).is_empty() && !old_ips.is_empty() {
            set_strings(m, "clusterIPs", &old_ips);
        }
    }
    if needs_node_ports(old) && needs_node_ports(m) {
        let old_ports = ports_of(old);
        let used_in: HashSet<i64> = ports_of(m)
            .iter()
            .map(node_port)
            .filter(|n| *n != 0)
            .collect();
        let kept: HashSet<i64> = old_ports
            .iter()
            .map(node_port)
            .filter(|n| used_in.contains(n))
            .collect();
        // Matched by port name: the client may have changed anything else about the port.
        let by_name: std::collections::HashMap<String, i64> = old_ports
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or_default().to_string(),
                    node_port(p),
                )
            })
            .collect();
        if let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                    continue;
                }
                let name = str_of(p, "name").to_string();
                if let Some(n) = by_name.get(&name)
                    && *n != 0
                    && !kept.contains(n)
                {
                    p.insert("nodePort".into(), json!(n));
                }
            }
        }
    }
    if needs_health_check_port(old)
        && needs_health_check_port(m)
        && m.get("healthCheckNodePort")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
        && let Some(hc) = old.get("healthCheckNodePort")
    {
        m.insert("healthCheckNodePort".into(), hc.clone());
    }
}

/// Clears what the old type had and the new one does not use, unless the client changed it
/// too (then validation has the last word).
pub(super) fn drop_type_dependent_fields(
    m: &mut Map<String, Value>,
    old: &Map<String, Value>,
    status: &mut Value,
) {
    let drop_unchanged = |m: &mut Map<String, Value>, key: &str| {
        if m.get(key) == old.get(key) {
            m.remove(key);
        }
    };
    if needs_cluster_ip(old) && !needs_cluster_ip(m) {
        if strings(m.get("clusterIPs")) == strings(old.get("clusterIPs")) {
            m.remove("clusterIP");
            m.remove("clusterIPs");
        }
        drop_unchanged(m, "ipFamilies");
        drop_unchanged(m, "ipFamilyPolicy");
    }
    let node_ports = |s: &Map<String, Value>| ports_of(s).iter().map(node_port).collect::<Vec<_>>();
    if needs_node_ports(old)
        && !needs_node_ports(m)
        && node_ports(m) == node_ports(old)
        && let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut)
    {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("nodePort");
        }
    }
    if needs_health_check_port(old) && !needs_health_check_port(m) {
        drop_unchanged(m, "healthCheckNodePort");
    }
    if spec_type(old) == "LoadBalancer" && spec_type(m) != "LoadBalancer" {
        drop_unchanged(m, "allocateLoadBalancerNodePorts");
        drop_unchanged(m, "loadBalancerClass");
        *status = json!({"loadBalancer": {}});
    }
    if externally_accessible(old) && !externally_accessible(m) {
        drop_unchanged(m, "externalTrafficPolicy");
    }
}

/// Defaults ipFamilyPolicy and ipFamilies for this single-stack IPv4 cluster and refuses what
/// it cannot serve (`initIPFamilyFields`).
pub(super) fn init_ip_families(
    m: &mut Map<String, Value>,
    old: Option<&Map<String, Value>>,
) -> Result<(), Vec<Cause>> {
    if spec_type(m) == "ExternalName" {
        return Ok(());
    }
    if missing(m, "ipFamilyPolicy") {
        let policy = match old
            .and_then(|o| o.get("ipFamilyPolicy"))
            .filter(|p| !p.is_null())
        {
            Some(p) => p.clone(),
            None if str_of(m, "clusterIP") == "None" && !has_selector(m) => {
                json!("RequireDualStack")
            }
            None => json!("SingleStack"),
        };
        m.insert("ipFamilyPolicy".into(), policy);
    }
    let causes = cluster_ip_field_causes(m);
    if !causes.is_empty() {
        return Err(causes);
    }
    let policy = str_of(m, "ipFamilyPolicy").to_string();
    let ips = strings(m.get("clusterIPs"));
    let mut families = strings(m.get("ipFamilies"));
    let mut causes = vec![];
    if policy == "SingleStack" {
        if ips.len() == 2 {
            causes.push(validation::invalid("spec.ipFamilyPolicy", json!(policy), "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"));
        }
        if families.len() == 2 {
            causes.push(validation::invalid("spec.ipFamilyPolicy", json!(policy), "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"));
        }
    }
    for (i, ip) in ips.iter().enumerate() {
        if ip == "None" {
            break;
        }
        if i >= families.len() {
            if ip.parse::<Ipv4Addr>().is_ok() {
                families.push("IPv4".into());
            } else {
                causes.push(validation::invalid(
                    format!("spec.clusterIPs[{i}]"),
                    go_strings(&ips),
                    "IPv6 is not configured on this cluster",
                ));
            }
        }
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    if str_of(m, "clusterIP") == "None" && !has_selector(m) {
        if families.is_empty() {
            families.push("IPv4".into());
        }
        // Selectorless headless Services may name both families even on a single-stack
        // cluster: nothing is allocated for them.
        if families.len() < 2 && policy != "SingleStack" {
            let other = if families[0] == "IPv4" {
                "IPv6"
            } else {
                "IPv4"
            };
            families.push(other.into());
        }
        set_strings(m, "ipFamilies", &families);
        return Ok(());
    }
    if policy == "RequireDualStack" {
        causes.push(validation::invalid(
            "spec.ipFamilyPolicy",
            json!(policy),
            "this cluster is not configured for dual-stack services",
        ));
    }
    for (i, f) in families.iter().enumerate() {
        if f != "IPv4" {
            causes.push(validation::invalid(
                format!("spec.ipFamilies[{i}]"),
                json!(f),
                "not configured on this cluster",
            ));
        }
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    if families.is_empty() {
        families.push("IPv4".into());
    }
    set_strings(m, "ipFamilies", &families);
    Ok(())
}
