//! Validation of a Service spec, in the real server's order and words.

use crate::kinds::service::fields::{
    FAMILIES, POLICIES, PROTOCOLS, TYPES, go_strings, is_headless, missing, node_port, ports_of,
    spec_type, str_of, strings,
};
use crate::status::Cause;
use crate::validation::{self, json_type};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

/// The standalone checks of clusterIP(s), ipFamilies and ipFamilyPolicy
/// (`ValidateServiceClusterIPsRelatedFields`).
pub(super) fn cluster_ip_field_causes(m: &Map<String, Value>) -> Vec<Cause> {
    if spec_type(m) == "ExternalName" {
        return vec![];
    }
    let mut causes = vec![];
    let ip = str_of(m, "clusterIP");
    let ips = strings(m.get("clusterIPs"));
    let ips_invalid = |why: &str| validation::invalid("spec.clusterIPs", go_strings(&ips), why);
    if !ip.is_empty() {
        if ips.is_empty() {
            causes.push(validation::required("spec.clusterIPs", ""));
        } else if ips[0] != ip {
            causes.push(ips_invalid("first value must match `clusterIP`"));
        }
    } else if !ips.is_empty() {
        causes.push(ips_invalid(
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families = strings(m.get("ipFamilies"));
    let mut seen = HashSet::new();
    for (i, f) in families.iter().enumerate() {
        if !FAMILIES.contains(&f.as_str()) {
            causes.push(validation::not_supported(
                format!("spec.ipFamilies[{i}]"),
                &json!(f),
                FAMILIES,
            ));
        }
        if !seen.insert(f.clone()) {
            causes.push(crate::validation::duplicate(
                format!("spec.ipFamilies[{i}]"),
                json!(f),
            ));
        }
    }
    if let Some(p) = m.get("ipFamilyPolicy").filter(|p| !p.is_null())
        && !p.as_str().is_some_and(|p| POLICIES.contains(&p))
    {
        causes.push(validation::not_supported(
            "spec.ipFamilyPolicy",
            p,
            POLICIES,
        ));
    }
    let mut bad_ips = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && ip == "None" {
            if ips.len() > 1 {
                bad_ips = true;
                causes.push(ips_invalid("'None' must be the first and only value"));
            }
            continue;
        }
        if ip.parse::<IpAddr>().is_err() {
            bad_ips = true;
            causes.push(validation::invalid(
                format!("spec.clusterIPs[{i}]"),
                json!(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    if ips.len() > 2 {
        causes.push(ips_invalid("may only hold up to 2 values"));
    }
    if bad_ips {
        return causes;
    }
    if ips.len() > 1 {
        let v4 = ips.iter().filter(|s| s.parse::<Ipv4Addr>().is_ok()).count();
        if v4 != 1 {
            causes.push(ips_invalid(
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !is_headless(m) {
        for (i, (ip, fam)) in ips.iter().zip(families.iter()).enumerate() {
            let is_v6 = ip.parse::<std::net::Ipv6Addr>().is_ok();
            if (fam == "IPv4" && is_v6) || (fam == "IPv6" && !is_v6) {
                let why = format!("expected an {fam} value as indicated by `ipFamilies[{i}]`");
                causes.push(validation::invalid(
                    format!("spec.clusterIPs[{i}]"),
                    json!(ip),
                    &why,
                ));
            }
        }
    }
    causes
}

/// Go's `%#v` of the `core.ServicePort` key the real server uses to find repeated ports, which
/// is what its Duplicate error prints.
pub(super) fn go_port_key(protocol: &str, port: i64) -> String {
    format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        json!(protocol)
    )
}

/// `validateServicePort`.
pub(super) fn port_causes(
    p: &Value,
    path: &str,
    require_name: bool,
    names: &mut HashSet<String>,
) -> Vec<Cause> {
    let mut causes = vec![];
    let name = p["name"].as_str().unwrap_or_default();
    if require_name && name.is_empty() {
        causes.push(validation::required(format!("{path}.name"), ""));
    } else if !name.is_empty() {
        causes.extend(validation::invalid_causes(
            &format!("{path}.name"),
            &json!(name),
            validation::dns1123_label(name),
        ));
        if !names.insert(name.to_string()) {
            causes.push(crate::validation::duplicate(
                format!("{path}.name"),
                json!(name),
            ));
        }
    }
    let port = p["port"].as_i64().unwrap_or(0);
    causes.extend(validation::invalid_causes(
        &format!("{path}.port"),
        &json!(port),
        validation::port_num(port),
    ));
    let proto = &p["protocol"];
    if !proto.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) {
        causes.push(validation::not_supported(
            format!("{path}.protocol"),
            proto,
            PROTOCOLS,
        ));
    }
    let target = format!("{path}.targetPort");
    match &p["targetPort"] {
        Value::Number(n) => {
            let t = n.as_i64().unwrap_or(0);
            causes.extend(validation::invalid_causes(
                &target,
                &json!(t),
                validation::port_num(t),
            ));
        }
        Value::String(s) => causes.extend(validation::invalid_causes(
            &target,
            &json!(s),
            validation::port_name(s),
        )),
        _ => {}
    }
    if let Some(app) = p["appProtocol"].as_str() {
        causes.extend(validation::invalid_causes(
            &format!("{path}.appProtocol"),
            &json!(app),
            validation::qualified_name(app),
        ));
    }
    causes
}

/// `ValidateService` (the parts a client can meet) plus the update rules for cluster IPs.
pub(super) fn validate(m: &Map<String, Value>, old: Option<&Map<String, Value>>) -> Vec<Cause> {
    let mut causes = vec![];
    let ty = spec_type(m);
    if let Some(old) = old
        && ty != "ExternalName"
        && spec_type(old) != "ExternalName"
    {
        let before = strings(old.get("clusterIPs"));
        let after = strings(m.get("clusterIPs"));
        let changed =
            |field: String, why: &str| validation::invalid(field, go_strings(&after), why);
        let both_headless = is_headless(old) && is_headless(m);
        if !both_headless {
            if before.len() == after.len() {
                for (i, ip) in before.iter().enumerate() {
                    if *ip != after[i] {
                        causes.push(changed(
                            format!("spec.clusterIPs[{i}]"),
                            "may not change once set",
                        ));
                    }
                }
            } else if after.is_empty() {
                causes.push(changed(
                    "spec.clusterIPs[0]".into(),
                    "primary clusterIP can not be unset",
                ));
            } else if !before.is_empty() && before[0] != after[0] {
                causes.push(changed(
                    "spec.clusterIPs[0]".into(),
                    "may not change once set",
                ));
            }
        }
    }
    let ports = ports_of(m);
    if ports.is_empty() && !is_headless(m) && ty != "ExternalName" {
        causes.push(validation::required("spec.ports", ""));
    }
    if ty == "ExternalName" {
        let set = |list: &str| !strings(m.get(list)).is_empty();
        let ip_fields = [
            ("clusterIPs", set("clusterIPs")),
            ("ipFamilies", set("ipFamilies")),
            ("ipFamilyPolicy", !missing(m, "ipFamilyPolicy")),
        ];
        for (field, _) in ip_fields.iter().filter(|(_, set)| *set) {
            let why = "may not be set for ExternalName services";
            causes.push(validation::forbidden(format!("spec.{field}"), why));
        }
        // A trailing dot only marks the name as fully qualified.
        let cname = str_of(m, "externalName");
        let cname = cname.strip_suffix('.').unwrap_or(cname);
        if cname.is_empty() {
            causes.push(validation::required("spec.externalName", ""));
        } else {
            causes.extend(validation::invalid_causes(
                "spec.externalName",
                &json!(cname),
                validation::dns1123_subdomain(cname),
            ));
        }
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        causes.extend(port_causes(
            p,
            &format!("spec.ports[{i}]"),
            ports.len() > 1,
            &mut names,
        ));
    }
    if let Some(selector) = m.get("selector").and_then(Value::as_object) {
        causes.extend(validation::label_causes(selector, "spec.selector"));
    }
    let affinity = str_of(m, "sessionAffinity");
    if !matches!(affinity, "None" | "ClientIP") {
        causes.push(validation::not_supported(
            "spec.sessionAffinity",
            &json!(affinity),
            &["ClientIP", "None"],
        ));
    }
    if ty != "ExternalName" {
        causes.extend(cluster_ip_field_causes(m));
    }
    if !TYPES.contains(&ty) {
        causes.push(validation::not_supported("spec.type", &json!(ty), TYPES));
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if node_port(p) != 0 {
                causes.push(validation::forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut node_ports = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let np = node_port(p);
        if np != 0 && !node_ports.insert((p["protocol"].as_str().unwrap_or_default(), np)) {
            causes.push(crate::validation::duplicate(
                format!("spec.ports[{i}].nodePort"),
                np,
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let proto = p["protocol"].as_str().unwrap_or_default();
        let port = p["port"].as_i64().unwrap_or(0);
        if !seen.insert((proto, port)) {
            causes.push(crate::validation::duplicate(
                format!("spec.ports[{i}]"),
                go_port_key(proto, port),
            ));
        }
    }
    causes
}

/// What the real server's decoder would refuse in the fields handled here, which this code
/// relies on being of the right shape.
pub(super) fn decode_error(m: &Map<String, Value>) -> Option<String> {
    let unmarshal = |found: &Value, field: &str, go: &str| {
        Some(format!(
            "json: cannot unmarshal {} into Go struct field {field} of type {go}",
            json_type(found)
        ))
    };
    match m.get("ports") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ports)) => {
            for p in ports {
                let Some(p) = p.as_object() else {
                    return unmarshal(p, "ServiceSpec.spec.ports", "v1.ServicePort");
                };
                for key in ["port", "nodePort"] {
                    match p.get(key) {
                        None | Some(Value::Null) => {}
                        Some(Value::Number(n)) if n.as_i64().is_some() => {}
                        Some(other) => {
                            return unmarshal(
                                other,
                                &format!("ServicePort.spec.ports.{key}"),
                                "int32",
                            );
                        }
                    }
                }
            }
        }
        Some(other) => return unmarshal(other, "ServiceSpec.spec.ports", "[]v1.ServicePort"),
    }
    match m.get("selector") {
        None | Some(Value::Null) => {}
        Some(Value::Object(sel)) => {
            if let Some(bad) = sel.values().find(|v| !v.is_string() && !v.is_null()) {
                return unmarshal(bad, "ServiceSpec.spec.selector", "string");
            }
        }
        Some(other) => {
            return unmarshal(other, "ServiceSpec.spec.selector", "map[string]string");
        }
    }
    for key in ["clusterIPs", "ipFamilies"] {
        match m.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
            Some(other) => return unmarshal(other, &format!("ServiceSpec.spec.{key}"), "[]string"),
        }
    }
    for key in [
        "type",
        "clusterIP",
        "sessionAffinity",
        "externalName",
        "externalTrafficPolicy",
    ] {
        match m.get(key) {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(other) => return unmarshal(other, &format!("ServiceSpec.spec.{key}"), "string"),
        }
    }
    None
}
