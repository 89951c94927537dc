//! core/v1 Services as the real API server treats them: the v1 defaults, cluster IPs from the
//! service CIDR, node ports from the node-port range, and the validation around them.
//!
//! What is allocated is not recorded anywhere of its own: it is read from the stored Services,
//! under the store's write lock (so two writes cannot take the same address). Releasing on
//! delete and surviving a restart then need no extra state, and nothing can leak.

use crate::status::{ApiError, Cause};
use crate::store::Inner;
use crate::validation::{self, json_type};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

pub const SERVICES_KEY: &str = "/services";
/// kubeadm's default `--service-cluster-ip-range`.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
const CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const CIDR_PREFIX: u32 = 12;
/// The first address of the range, which belongs to `default/kubernetes`.
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
const NODE_PORT_MIN: i64 = 30000;
const NODE_PORT_MAX: i64 = 32767;

const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];
const FAMILIES: &[&str] = &["IPv4", "IPv6"];

/// The usable addresses: neither the network nor the broadcast address.
fn ip_range() -> (u32, u32) {
    let size = 1u32 << (32 - CIDR_PREFIX);
    (CIDR_BASE + 1, CIDR_BASE + size - 2)
}

/// KEP-3070: dynamic allocation prefers the upper part of a range, leaving the lower part to
/// addresses and ports that users ask for by value. Returns how many values the lower part has.
fn static_band(size: u64, step: u64, max: u64) -> u64 {
    const MIN: u64 = 16;
    if size <= MIN {
        return 0;
    }
    (size / step).clamp(MIN, max)
}

/// A Go-style rendering of a `[]string` for field errors, as `%#v` prints it.
fn go_strings(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| json!(s).to_string()).collect();
    format!("[]string{{{}}}", items.join(", "))
}

fn invalid(field: impl Into<String>, value: impl std::fmt::Display, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {value}: {detail}"),
        field: field.into(),
    }
}

pub(crate) fn required(field: impl Into<String>) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        message: "Required value".into(),
        field: field.into(),
    }
}

fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden",
        message: format!("Forbidden: {detail}"),
        field: field.into(),
    }
}

