//! The leader Leases a component holds for this host, released when the host stops cleanly, as
//! client-go's leader election does with `ReleaseOnCancel`: the next host (a restart, with a new
//! `lethe_instance_id`) then takes them over at once rather than after `leaseDurationSeconds`.
//!
//! The Leases are the components' own (the guest SDK's `lease` writes them); the host learns of
//! them from the writes it carries: a privileged create or replace of a
//! `coordination.k8s.io/v1` Lease marked `app.kubernetes.io/managed-by: lethe` and naming this
//! host as its holder. Releasing one is itself guarded like every privileged write: it is read
//! first, written only if it still carries lethe's mark and still names this host, and replaced
//! with the resourceVersion read, so a Lease another host took meanwhile is never touched.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::Value as Json;

/// The label that marks a Lease as lethe's (the guest SDK's `lease::MANAGED_BY`).
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "lethe");

/// The Leases a component was last seen holding for this host, by namespace and name.
#[derive(Debug, Default)]
pub struct HeldLeases {
    held: Mutex<BTreeSet<(String, String)>>,
}

/// What releasing one Lease came to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Released {
    /// Written with no holder: another host may take it at once.
    Released,
    /// Left as it was: it is gone, no longer lethe's, or held by another host now.
    NotHeld,
}

impl HeldLeases {
    /// Notes a Lease the component wrote successfully as the privileged identity: remembered if
    /// it names `holder` and carries lethe's mark, forgotten if it names someone else.
    pub fn observe(&self, written: &lethe_kube::Object, holder: &str) {
        if !is_lease(&written.target) {
            return;
        }
        let Ok(body) = serde_json::from_str::<Json>(&written.json) else {
            return;
        };
        let key = (
            written.target.namespace.clone().unwrap_or_default(),
            written.target.name.clone(),
        );
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if is_ours(&body) && holder_of(&body) == holder {
            held.insert(key);
        } else {
            held.remove(&key);
        }
    }

    /// Whether no Lease is noted as held.
    pub fn is_empty(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }

    /// Releases every Lease noted as held for `holder`, through `client` (the component's
    /// privileged client), and logs each one released. Errors are logged and left: the Lease then
    /// lapses after its duration, as it did before release existed.
    pub async fn release_all(
        &self,
        client: &lethe_kube::KubeClient,
        holder: &str,
        component: &str,
    ) {
        let held = std::mem::take(
            &mut *self
                .held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (namespace, name) in held {
            match release(client, &namespace, &name, holder).await {
                Ok(Released::Released) => {
                    tracing::info!(component, "released Lease {namespace}/{name}")
                }
                Ok(Released::NotHeld) => {}
                Err(e) => {
                    tracing::warn!(component, "cannot release Lease {namespace}/{name}: {e}")
                }
            }
        }
    }
}

/// Reads Lease `namespace`/`name` and, if it is lethe's and names `holder`, writes it back with
/// no holder, guarded by the resourceVersion read.
async fn release(
    client: &lethe_kube::KubeClient,
    namespace: &str,
    name: &str,
    holder: &str,
) -> Result<Released, lethe_kube::KubeError> {
    let target =
        lethe_kube::ObjectRef::new("coordination.k8s.io/v1", "Lease", Some(namespace), name);
    let current = match client.get(&target).await {
        Ok(current) => current,
        Err(lethe_kube::KubeError::NotFound(_)) => return Ok(Released::NotHeld),
        Err(e) => return Err(e),
    };
    let Ok(mut body) = serde_json::from_str::<Json>(&current.json) else {
        return Ok(Released::NotHeld);
    };
    if !is_ours(&body) || holder_of(&body) != holder {
        return Ok(Released::NotHeld);
    }
    // As client-go releases: no holder, and the shortest duration the API allows.
    body["spec"]["holderIdentity"] = Json::String(String::new());
    body["spec"]["leaseDurationSeconds"] = Json::from(1);
    match client.replace(&target, &body.to_string()).await {
        Ok(_) => Ok(Released::Released),
        // Written by another host since it was read: theirs now.
        Err(lethe_kube::KubeError::Conflict(_) | lethe_kube::KubeError::NotFound(_)) => {
            Ok(Released::NotHeld)
        }
        Err(e) => Err(e),
    }
}

fn is_lease(target: &lethe_kube::ObjectRef) -> bool {
    target.kind == "Lease" && target.api_version == "coordination.k8s.io/v1"
}

fn is_ours(lease: &Json) -> bool {
    lease["metadata"]["labels"][MANAGED_BY.0].as_str() == Some(MANAGED_BY.1)
}

fn holder_of(lease: &Json) -> &str {
    lease["spec"]["holderIdentity"].as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(name: &str, holder: &str, marked: bool) -> lethe_kube::Object {
        let labels = if marked {
            serde_json::json!({ MANAGED_BY.0: MANAGED_BY.1 })
        } else {
            serde_json::json!({})
        };
        let json = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": { "name": name, "namespace": "ns", "labels": labels },
            "spec": { "holderIdentity": holder },
        });
        lethe_kube::Object {
            target: lethe_kube::ObjectRef::new("coordination.k8s.io/v1", "Lease", Some("ns"), name),
            metadata: Default::default(),
            json: json.to_string(),
        }
    }

    fn held(leases: &HeldLeases) -> Vec<String> {
        leases
            .held
            .lock()
            .expect("lock")
            .iter()
            .map(|(ns, n)| format!("{ns}/{n}"))
            .collect()
    }

    #[test]
    fn only_lethes_leases_naming_this_host_are_noted_and_a_takeover_forgets_one() {
        let leases = HeldLeases::default();
        leases.observe(&lease("mine", "me", true), "me");
        leases.observe(&lease("someone-elses", "other", true), "me");
        leases.observe(&lease("unmarked", "me", false), "me");
        let mut config_map = lease("cm", "me", true);
        config_map.target.kind = "ConfigMap".into();
        leases.observe(&config_map, "me");
        assert_eq!(held(&leases), vec!["ns/mine"]);
        // Written later naming another holder (this host handed it over): no longer ours.
        leases.observe(&lease("mine", "other", true), "me");
        assert!(held(&leases).is_empty());
    }
}
