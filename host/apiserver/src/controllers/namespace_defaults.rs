//! What every active namespace gets from the controller manager: the service-account
//! controller's `default` ServiceAccount.

use crate::controllers::controller::Controller;
use crate::controllers::shared::{builtin, create_own};
use crate::resources::NS_KEY;
use crate::store::Store;

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
/// service-account controller's `default` ServiceAccount. (The root-CA publisher's
/// `kube-root-ca.crt` is not published: nothing runs in a pod here to mount it.)
pub(super) fn namespace_defaults(store: &Store) -> bool {
    let Some(sa) = builtin("serviceaccounts") else {
        return false;
    };
    let missing: Vec<String> = store.read(|inner| {
        inner
            .entries(NS_KEY)
            .filter(|(_, o)| !o.deleting())
            .map(|((_, name), _)| name)
            .filter(|ns| inner.get(sa.key(), ns, "default").is_none())
            .cloned()
            .collect()
    });
    // A namespace that began terminating since the scan refuses it, as it should.
    missing.iter().fold(false, |changed, ns| {
        create_default_account(store, ns) | changed
    })
}

/// Gives every active namespace its `default` ServiceAccount.
pub struct NamespaceDefaults;

impl Controller for NamespaceDefaults {
    fn name(&self) -> &'static str {
        "namespace-defaults"
    }

    fn step(&self, store: &Store) -> bool {
        namespace_defaults(store)
    }
}
