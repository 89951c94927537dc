//! core/v1 Services as the real API server treats them: the v1 defaults, cluster IPs from the
//! service CIDR, node ports from the node-port range, and the validation around them.
//!
//! What is allocated is not recorded anywhere of its own: it is read from the stored Services,
//! under the store's write lock (so two writes cannot take the same address). Releasing on
//! delete and surviving a restart then need no extra state, and nothing can leak.

mod alloc;
mod defaults;
mod fields;
mod validate;

pub use alloc::KUBERNETES_SERVICE_IP;
pub use fields::SERVICES_KEY;

use crate::kinds::service::alloc::{
    PortClaims, alloc_cluster_ips, health_check_port, init_node_ports, taken_by_others,
    update_node_ports,
};
use crate::kinds::service::defaults::{
    apply_defaults, drop_type_dependent_fields, init_ip_families, normalize_cluster_ips,
    patch_allocated_values,
};
use crate::kinds::service::fields::{needs_health_check_port, needs_node_ports, spec_type};
use crate::kinds::service::validate::{decode_error, validate};
use crate::kinds::strategy::{Ctx, Strategy};
use crate::status::ApiError;
use crate::store::{Inner, Obj};
use crate::util::meta_str;
use crate::validation::json_type;
use crate::verbs::Sub;
use serde_json::{Map, Value, json};
use std::collections::HashSet;

/// Defaults, allocates and validates a Service being created (`old` is None) or updated, as
/// the real registry does, reading what is taken from `inner`.
pub fn prepare(v: &mut Value, old: Option<&Value>, inner: &Inner) -> Result<(), ApiError> {
    let name = meta_str(v, "name").to_string();
    let ns = meta_str(v, "namespace").to_string();
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
    ApiError::invalid_if_any("", "Service", &name, validate(&spec, old_spec))?;
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

/// Services: defaults, cluster IPs and node ports, and their validation.
pub(crate) struct ServiceStrategy;

impl Strategy for ServiceStrategy {
    fn prepare_create(&self, ctx: &Ctx, obj: &mut Value) -> Result<(), ApiError> {
        prepare(obj, None, ctx.inner)
    }

    fn prepare_update(
        &self,
        ctx: &Ctx,
        old: &Obj,
        new: &mut Value,
        sub: Sub,
    ) -> Result<(), ApiError> {
        if sub == Sub::Main {
            prepare(new, Some(&old.value), ctx.inner)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
