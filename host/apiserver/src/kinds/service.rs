//! core/v1 Services: stored with the v1 defaults and validated in the real server's words, for
//! manifests such as `deploy/service.yaml` (`kubectl apply --dry-run=server -k deploy/`).
//!
//! Nothing here routes traffic, so nothing is allocated: a Service gets no cluster IP (unless it
//! is headless, `None`) and no node ports. Only `ClusterIP` Services are served; the other
//! types, and a cluster IP chosen by the client, are refused rather than stored without what the
//! real server would give them, so no client reads a Service the real server would never have
//! written.

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

/// The store key of Services.
pub const SERVICES_KEY: &str = "/services";

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The v1 defaults (`SetDefaults_Service`) of a `ClusterIP` Service.
fn apply_defaults(m: &mut Map<String, Value>) {
    default(m, "type", json!("ClusterIP"));
    default(m, "sessionAffinity", json!("None"));
    default(m, "internalTrafficPolicy", json!("Cluster"));
    for p in m
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        default(p, "protocol", json!("TCP"));
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
    let errors = match &p["targetPort"] {
        Value::Number(n) => validation::port_num(n.as_i64().unwrap_or(0)),
        Value::String(s) => validation::port_name(s),
        _ => vec![],
    };
    causes.extend(validation::invalid_causes(
        &target,
        &p["targetPort"],
        errors,
    ));
    causes
}

/// `ValidateService`, the parts a `ClusterIP` Service can meet, in its order; then what this
/// cluster does not serve.
fn validate(m: &Map<String, Value>) -> Vec<Cause> {
    let mut causes = vec![];
    let ip = str_of(m, "clusterIP");
    let ports = m
        .get("ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if ports.is_empty() && ip != "None" {
        causes.push(validation::required("spec.ports", ""));
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
    if affinity != "None" {
        let why = "this cluster balances no traffic; use None";
        causes.push(validation::forbidden("spec.sessionAffinity", why));
    }
    if !matches!(ip, "" | "None") {
        let why = "this cluster allocates no cluster IPs; leave it unset or use None";
        causes.push(validation::forbidden("spec.clusterIP", why));
    }
    match str_of(m, "type") {
        "ClusterIP" => {}
        ty @ ("ExternalName" | "NodePort" | "LoadBalancer") => causes.push(validation::forbidden(
            "spec.type",
            &format!("this cluster serves ClusterIP Services only, not {ty}"),
        )),
        ty => {
            let supported = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
            causes.push(validation::not_supported(
                "spec.type",
                &json!(ty),
                supported,
            ));
        }
    }
    causes
}

/// Defaults and validates the Service `v` being created or updated; a headless Service's
/// `clusterIPs` follow its `clusterIP`, as the registry keeps them for a single-stack Service.
fn prepare(v: &mut Value, created: bool) -> Result<(), ApiError> {
    let name = meta_str(v, "name").to_string();
    // The body was decoded first, so `spec` is an object or absent; absent is the empty spec.
    let spec = ensure_obj(ensure_obj(v).entry("spec").or_insert(Value::Null));
    apply_defaults(spec);
    let causes = validate(spec);
    if str_of(spec, "clusterIP") == "None" {
        spec.insert("clusterIPs".into(), json!(["None"]));
    }
    ApiError::invalid_if_any("", "Service", &name, causes)?;
    if created || !v["status"].is_object() {
        set_in(v, &["status"], json!({"loadBalancer": {}}));
    }
    Ok(())
}

/// Services: the v1 defaults and their validation.
pub(crate) struct ServiceStrategy;

impl Strategy for ServiceStrategy {
    fn prepare_create(&self, _ctx: &Ctx, obj: &mut Value) -> Result<(), ApiError> {
        prepare(obj, true)
    }

    fn prepare_update(
        &self,
        _ctx: &Ctx,
        _old: &Obj,
        new: &mut Value,
        sub: Sub,
    ) -> Result<(), ApiError> {
        if sub == Sub::Main {
            prepare(new, false)?;
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
        prepare(&mut v, true).map(|()| v)
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
        let headless = prepared(svc("h", json!({"clusterIP": "None"}))).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
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
        assert_eq!(
            message(
                "names",
                json!({"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2, "targetPort": "no_such"}]})
            ),
            "Service \"names\" is invalid: [spec.ports[1].name: Duplicate value: \"a\", spec.ports[1].targetPort: Invalid value: \"no_such\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)]"
        );
    }

    #[test]
    fn what_this_cluster_would_have_to_allocate_or_route_is_refused() {
        for (spec, field) in [
            (
                json!({"type": "LoadBalancer", "ports": [{"port": 80}]}),
                "spec.type: Forbidden: this cluster serves ClusterIP Services only, not LoadBalancer",
            ),
            (
                json!({"type": "ExternalName", "externalName": "db.example.com"}),
                "spec.type: Forbidden",
            ),
            (
                json!({"clusterIP": "10.96.0.9", "ports": [{"port": 80}]}),
                "spec.clusterIP: Forbidden",
            ),
            (
                json!({"sessionAffinity": "ClientIP", "ports": [{"port": 80}]}),
                "spec.sessionAffinity: Forbidden",
            ),
        ] {
            let m = message("x", spec);
            assert!(m.contains(field), "{m}");
        }
    }
}
