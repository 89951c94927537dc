//! What every active namespace gets from the controller manager: the service-account
//! controller's `default` ServiceAccount and the root-CA publisher's `kube-root-ca.crt`.

use crate::controllers::controller::{ClusterInfo, Controller};
use crate::controllers::shared::{builtin, create_own, unheard};
use crate::resources::NS_KEY;
use crate::store::{Obj, Store};
use crate::verbs;
use std::sync::Arc;

/// The ConfigMap every active namespace gets holding the cluster's CA bundle (`ca.crt`), kept
/// current by the root-CA publisher.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

pub(super) const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";

pub(super) const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Creates namespace `ns`'s `default` ServiceAccount; false if it could not (it exists, or the
/// namespace is gone or terminating).
pub fn create_default_account(store: &Store, ns: &str) -> bool {
    let Some(sa) = builtin("serviceaccounts") else {
        return false;
    };
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": ns},
    });
    create_own(store, sa, ns, body).is_ok()
}

/// What every active namespace gets from the controller manager, and clients expect: the
/// service-account controller's `default` ServiceAccount and the root-CA publisher's
/// `kube-root-ca.crt` ConfigMap (recreated when deleted, put back when changed).
pub(super) fn namespace_defaults(store: &Store, info: &ClusterInfo) -> bool {
    let (Some(sa), Some(cm)) = (builtin("serviceaccounts"), builtin("configmaps")) else {
        return false;
    };
    let wanted_data = serde_json::json!({"ca.crt": info.ca_pem});
    let ca_current = |o: &Obj| {
        o.value["data"] == wanted_data
            && o.value["metadata"]["annotations"][DESCRIPTION_ANNOTATION]
                .as_str()
                .is_some_and(|d| !d.is_empty())
    };
    type Work = (Vec<String>, Vec<String>, Vec<(String, Arc<Obj>)>);
    let (missing_sa, missing_ca, stale_ca): Work = store.read(|inner| {
        let active: Vec<&String> = inner
            .entries(NS_KEY)
            .filter(|(_, o)| !o.deleting())
            .map(|((_, name), _)| name)
            .collect();
        let mut work: Work = Default::default();
        for ns in active {
            if inner.get(sa.key(), ns, "default").is_none() {
                work.0.push(ns.clone());
            }
            match inner.get(cm.key(), ns, ROOT_CA_CONFIGMAP) {
                None => work.1.push(ns.clone()),
                Some(o) if !ca_current(o) => work.2.push((ns.clone(), o.clone())),
                Some(_) => {}
            }
        }
        work
    });
    let mut changed = false;
    // A namespace that began terminating since the scan refuses these, as it should.
    for ns in missing_sa {
        changed |= create_default_account(store, &ns);
    }
    for ns in missing_ca {
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ROOT_CA_CONFIGMAP,
                "namespace": ns,
                "annotations": {DESCRIPTION_ANNOTATION: ROOT_CA_DESCRIPTION},
            },
            "data": wanted_data,
        });
        changed |= create_own(store, cm, &ns, body).is_ok();
    }
    for (ns, o) in stale_ca {
        let mut v = o.value.clone();
        v["data"] = wanted_data.clone();
        crate::util::set_in(
            &mut v,
            &["metadata", "annotations", DESCRIPTION_ANNOTATION],
            serde_json::json!(ROOT_CA_DESCRIPTION),
        );
        let res = verbs::update(
            store,
            verbs::WriteTarget::main(cm, &ns, ROOT_CA_CONFIGMAP),
            v,
            verbs::WriteOpts::default(),
            &mut unheard(),
        );
        changed |= res.is_ok();
    }
    changed
}

/// Gives every active namespace its `default` ServiceAccount and root-CA ConfigMap.
pub struct NamespaceDefaults {
    /// The CA bundle the ConfigMap publishes.
    pub info: ClusterInfo,
}

impl Controller for NamespaceDefaults {
    fn name(&self) -> &'static str {
        "namespace-defaults"
    }

    fn step(&self, store: &Store) -> bool {
        namespace_defaults(store, &self.info)
    }
}
