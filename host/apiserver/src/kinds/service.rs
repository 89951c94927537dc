//! core/v1 Services: stored with the v1 defaults and validated in the real server's words, for
//! manifests such as `deploy/service.yaml` (`kubectl apply --dry-run=server -k deploy/`).
//!
//! Nothing here routes traffic, so nothing is allocated: a Service keeps the cluster IP its client
//! gave (none, `None` for a headless one, or an address) and gets no node ports. The types that
//! exist to be given node ports (`NodePort`, `LoadBalancer`) are refused rather than stored
//! without them, so no client reads a Service the real server would never have written.

use crate::kinds::pod_spec::default;
use crate::kinds::strategy::{Ctx, Strategy};
use crate::status::Cause;
use crate::store::Obj;
use crate::util::{ensure_obj, set_in};
use crate::validation;
use crate::verbs::Sub;
use crate::{status::ApiError, util::meta_str};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::net::IpAddr;

/// The store key of Services.
pub const SERVICES_KEY: &str = "/services";

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn ports_of(spec: &Map<String, Value>) -> Vec<Value> {
    spec.get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The v1 defaults (`SetDefaults_Service`) that do not depend on an allocation.
fn apply_defaults(m: &mut Map<String, Value>) {
    if str_of(m, "sessionAffinity").is_empty() {
        m.insert("sessionAffinity".into(), json!("None"));
    }
    match str_of(m, "sessionAffinity") {
        "None" => {
            m.remove("sessionAffinityConfig");
        }
        "ClientIP"
            if m.get("sessionAffinityConfig")
                .is_none_or(|c| c["clientIP"]["timeoutSeconds"].is_null()) =>
        {
            let config = json!({"clientIP": {"timeoutSeconds": 10800}});
            m.insert("sessionAffinityConfig".into(), config);
        }
        _ => {}
    }
    if str_of(m, "type").is_empty() {
        m.insert("type".into(), json!("ClusterIP"));
    }
    for p in m
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
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
    if str_of(m, "type") == "ClusterIP" {
        default(m, "internalTrafficPolicy", json!("Cluster"));
    }
}

/// `validateServicePort`: `names` holds the port names seen so far.
fn port_causes(
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
        let field = format!("{path}.name");
        causes.extend(validation::invalid_causes(
            &field,
            &json!(name),
            validation::dns1123_label(name),
        ));
        if !names.insert(name.to_string()) {
            causes.push(validation::duplicate(field, json!(name)));
        }
    }
    let port = p["port"].as_i64().unwrap_or(0);
    let field = format!("{path}.port");
    causes.extend(validation::invalid_causes(
        &field,
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
        Value::String(s) => {
            causes.extend(validation::invalid_causes(
                &target,
                &json!(s),
                validation::port_name(s),
            ));
        }
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

/// Go's `%#v` of the `core.ServicePort` key the real server uses to find repeated ports, which
/// is what its Duplicate error prints.
fn go_port_key(protocol: &str, port: i64) -> String {
    format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        json!(protocol)
    )
}

/// `ValidateService`, the parts a ClusterIP or ExternalName Service can meet, in its order, and
/// (on an update, `old` being the stored spec) that a cluster IP once set does not change.
fn validate(m: &Map<String, Value>, old: Option<&Map<String, Value>>) -> Vec<Cause> {
    let mut causes = vec![];
    let ty = str_of(m, "type");
    let ip = str_of(m, "clusterIP");
    if let Some(old) = old
        && !str_of(old, "clusterIP").is_empty()
        && ip != str_of(old, "clusterIP")
        && ty != "ExternalName"
    {
        let why = "may not change once set";
        causes.push(validation::invalid("spec.clusterIPs[0]", json!(ip), why));
    }
    let ports = ports_of(m);
    if ports.is_empty() && ip != "None" && ty != "ExternalName" {
        causes.push(validation::required("spec.ports", ""));
    }
    if ty == "ExternalName" {
        if !ip.is_empty() {
            let why = "may not be set for ExternalName services";
            causes.push(validation::forbidden("spec.clusterIPs", why));
        }
        // A trailing dot only marks the name as fully qualified.
        let cname = str_of(m, "externalName");
        let cname = cname.strip_suffix('.').unwrap_or(cname);
        if cname.is_empty() {
            causes.push(validation::required("spec.externalName", ""));
        } else {
            let errors = validation::dns1123_subdomain(cname);
            causes.extend(validation::invalid_causes(
                "spec.externalName",
                &json!(cname),
                errors,
            ));
        }
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        causes.extend(port_causes(p, &path, ports.len() > 1, &mut names));
    }
    if let Some(selector) = m.get("selector").and_then(Value::as_object) {
        causes.extend(validation::label_causes(selector, "spec.selector"));
    }
    let affinity = str_of(m, "sessionAffinity");
    if !matches!(affinity, "None" | "ClientIP") {
        let supported = &["ClientIP", "None"];
        causes.push(validation::not_supported(
            "spec.sessionAffinity",
            &json!(affinity),
            supported,
        ));
    }
    if ty != "ExternalName" && !ip.is_empty() && ip != "None" && ip.parse::<IpAddr>().is_err() {
        causes.push(validation::invalid(
            "spec.clusterIPs[0]",
            json!(ip),
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
    match ty {
        "ClusterIP" | "ExternalName" => {}
        "NodePort" | "LoadBalancer" => causes.push(validation::forbidden(
            "spec.type",
            "this cluster allocates no node ports; use ClusterIP or ExternalName",
        )),
        _ => {
            let supported = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
            causes.push(validation::not_supported(
                "spec.type",
                &json!(ty),
                supported,
            ));
        }
    }
    if ty == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if !p["nodePort"].is_null() && p["nodePort"] != 0 {
                let why = "may not be used when `type` is 'ClusterIP'";
                causes.push(validation::forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    why,
                ));
            }
        }
    }
    let mut seen = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let proto = p["protocol"].as_str().unwrap_or_default();
        let port = p["port"].as_i64().unwrap_or(0);
        if !seen.insert((proto, port)) {
            let key = go_port_key(proto, port);
            causes.push(validation::duplicate(format!("spec.ports[{i}]"), key));
        }
    }
    causes
}

/// Defaults and validates the Service `v` being created (`old` None) or updated; keeps
/// `clusterIPs` in step with `clusterIP`, as the registry does for a single-stack Service.
fn prepare(v: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    let name = meta_str(v, "name").to_string();
    // The body was decoded first, so `spec` is an object or absent; absent is the empty spec.
    let spec = ensure_obj(ensure_obj(v).entry("spec").or_insert(Value::Null));
    apply_defaults(spec);
    let old_spec = old.and_then(|o| o["spec"].as_object());
    let causes = validate(spec, old_spec);
    let ip = str_of(spec, "clusterIP").to_string();
    if !ip.is_empty() && str_of(spec, "type") != "ExternalName" {
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    ApiError::invalid_if_any("", "Service", &name, causes)?;
    if old.is_none() || !v["status"].is_object() {
        set_in(v, &["status"], json!({"loadBalancer": {}}));
    }
    Ok(())
}

/// Services: the v1 defaults and their validation.
pub(crate) struct ServiceStrategy;

impl Strategy for ServiceStrategy {
    fn prepare_create(&self, _ctx: &Ctx, obj: &mut Value) -> Result<(), ApiError> {
        prepare(obj, None)
    }

    fn prepare_update(
        &self,
        _ctx: &Ctx,
        old: &Obj,
        new: &mut Value,
        sub: Sub,
    ) -> Result<(), ApiError> {
        if sub == Sub::Main {
            prepare(new, Some(&old.value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
    }

    fn prepared(mut v: Value) -> Result<Value, ApiError> {
        prepare(&mut v, None).map(|()| v)
    }

    fn message(name: &str, spec: Value) -> String {
        prepared(svc(name, spec)).unwrap_err().message
    }

    #[test]
    fn a_plain_service_gets_the_v1_defaults_and_no_address() {
        let v = prepared(svc(
            "a",
            json!({"selector": {"app": "a"}, "ports": [{"port": 80}]}),
        ));
        let v = v.unwrap();
        let s = &v["spec"];
        assert_eq!(s["type"], "ClusterIP");
        assert_eq!(s["sessionAffinity"], "None");
        assert_eq!(s["internalTrafficPolicy"], "Cluster");
        assert_eq!(
            s["ports"],
            json!([{"port": 80, "protocol": "TCP", "targetPort": 80}])
        );
        assert!(s.get("clusterIP").is_none());
        assert_eq!(v["status"], json!({"loadBalancer": {}}));
        // A cluster IP the client gives is kept, in both fields, and may not change.
        let fixed = prepared(svc(
            "b",
            json!({"clusterIP": "10.96.0.9", "ports": [{"port": 80}]}),
        ));
        let fixed = fixed.unwrap();
        assert_eq!(fixed["spec"]["clusterIPs"], json!(["10.96.0.9"]));
        let mut moved = fixed.clone();
        moved["spec"]["clusterIP"] = json!("10.96.0.10");
        let e = prepare(&mut moved, Some(&fixed)).unwrap_err();
        assert!(
            e.message.contains(
                "spec.clusterIPs[0]: Invalid value: \"10.96.0.10\": may not change once set"
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn validation_speaks_like_the_real_server() {
        let err = prepared(svc(
            "a",
            json!({"type": "Fancy", "ports": [{"port": 0, "protocol": "ICMP"}, {"port": 80}]}),
        ))
        .unwrap_err();
        let fields: Vec<String> = err
            .details
            .as_ref()
            .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
            .unwrap_or_default();
        let want = [
            "spec.ports[0].name",
            "spec.ports[0].port",
            "spec.ports[0].protocol",
            "spec.ports[0].targetPort",
            "spec.ports[1].name",
            "spec.type",
        ];
        assert_eq!(fields, want);
        assert_eq!(
            message("b", json!({})),
            "Service \"b\" is invalid: spec.ports: Required value"
        );
        let np = message("c", json!({"ports": [{"port": 80, "nodePort": 30001}]}));
        let forbidden =
            "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'";
        assert!(np.contains(forbidden), "{np}");
        let lb = message(
            "d",
            json!({"type": "LoadBalancer", "ports": [{"port": 80}]}),
        );
        assert!(
            lb.contains("spec.type: Forbidden: this cluster allocates no node ports"),
            "{lb}"
        );
        let bad_ip = message(
            "e",
            json!({"clusterIP": "10.96.0.300", "ports": [{"port": 80}]}),
        );
        assert!(
            bad_ip.contains(
                "spec.clusterIPs[0]: Invalid value: \"10.96.0.300\": must be a valid IP address"
            ),
            "{bad_ip}"
        );
        prepared(svc("headless", json!({"clusterIP": "None"}))).unwrap();
        let external = message("f", json!({"type": "ExternalName"}));
        assert!(
            external.contains("spec.externalName: Required value"),
            "{external}"
        );
    }

    #[test]
    fn ports_must_be_distinct_and_well_named() {
        assert_eq!(
            message(
                "dup",
                json!({"ports": [{"name": "a", "port": 443}, {"name": "b", "port": 443}]})
            ),
            "Service \"dup\" is invalid: spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:443, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"
        );
        // The same number over another protocol is another port.
        let dns = json!({"ports": [{"name": "a", "port": 53}, {"name": "b", "port": 53, "protocol": "UDP"}]});
        prepared(svc("dns", dns)).unwrap();
        assert_eq!(
            message(
                "names",
                json!({"ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}, {"port": 3}, {"name": "a.b", "port": 4}]})
            ),
            "Service \"names\" is invalid: [spec.ports[1].name: Duplicate value: \"x\", spec.ports[2].name: Required value, spec.ports[3].name: Invalid value: \"a.b\": must not contain dots]"
        );
        assert_eq!(
            message(
                "tp",
                json!({"ports": [{"port": 80, "targetPort": "8080"}, {"name": "b", "port": 81, "targetPort": "a--very-long-name-"}]})
            ),
            "Service \"tp\" is invalid: [spec.ports[0].name: Required value, spec.ports[0].targetPort: Invalid value: \"8080\": must contain at least one letter (a-z), spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must be no more than 15 characters, spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must not contain consecutive hyphens, spec.ports[1].targetPort: Invalid value: \"a--very-long-name-\": must not begin or end with a hyphen]"
        );
    }

    #[test]
    fn selectors_are_label_maps() {
        let bad = message(
            "sel",
            json!({"selector": {"app": "-x"}, "ports": [{"port": 80}]}),
        );
        assert!(bad.starts_with("Service \"sel\" is invalid: spec.selector: Invalid value: \"-x\": a valid label must be"), "{bad}");
        let good = json!({"selector": {"app.kubernetes.io/name": "web", "tier": ""}, "ports": [{"port": 80}]});
        prepared(svc("good", good)).unwrap();
    }
}
