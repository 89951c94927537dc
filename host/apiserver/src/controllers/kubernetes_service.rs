//! The API server's bootstrap controller: the `default/kubernetes` Service.

use crate::controllers::controller::{ClusterInfo, Controller};
use crate::controllers::shared::{builtin, create_own, unheard};
use crate::resources::NS_KEY;
use crate::store::Store;
use crate::verbs;

/// The API server's own `default/kubernetes` Service: created when missing, its ports put
/// back when they differ, as the real server's bootstrap controller does.
pub fn kubernetes_service(store: &Store, info: &ClusterInfo) -> bool {
    let Some(svc) = builtin("services") else {
        return false;
    };
    let wanted = crate::kinds::service::kubernetes_service(info.api_port);
    let current = store.get(svc.key(), "default", "kubernetes", false);
    let result = match current {
        Some(o) if o.deleting() => return false,
        Some(o) => {
            let ports_ok = o.value["spec"]["ports"] == wanted["spec"]["ports"];
            if ports_ok && o.value["spec"]["type"] == "ClusterIP" {
                return false;
            }
            let mut v = o.value.clone();
            v["spec"]["ports"] = wanted["spec"]["ports"].clone();
            v["spec"]["type"] = serde_json::json!("ClusterIP");
            verbs::update(
                store,
                verbs::WriteTarget::main(svc, "default", "kubernetes"),
                v,
                verbs::WriteOpts::default(),
                &mut unheard(),
            )
            .map(|_| ())
        }
        None => {
            let default_active = store
                .get(NS_KEY, "", "default", false)
                .is_some_and(|n| !n.deleting());
            if !default_active {
                return false;
            }
            create_own(store, svc, "default", wanted).map(|_| ())
        }
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("kubernetes service: {e}");
            false
        }
    }
}

/// Keeps the `default/kubernetes` Service pointing at the server's port.
pub struct KubernetesService {
    /// The port the Service forwards to.
    pub info: ClusterInfo,
}

impl Controller for KubernetesService {
    fn name(&self) -> &'static str {
        "kubernetes-service"
    }

    fn step(&self, store: &Store) -> bool {
        kubernetes_service(store, &self.info)
    }
}