pub(crate) fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| json!(s).to_string()).collect();
    Cause {
        reason: "FieldValueNotSupported",
        message: format!(
            "Unsupported value: {value}: supported values: {}",
            list.join(", ")
        ),
        field: field.into(),
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn set_strings(m: &mut Map<String, Value>, key: &str, v: &[String]) {
    if v.is_empty() {
        m.remove(key);
    } else {
        m.insert(key.into(), json!(v));
    }
}

fn ports_of(m: &Map<String, Value>) -> Vec<Value> {
    m.get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn node_port(p: &Value) -> i64 {
    p["nodePort"].as_i64().unwrap_or(0)
}

fn spec_type(m: &Map<String, Value>) -> &str {
    str_of(m, "type")
}

fn needs_cluster_ip(m: &Map<String, Value>) -> bool {
    spec_type(m) != "ExternalName"
}

fn needs_node_ports(m: &Map<String, Value>) -> bool {
    matches!(spec_type(m), "NodePort" | "LoadBalancer")
}

fn needs_health_check_port(m: &Map<String, Value>) -> bool {
    spec_type(m) == "LoadBalancer" && str_of(m, "externalTrafficPolicy") == "Local"
}

fn externally_accessible(m: &Map<String, Value>) -> bool {
    match spec_type(m) {
        "LoadBalancer" | "NodePort" => true,
        "ClusterIP" => m
            .get("externalIPs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
        _ => false,
    }
}

fn is_headless(m: &Map<String, Value>) -> bool {
    let ips = strings(m.get("clusterIPs"));
    ips.len() == 1 && ips[0] == "None"
}

fn has_selector(m: &Map<String, Value>) -> bool {
    m.get("selector")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty())
}

fn missing(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).is_none_or(Value::is_null)
}

/// The v1 defaults (`SetDefaults_Service`), applied as the request is decoded.
fn apply_defaults(m: &mut Map<String, Value>) {
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
fn normalize_cluster_ips(m: &mut Map<String, Value>, old: Option<&Map<String, Value>>) {
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
fn patch_allocated_values(m: &mut Map<String, Value>, old: &Map<String, Value>) {
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
fn drop_type_dependent_fields(
    m: &mut Map<String, Value>,
    old: &Map<String, Value>,
    status: &mut Value,
) {
    if needs_cluster_ip(old) && !needs_cluster_ip(m) {
        if strings(m.get("clusterIPs")) == strings(old.get("clusterIPs")) {
            m.remove("clusterIP");
            m.remove("clusterIPs");
        }
        if m.get("ipFamilies") == old.get("ipFamilies") {
            m.remove("ipFamilies");
        }
        if m.get("ipFamilyPolicy") == old.get("ipFamilyPolicy") {
            m.remove("ipFamilyPolicy");
        }
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
    if needs_health_check_port(old)
        && !needs_health_check_port(m)
        && m.get("healthCheckNodePort") == old.get("healthCheckNodePort")
    {
        m.remove("healthCheckNodePort");
    }
    let was_lb = spec_type(old) == "LoadBalancer";
    let is_lb = spec_type(m) == "LoadBalancer";
    if was_lb && !is_lb {
        if m.get("allocateLoadBalancerNodePorts").is_some()
            && m.get("allocateLoadBalancerNodePorts") == old.get("allocateLoadBalancerNodePorts")
        {
            m.remove("allocateLoadBalancerNodePorts");
        }
        if m.get("loadBalancerClass") == old.get("loadBalancerClass") {
            m.remove("loadBalancerClass");
        }
        *status = json!({"loadBalancer": {}});
    }
    if externally_accessible(old)
        && !externally_accessible(m)
        && m.get("externalTrafficPolicy") == old.get("externalTrafficPolicy")
    {
        m.remove("externalTrafficPolicy");
    }
}

/// The standalone checks of clusterIP(s), ipFamilies and ipFamilyPolicy
/// (`ValidateServiceClusterIPsRelatedFields`).
fn cluster_ip_field_causes(m: &Map<String, Value>) -> Vec<Cause> {
    if spec_type(m) == "ExternalName" {
        return vec![];
    }
    let mut causes = vec![];
    let ip = str_of(m, "clusterIP");
    let ips = strings(m.get("clusterIPs"));
    if !ip.is_empty() {
        if ips.is_empty() {
            causes.push(required("spec.clusterIPs"));
        } else if ips[0] != ip {
            causes.push(invalid(
                "spec.clusterIPs",
                go_strings(&ips),
                "first value must match `clusterIP`",
            ));
        }
    } else if !ips.is_empty() {
        causes.push(invalid(
            "spec.clusterIPs",
            go_strings(&ips),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families = strings(m.get("ipFamilies"));
    let mut seen = HashSet::new();
    for (i, f) in families.iter().enumerate() {
        if !FAMILIES.contains(&f.as_str()) {
            causes.push(not_supported(
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
        causes.push(not_supported("spec.ipFamilyPolicy", p, POLICIES));
    }
    let mut bad_ips = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && ip == "None" {
            if ips.len() > 1 {
                bad_ips = true;
                causes.push(invalid(
                    "spec.clusterIPs",
                    go_strings(&ips),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        if ip.parse::<IpAddr>().is_err() {
            bad_ips = true;
            causes.push(invalid(
                format!("spec.clusterIPs[{i}]"),
                json!(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    if ips.len() > 2 {
        causes.push(invalid(
            "spec.clusterIPs",
            go_strings(&ips),
            "may only hold up to 2 values",
        ));
    }
    if bad_ips {
        return causes;
    }
    if ips.len() > 1 {
        let v4 = ips.iter().filter(|s| s.parse::<Ipv4Addr>().is_ok()).count();
        if v4 != 1 {
            causes.push(invalid(
                "spec.clusterIPs",
                go_strings(&ips),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !is_headless(m) {
        for (i, (ip, fam)) in ips.iter().zip(families.iter()).enumerate() {
            let is_v6 = ip.parse::<std::net::Ipv6Addr>().is_ok();
            if fam == "IPv4" && is_v6 {
                causes.push(invalid(
                    format!("spec.clusterIPs[{i}]"),
                    json!(ip),
                    &format!("expected an IPv4 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
            if fam == "IPv6" && !is_v6 {
                causes.push(invalid(
                    format!("spec.clusterIPs[{i}]"),
                    json!(ip),
                    &format!("expected an IPv6 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
        }
    }
    causes
}

/// Defaults ipFamilyPolicy and ipFamilies for this single-stack IPv4 cluster and refuses what
/// it cannot serve (`initIPFamilyFields`).
fn init_ip_families(
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
            causes.push(invalid(
                "spec.ipFamilyPolicy",
                json!(policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            ));
        }
        if families.len() == 2 {
            causes.push(invalid(
                "spec.ipFamilyPolicy",
                json!(policy),
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            ));
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
                causes.push(invalid(
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
        causes.push(invalid(
            "spec.ipFamilyPolicy",
            json!(policy),
            "this cluster is not configured for dual-stack services",
        ));
    }
    for (i, f) in families.iter().enumerate() {
        if f != "IPv4" {
            causes.push(invalid(
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

/// What the other Services hold.
struct Taken {
    ips: HashSet<u32>,
    node_ports: HashSet<i64>,
}

fn taken_by_others(inner: &Inner, ns: &str, name: &str) -> Taken {
    let mut t = Taken {
        ips: HashSet::new(),
        node_ports: HashSet::new(),
    };
    for ((n, nm), o) in inner.entries(SERVICES_KEY) {
        if n == ns && nm == name {
            continue;
        }
        let spec = &o.value["spec"];
        for ip in strings(spec.get("clusterIPs")) {
            if let Ok(a) = ip.parse::<Ipv4Addr>() {
                t.ips.insert(u32::from(a));
            }
        }
        if let Ok(a) = spec["clusterIP"]
            .as_str()
            .unwrap_or_default()
            .parse::<Ipv4Addr>()
        {
            t.ips.insert(u32::from(a));
        }
        for p in spec["ports"].as_array().into_iter().flatten() {
            if node_port(p) != 0 {
                t.node_ports.insert(node_port(p));
            }
        }
        if let Some(hc) = spec["healthCheckNodePort"].as_i64().filter(|n| *n != 0) {
            t.node_ports.insert(hc);
        }
    }
    t
}

/// Scans `[lo, hi]` from a random start, wrapping around, for a value `free` accepts.
fn scan(lo: u64, hi: u64, free: impl Fn(u64) -> bool) -> Option<u64> {
    use rand::Rng;
    if lo > hi {
        return None;
    }
    let len = hi - lo + 1;
    let start = rand::rng().random_range(0..len);
    (0..len).map(|i| lo + (start + i) % len).find(|v| free(*v))
}

fn next_free_ip(taken: &HashSet<u32>) -> Option<Ipv4Addr> {
    let (first, last) = ip_range();
    let band = static_band(u64::from(last - first + 1), 16, 256);
    let free = |v: u64| u32::try_from(v).is_ok_and(|v| !taken.contains(&v));
    let lower_end = u64::from(first) + band;
    scan(lower_end, u64::from(last), free)
        .or_else(|| scan(u64::from(first), lower_end.saturating_sub(1), free))
        .and_then(|v| u32::try_from(v).ok())
        .map(Ipv4Addr::from)
}

/// Node ports this write claims, checked against the other Services.
struct PortClaims<'a> {
    taken: &'a HashSet<i64>,
    claimed: HashSet<i64>,
}

impl PortClaims<'_> {
    fn claim(&mut self, port: i64) -> Result<(), &'static str> {
        if !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&port) {
            return Err("not-in-range");
        }
        if self.taken.contains(&port) || !self.claimed.insert(port) {
            return Err("allocated");
        }
        Ok(())
    }

    fn next(&mut self) -> Option<i64> {
        let size = u64::try_from(NODE_PORT_MAX - NODE_PORT_MIN + 1).unwrap_or(0);
        let band = static_band(size, 32, 128);
        let lo = u64::try_from(NODE_PORT_MIN).unwrap_or(0);
        let hi = u64::try_from(NODE_PORT_MAX).unwrap_or(0);
        let free = |v: u64| {
            i64::try_from(v).is_ok_and(|v| !self.taken.contains(&v) && !self.claimed.contains(&v))
        };
        let found = scan(lo + band, hi, free).or_else(|| scan(lo, lo + band - 1, free))?;
        let port = i64::try_from(found).ok()?;
        self.claimed.insert(port);
        Some(port)
    }
}

fn port_error(field: String, port: i64, why: &str) -> Cause {
    let detail = match why {
        "not-in-range" => format!(
            "provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"
        ),
        _ => "provided port is already allocated".to_string(),
    };
    invalid(field, port, &detail)
}

fn should_allocate_node_ports(m: &Map<String, Value>) -> bool {
    match spec_type(m) {
        "NodePort" => true,
        "LoadBalancer" => m
            .get("allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => false,
    }
}

/// Node ports for a new Service (`initNodePorts`): one per service port number, requested
/// ones honoured when free.
fn init_node_ports(m: &mut Map<String, Value>, claims: &mut PortClaims) -> Result<(), ApiError> {
    let allocate = should_allocate_node_ports(m);
    let mut ports = ports_of(m);
    let mut by_service_port: std::collections::HashMap<i64, i64> = Default::default();
    let requested: Vec<(i64, i64)> = ports
        .iter()
        .map(|p| (p["port"].as_i64().unwrap_or(0), node_port(p)))
        .collect();
    for (i, p) in ports.iter_mut().enumerate() {
        let np = node_port(p);
        if np == 0 && !allocate {
            continue;
        }
        let svc_port = p["port"].as_i64().unwrap_or(0);
        match by_service_port.get(&svc_port).copied() {
            None => {
                // Ports with the same number share a node port, the one the client asked for
                // on any of them if it did.
                let want = requested
                    .iter()
                    .skip(i)
                    .find(|(sp, n)| *sp == svc_port && *n != 0)
                    .map(|(_, n)| *n);
                let got = match want {
                    Some(n) => {
                        claims
                            .claim(n)
                            .map_err(|why| invalid_one(port_error(node_port_field(i), n, why)))?;
                        n
                    }
                    None => claims.next().ok_or_else(|| {
                        ApiError::internal(
                            "failed to allocate a nodePort: range is full".to_string(),
                        )
                    })?,
                };
                p["nodePort"] = json!(got);
                by_service_port.insert(svc_port, got);
            }
            Some(shared) if np != shared => {
                if np == 0 {
                    p["nodePort"] = json!(shared);
                } else {
                    claims
                        .claim(np)
                        .map_err(|why| invalid_one(port_error(node_port_field(i), np, why)))?;
                }
            }
            Some(_) => {}
        }
    }
    m.insert("ports".into(), Value::Array(ports));
    Ok(())
}

/// Node ports on an update (`updateNodePorts`): the Service keeps what it had, new requests
/// must be free, missing ones are allocated.
fn update_node_ports(
    m: &mut Map<String, Value>,
    old: &Map<String, Value>,
    claims: &mut PortClaims,
) -> Result<(), ApiError> {
    let allocate = should_allocate_node_ports(m);
    let had: HashSet<i64> = ports_of(old).iter().map(node_port).collect();
    let mut ports = ports_of(m);
    for (i, p) in ports.iter_mut().enumerate() {
        let np = node_port(p);
        if np == 0 && !allocate {
            continue;
        }
        if np != 0 {
            if !had.contains(&np) && !claims.claimed.contains(&np) {
                claims
                    .claim(np)
                    .map_err(|why| invalid_one(port_error(node_port_field(i), np, why)))?;
            }
        } else {
            let got = claims.next().ok_or_else(|| {
                ApiError::internal("failed to allocate a nodePort: range is full".to_string())
            })?;
            p["nodePort"] = json!(got);
        }
    }
    m.insert("ports".into(), Value::Array(ports));
    Ok(())
}

fn node_port_field(i: usize) -> String {
    format!("spec.ports[{i}].nodePort")
}

fn health_check_port(m: &mut Map<String, Value>, claims: &mut PortClaims) -> Result<(), ApiError> {
    let want = m
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if want != 0 {
        return claims.claim(want).map_err(|why| {
            let why = match why {
                "not-in-range" => format!(
                    "provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"
                ),
                _ => "provided port is already allocated".into(),
            };
            ApiError::internal(format!(
                "failed to allocate requested HealthCheck NodePort {want}: {why}"
            ))
        });
    }
    let port = claims.next().ok_or_else(|| {
        ApiError::internal("failed to allocate a HealthCheck NodePort 0: range is full")
    })?;
    m.insert("healthCheckNodePort".into(), json!(port));
    Ok(())
}

/// An Invalid error whose Service name [`rename`] fills in.
fn invalid_one(c: Cause) -> ApiError {
    ApiError::invalid("", "Service", "", vec![c])
}

/// Allocates the cluster IPs the families call for (`allocClusterIPs`).
fn alloc_cluster_ips(m: &mut Map<String, Value>, taken: &HashSet<u32>) -> Result<(), ApiError> {
    if spec_type(m) == "ExternalName" || is_headless(m) {
        return Ok(());
    }
    let families = strings(m.get("ipFamilies"));
    let mut ips = strings(m.get("clusterIPs"));
    while ips.len() < families.len() {
        ips.push(String::new());
    }
    let shown = strings(m.get("clusterIPs"));
    let (first, last) = ip_range();
    for ip in ips.iter_mut().take(families.len()) {
        if ip.is_empty() {
            let got = next_free_ip(taken).ok_or_else(|| {
                ApiError::internal("failed to allocate a serviceIP: range is full")
            })?;
            *ip = got.to_string();
            continue;
        }
        let why = match ip.parse::<Ipv4Addr>().map(u32::from) {
            Ok(a) if a < first || a > last => format!(
                "provided IP is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
            ),
            Ok(a) if taken.contains(&a) => "provided IP is already allocated".into(),
            Ok(_) => continue,
            Err(_) => "provided IP is not valid".into(),
        };
        return Err(invalid_one(invalid(
            "spec.clusterIPs",
            go_strings(&shown),
            &format!("failed to allocate IP {ip}: {why}"),
        )));
    }
    if let Some(primary) = ips.first() {
        m.insert("clusterIP".into(), json!(primary));
    }
    set_strings(m, "clusterIPs", &ips);
    Ok(())
}

/// Go's `%#v` of the `core.ServicePort` key the real server uses to find repeated ports, which
/// is what its Duplicate error prints.
fn go_port_key(protocol: &str, port: i64) -> String {
    format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        json!(protocol)
    )
}

/// `validateServicePort`.
fn port_causes(
    p: &Value,
    path: &str,
    require_name: bool,
    names: &mut HashSet<String>,
) -> Vec<Cause> {
    let mut causes = vec![];
    let name = p["name"].as_str().unwrap_or_default();
    if require_name && name.is_empty() {
        causes.push(required(format!("{path}.name")));
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
        causes.push(not_supported(format!("{path}.protocol"), proto, PROTOCOLS));
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
fn validate(m: &Map<String, Value>, old: Option<&Map<String, Value>>) -> Vec<Cause> {
    let mut causes = vec![];
    let ty = spec_type(m);
    if let Some(old) = old
        && ty != "ExternalName"
        && spec_type(old) != "ExternalName"
    {
        let before = strings(old.get("clusterIPs"));
        let after = strings(m.get("clusterIPs"));
        let both_headless = is_headless(old) && is_headless(m);
        if !both_headless {
            if before.len() == after.len() {
                for (i, ip) in before.iter().enumerate() {
                    if *ip != after[i] {
                        causes.push(invalid(
                            format!("spec.clusterIPs[{i}]"),
                            go_strings(&after),
                            "may not change once set",
                        ));
                    }
                }
            } else if after.is_empty() {
                causes.push(invalid(
                    "spec.clusterIPs[0]",
                    go_strings(&after),
                    "primary clusterIP can not be unset",
                ));
            } else if !before.is_empty() && before[0] != after[0] {
                causes.push(invalid(
                    "spec.clusterIPs[0]",
                    go_strings(&after),
                    "may not change once set",
                ));
            }
        }
    }
    let ports = ports_of(m);
    if ports.is_empty() && !is_headless(m) && ty != "ExternalName" {
        causes.push(required("spec.ports"));
    }
    if ty == "ExternalName" {
        if !strings(m.get("clusterIPs")).is_empty() {
            causes.push(forbidden(
                "spec.clusterIPs",
                "may not be set for ExternalName services",
            ));
        }
        if !strings(m.get("ipFamilies")).is_empty() {
            causes.push(forbidden(
                "spec.ipFamilies",
                "may not be set for ExternalName services",
            ));
        }
        if !missing(m, "ipFamilyPolicy") {
            causes.push(forbidden(
                "spec.ipFamilyPolicy",
                "may not be set for ExternalName services",
            ));
        }
        // A trailing dot only marks the name as fully qualified.
        let cname = str_of(m, "externalName");
        let cname = cname.strip_suffix('.').unwrap_or(cname);
        if cname.is_empty() {
            causes.push(required("spec.externalName"));
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
        causes.push(not_supported(
            "spec.sessionAffinity",
            &json!(affinity),
            &["ClientIP", "None"],
        ));
    }
    if ty != "ExternalName" {
        causes.extend(cluster_ip_field_causes(m));
    }
    if !TYPES.contains(&ty) {
        causes.push(not_supported("spec.type", &json!(ty), TYPES));
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if node_port(p) != 0 {
                causes.push(forbidden(
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
fn decode_error(m: &Map<String, Value>) -> Option<String> {
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

/// Defaults, allocates and validates a Service being created (`old` is None) or updated, as
/// the real registry does, reading what is taken from `inner`.
pub fn prepare(v: &mut Value, old: Option<&Value>, inner: &Inner) -> Result<(), ApiError> {
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = v["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let with_name = |e: ApiError| rename(e, &name);
    let obj = crate::util::ensure_obj(v);
    let mut spec = match obj.remove("spec") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal {} into Go struct field Service.spec of type v1.ServiceSpec",
                json_type(&other)
            )));
        }
    };
    if let Some(bad) = decode_error(&spec) {
        return Err(ApiError::bad_request(format!(
            "Service in version \"v1\" cannot be handled as a Service: {bad}"
        )));
    }
    let mut status = obj.remove("status").unwrap_or(Value::Null);
    let old_spec = old.and_then(|o| o["spec"].as_object());
    apply_defaults(&mut spec);
    normalize_cluster_ips(&mut spec, old_spec);
    if let Some(o) = old_spec {
        patch_allocated_values(&mut spec, o);
        drop_type_dependent_fields(&mut spec, o, &mut status);
    }
    init_ip_families(&mut spec, old_spec)
        .map_err(|c| ApiError::invalid("", "Service", &name, c))?;
    let taken = taken_by_others(inner, &ns, &name);
    let from_external_name = old_spec.is_some_and(|o| spec_type(o) == "ExternalName");
    if old_spec.is_none() || from_external_name {
        alloc_cluster_ips(&mut spec, &taken.ips).map_err(with_name)?;
    }
    let mut claims = PortClaims {
        taken: &taken.node_ports,
        claimed: HashSet::new(),
    };
    if needs_node_ports(&spec) {
        match old_spec {
            None => init_node_ports(&mut spec, &mut claims),
            Some(o) => update_node_ports(&mut spec, o, &mut claims),
        }
        .map_err(with_name)?;
    }
    let had_health_check = old_spec.is_some_and(needs_health_check_port);
    if needs_health_check_port(&spec) && !had_health_check {
        health_check_port(&mut spec, &mut claims)?;
    }
    let causes = validate(&spec, old_spec);
    if !causes.is_empty() {
        return Err(ApiError::invalid("", "Service", &name, causes));
    }
    if old.is_none() || !status.is_object() {
        status = json!({"loadBalancer": {}});
    }
    let obj = crate::util::ensure_obj(v);
    obj.insert("spec".into(), Value::Object(spec));
    obj.insert("status".into(), status);
    Ok(())
}

/// Puts the Service's name into an Invalid error built before it was known.
fn rename(e: ApiError, name: &str) -> ApiError {
    match e.details {
        Some(d) if e.code == 422 => ApiError::invalid("", "Service", name, d.causes),
        details => ApiError { details, ..e },
    }
}

/// The `kubernetes` Service in `default`, as the API server keeps it: its address is the
/// first of the range, its port forwards to the server's own.
pub fn kubernetes_service(api_port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": api_port}],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn spec(v: &Value) -> &Value {
        &v["spec"]
    }

    fn svc(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
    }

    fn prepared(store: &Store, mut v: Value, old: Option<&Value>) -> Result<Value, ApiError> {
        store.read(|inner| prepare(&mut v, old, inner))?;
        Ok(v)
    }

    fn put(store: &Store, v: &Value) {
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        store
            .mutate(SERVICES_KEY, "ns", &name, |_, _| {
                Ok((crate::store::Change::Put(v.clone()), ()))
            })
            .unwrap();
    }

    #[test]
    fn a_plain_service_gets_the_v1_defaults_and_an_address_from_the_upper_band() {
        let store = Store::open(None).unwrap();
        let v = prepared(
            &store,
            svc(
                "a",
                json!({"selector": {"app": "a"}, "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap();
        let s = spec(&v);
        assert_eq!(s["type"], "ClusterIP");
        assert_eq!(s["sessionAffinity"], "None");
        assert_eq!(s["internalTrafficPolicy"], "Cluster");
        assert_eq!(s["ipFamilies"], json!(["IPv4"]));
        assert_eq!(s["ipFamilyPolicy"], "SingleStack");
        assert_eq!(
            s["ports"],
            json!([{"port": 80, "protocol": "TCP", "targetPort": 80}])
        );
        assert!(s.get("externalTrafficPolicy").is_none());
        let ip: Ipv4Addr = s["clusterIP"].as_str().unwrap().parse().unwrap();
        assert_eq!(s["clusterIPs"], json!([ip.to_string()]));
        let n = u32::from(ip);
        assert!(
            (CIDR_BASE + 257..=CIDR_BASE + (1 << 20) - 2).contains(&n),
            "{ip}"
        );
        assert_eq!(v["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn requested_addresses_are_honoured_once_and_must_be_in_range() {
        let store = Store::open(None).unwrap();
        let first = prepared(
            &store,
            svc(
                "a",
                json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap();
        assert_eq!(spec(&first)["clusterIPs"], json!(["10.96.0.10"]));
        put(&store, &first);
        let again = prepared(
            &store,
            svc(
                "b",
                json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap_err();
        assert_eq!(again.code, 422);
        assert_eq!(
            again.message,
            "Service \"b\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.10\"}: failed to allocate IP 10.96.0.10: provided IP is already allocated"
        );
        // The same Service may keep it on a re-create of its own name (after a delete).
        assert!(
            prepared(
                &store,
                svc(
                    "a",
                    json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]})
                ),
                None
            )
            .is_ok()
        );
        let outside = prepared(
            &store,
            svc(
                "c",
                json!({"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap_err();
        assert!(
            outside.message.ends_with(
                "failed to allocate IP 192.168.0.1: provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12"
            ),
            "{}",
            outside.message
        );
        let bad = prepared(
            &store,
            svc("d", json!({"clusterIP": "nope", "ports": [{"port": 80}]})),
            None,
        )
        .unwrap_err();
        assert!(
            bad.message.contains(
                "spec.clusterIPs[0]: Invalid value: \"nope\": must be a valid IP address"
            ),
            "{}",
            bad.message
        );
    }

    #[test]
    fn headless_and_external_name_services_get_no_address() {
        let store = Store::open(None).unwrap();
        let h = prepared(
            &store,
            svc(
                "h",
                json!({"clusterIP": "None", "selector": {"app": "h"}, "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap();
        assert_eq!(spec(&h)["clusterIPs"], json!(["None"]));
        assert_eq!(spec(&h)["ipFamilyPolicy"], "SingleStack");
        assert_eq!(spec(&h)["ipFamilies"], json!(["IPv4"]));
        let bare = prepared(&store, svc("hb", json!({"clusterIP": "None"})), None).unwrap();
        assert_eq!(spec(&bare)["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(spec(&bare)["ipFamilies"], json!(["IPv4", "IPv6"]));
        let e = prepared(
            &store,
            svc(
                "e",
                json!({"type": "ExternalName", "externalName": "db.example.com"}),
            ),
            None,
        )
        .unwrap();
        let s = spec(&e);
        assert!(s.get("clusterIP").is_none() && s.get("ipFamilies").is_none());
        assert!(s.get("internalTrafficPolicy").is_none());
        let no_name =
            prepared(&store, svc("e2", json!({"type": "ExternalName"})), None).unwrap_err();
        assert!(
            no_name
                .message
                .contains("spec.externalName: Required value")
        );
    }

    #[test]
    fn updates_keep_the_address_and_may_not_change_it() {
        let store = Store::open(None).unwrap();
        let created = prepared(&store, svc("a", json!({"ports": [{"port": 80}]})), None).unwrap();
        put(&store, &created);
        let ip = spec(&created)["clusterIP"].clone();
        let resent = prepared(
            &store,
            svc("a", json!({"ports": [{"port": 81}]})),
            Some(&created),
        )
        .unwrap();
        assert_eq!(spec(&resent)["clusterIP"], ip);
        assert_eq!(spec(&resent)["clusterIPs"], json!([ip]));
        let mut moved = created.clone();
        moved["spec"]["clusterIP"] = json!("10.96.0.99");
        let err = prepared(&store, moved, Some(&created)).unwrap_err();
        assert_eq!(
            err.message,
            "Service \"a\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.99\"}: may not change once set"
        );
        // To ExternalName: the address is dropped (and so released).
        let mut external = created.clone();
        external["spec"]["type"] = json!("ExternalName");
        external["spec"]["externalName"] = json!("x.example.com");
        let e = prepared(&store, external, Some(&created)).unwrap();
        assert!(spec(&e).get("clusterIP").is_none(), "{e}");
        assert!(spec(&e).get("ipFamilyPolicy").is_none(), "{e}");
    }

    #[test]
    fn node_ports_are_allocated_honoured_and_checked() {
        let store = Store::open(None).unwrap();
        let a = prepared(
            &store,
            svc(
                "a",
                json!({"type": "NodePort", "ports": [{"name": "x", "port": 80, "nodePort": 30080}, {"name": "y", "port": 81}]}),
            ),
            None,
        )
        .unwrap();
        let ports = &spec(&a)["ports"];
        assert_eq!(ports[0]["nodePort"], 30080);
        let second = ports[1]["nodePort"].as_i64().unwrap();
        assert!((30086..=32767).contains(&second), "{second}");
        assert_eq!(spec(&a)["externalTrafficPolicy"], "Cluster");
        put(&store, &a);
        let clash = prepared(
            &store,
            svc(
                "b",
                json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
            ),
            None,
        )
        .unwrap_err();
        assert_eq!(
            clash.message,
            "Service \"b\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        );
        let outside = prepared(
            &store,
            svc(
                "b",
                json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 8080}]}),
            ),
            None,
        )
        .unwrap_err();
        assert!(outside.message.ends_with(
            "spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"
        ));
        // An update that leaves the node ports out keeps them.
        let resent = prepared(
            &store,
            svc(
                "a",
                json!({"type": "NodePort", "ports": [{"name": "x", "port": 80}, {"name": "y", "port": 81}]}),
            ),
            Some(&a),
        )
        .unwrap();
        assert_eq!(spec(&resent)["ports"], spec(&a)["ports"]);
        // Back to ClusterIP: the node ports go.
        let mut plain = a.clone();
        plain["spec"]["type"] = json!("ClusterIP");
        let p = prepared(&store, plain, Some(&a)).unwrap();
        assert!(p["spec"]["ports"][0].get("nodePort").is_none(), "{p}");
        assert!(p["spec"].get("externalTrafficPolicy").is_none(), "{p}");
        let lb = prepared(
            &store,
            svc(
                "lb",
                json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 443}]}),
            ),
            None,
        )
        .unwrap();
        assert_eq!(spec(&lb)["allocateLoadBalancerNodePorts"], true);
        assert!(spec(&lb)["healthCheckNodePort"].as_i64().is_some());
        assert!(spec(&lb)["ports"][0]["nodePort"].as_i64().is_some());
    }

    #[test]
    fn validation_speaks_like_the_real_server() {
        let store = Store::open(None).unwrap();
        let err = prepared(
            &store,
            svc(
                "a",
                json!({"type": "Fancy", "ports": [{"port": 0, "protocol": "ICMP"}, {"port": 80}]}),
            ),
            None,
        )
        .unwrap_err();
        let fields: Vec<String> = err
            .details
            .as_ref()
            .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
            .unwrap_or_default();
        assert_eq!(
            fields,
            [
                "spec.ports[0].name",
                "spec.ports[0].port",
                "spec.ports[0].protocol",
                "spec.ports[0].targetPort",
                "spec.ports[1].name",
                "spec.type",
            ]
        );
        let none = prepared(&store, svc("b", json!({})), None).unwrap_err();
        assert_eq!(
            none.message,
            "Service \"b\" is invalid: spec.ports: Required value"
        );
        let np = prepared(
            &store,
            svc("c", json!({"ports": [{"port": 80, "nodePort": 30001}]})),
            None,
        )
        .unwrap_err();
        assert!(
            np.message.contains(
                "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
            ),
            "{}",
            np.message
        );
        let dual = prepared(
            &store,
            svc(
                "d",
                json!({"ipFamilyPolicy": "RequireDualStack", "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap_err();
        assert!(dual.message.contains(
            "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"
        ));
    }

    fn message(store: &Store, name: &str, spec: Value) -> String {
        prepared(store, svc(name, spec), None).unwrap_err().message
    }

    #[test]
    fn ports_must_be_distinct_and_well_named() {
        let store = Store::open(None).unwrap();
        assert_eq!(
            message(
                &store,
                "dup",
                json!({"ports": [{"name": "a", "port": 443}, {"name": "b", "port": 443}]})
            ),
            "Service \"dup\" is invalid: spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:443, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"
        );
        // The same number over another protocol is another port.
        prepared(
            &store,
            svc(
                "dns",
                json!({"ports": [{"name": "a", "port": 53}, {"name": "b", "port": 53, "protocol": "UDP"}]}),
            ),
            None,
        )
        .unwrap();
        assert_eq!(
            message(
                &store,
                "names",
                json!({"ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}, {"port": 3}, {"name": "a.b", "port": 4}]})
            ),
            "Service \"names\" is invalid: [spec.ports[1].name: Duplicate value: \"x\", spec.ports[2].name: Required value, spec.ports[3].name: Invalid value: \"a.b\": must not contain dots]"
        );
        // A single port needs no name.
        prepared(&store, svc("one", json!({"ports": [{"port": 80}]})), None).unwrap();
        assert_eq!(
            message(
                &store,
                "tp",
                json!({"ports": [{"port": 80, "targetPort": "8080"}, {"name": "b", "port": 81, "targetPort": "a--very-long-name-"}]})
            ),
            "Service \"tp\" is invalid: [spec.ports[0].name: Required value, spec.ports[0].targetPort: Invalid value: \"8080\": must contain at least one letter (a-z), spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must be no more than 15 characters, spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must not contain consecutive hyphens, spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must not begin or end with a hyphen]"
        );
        assert!(
            message(
                &store,
                "app",
                json!({"ports": [{"port": 80, "appProtocol": "a/b/c"}]})
            )
            .starts_with(
                "Service \"app\" is invalid: spec.ports[0].appProtocol: Invalid value: \"a/b/c\": a qualified name must consist"
            )
        );
    }

    #[test]
    fn selectors_are_label_maps() {
        let store = Store::open(None).unwrap();
        assert_eq!(
            message(
                &store,
                "sel",
                json!({"selector": {"app": "-x", "bad key": "ok"}, "ports": [{"port": 80}]})
            ),
            "Service \"sel\" is invalid: [spec.selector: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), spec.selector: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]"
        );
        let err = prepared(
            &store,
            svc(
                "n",
                json!({"selector": {"app": 1}, "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .ends_with("json: cannot unmarshal number into Go struct field ServiceSpec.spec.selector of type string"),
            "{}",
            err.message
        );
        prepared(
            &store,
            svc(
                "good",
                json!({"selector": {"app.kubernetes.io/name": "web", "tier": ""}, "ports": [{"port": 80}]}),
            ),
            None,
        )
        .unwrap();
    }

    #[test]
    fn the_dynamic_scan_skips_taken_addresses() {
        let (first, _) = ip_range();
        let mut taken: HashSet<u32> = HashSet::new();
        // Leave one free address in the upper band.
        let (lo, hi) = (first + 256, first + 256 + 9);
        for a in lo..=hi {
            taken.insert(a);
        }
        let got = scan(u64::from(lo), u64::from(hi) + 1, |v| {
            u32::try_from(v).is_ok_and(|v| !taken.contains(&v))
        });
        assert_eq!(got, Some(u64::from(hi) + 1));
        assert_eq!(static_band(2768, 32, 128), 86);
        assert_eq!(static_band((1 << 20) - 2, 16, 256), 256);
    }
}
