//! Cluster IPs from the service CIDR and node ports from the node-port range, read from the
//! stored Services under the store's write lock.

use crate::kinds::service::fields::SERVICES_KEY;
use crate::kinds::service::fields::{
    go_strings, is_headless, node_port, ports_of, set_strings, spec_type, strings,
};
use crate::status::{ApiError, Cause};
use crate::store::Inner;
use crate::validation;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// kubeadm's default `--service-cluster-ip-range`.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

pub(super) const CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);

pub(super) const CIDR_PREFIX: u32 = 12;

/// The first address of the range, which belongs to `default/kubernetes`.
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

pub(super) const NODE_PORT_MIN: i64 = 30000;

pub(super) const NODE_PORT_MAX: i64 = 32767;

/// The usable addresses: neither the network nor the broadcast address.
pub(super) fn ip_range() -> (u32, u32) {
    let size = 1u32 << (32 - CIDR_PREFIX);
    (CIDR_BASE + 1, CIDR_BASE + size - 2)
}

/// KEP-3070: dynamic allocation prefers the upper part of a range, leaving the lower part to
/// addresses and ports that users ask for by value. Returns how many values the lower part has.
pub(super) fn static_band(size: u64, step: u64, max: u64) -> u64 {
    const MIN: u64 = 16;
    if size <= MIN {
        return 0;
    }
    (size / step).clamp(MIN, max)
}

/// What the other Services hold.
pub(super) struct Taken {
    pub(super) ips: HashSet<u32>,
    pub(super) node_ports: HashSet<i64>,
}

pub(super) fn taken_by_others(inner: &Inner, ns: &str, name: &str) -> Taken {
    let mut t = Taken {
        ips: HashSet::new(),
        node_ports: HashSet::new(),
    };
    for ((n, nm), o) in inner.entries(SERVICES_KEY) {
        if n == ns && nm == name {
            continue;
        }
        let spec = &o.value["spec"];
        let ips = strings(spec.get("clusterIPs"))
            .into_iter()
            .chain(spec["clusterIP"].as_str().map(str::to_string));
        t.ips.extend(
            ips.filter_map(|ip| ip.parse::<Ipv4Addr>().ok())
                .map(u32::from),
        );
        let ports = spec["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(node_port);
        let health = spec["healthCheckNodePort"].as_i64();
        t.node_ports.extend(ports.chain(health).filter(|n| *n != 0));
    }
    t
}

/// Scans `[lo, hi]` from a random start, wrapping around, for a value `free` accepts.
pub(super) fn scan(lo: u64, hi: u64, free: impl Fn(u64) -> bool) -> Option<u64> {
    use rand::Rng;
    if lo > hi {
        return None;
    }
    let len = hi - lo + 1;
    let start = rand::rng().random_range(0..len);
    (0..len).map(|i| lo + (start + i) % len).find(|v| free(*v))
}

pub(super) fn next_free_ip(taken: &HashSet<u32>) -> Option<Ipv4Addr> {
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
pub(super) struct PortClaims<'a> {
    pub(super) taken: &'a HashSet<i64>,
    pub(super) claimed: HashSet<i64>,
}

impl PortClaims<'_> {
    /// Claims `port`; why it cannot be had, in the allocator's words, when it cannot.
    fn claim(&mut self, port: i64) -> Result<(), String> {
        if !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&port) {
            return Err(format!(
                "provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"
            ));
        }
        if self.taken.contains(&port) || !self.claimed.insert(port) {
            return Err("provided port is already allocated".into());
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

/// The Invalid error of the `i`th port's node port, which could not be claimed.
fn port_error(i: usize, port: i64, why: String) -> ApiError {
    invalid_one(validation::invalid(node_port_field(i), port, &why))
}

pub(super) fn should_allocate_node_ports(m: &Map<String, Value>) -> bool {
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
pub(super) fn init_node_ports(
    m: &mut Map<String, Value>,
    claims: &mut PortClaims,
) -> Result<(), ApiError> {
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
                        claims.claim(n).map_err(|why| port_error(i, n, why))?;
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
                    claims.claim(np).map_err(|why| port_error(i, np, why))?;
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
pub(super) fn update_node_ports(
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
                claims.claim(np).map_err(|why| port_error(i, np, why))?;
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

pub(super) fn node_port_field(i: usize) -> String {
    format!("spec.ports[{i}].nodePort")
}

pub(super) fn health_check_port(
    m: &mut Map<String, Value>,
    claims: &mut PortClaims,
) -> Result<(), ApiError> {
    let want = m
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if want != 0 {
        return claims.claim(want).map_err(|why| {
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
pub(super) fn invalid_one(c: Cause) -> ApiError {
    ApiError::invalid("", "Service", "", vec![c])
}

/// Allocates the cluster IPs the families call for (`allocClusterIPs`).
pub(super) fn alloc_cluster_ips(
    m: &mut Map<String, Value>,
    taken: &HashSet<u32>,
) -> Result<(), ApiError> {
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
        return Err(invalid_one(validation::invalid(
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
