use super::{ClusterInfo, all, pass};
use crate::store::Store;

#[test]
fn a_fresh_cluster_has_each_namespace_its_defaults() {
    let store = Store::open(None).unwrap();
    let info = ClusterInfo {
        ca_pem: String::new(),
        signer: None,
    };
    crate::bootstrap(&store, &info).unwrap();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            store
                .get("/serviceaccounts", ns, "default", false)
                .is_some()
        );
        // No root-CA ConfigMap: nothing runs in a pod here to mount it.
        assert!(
            store
                .get("/configmaps", ns, "kube-root-ca.crt", false)
                .is_none()
        );
    }
    assert!(
        !pass(&store, &all(&info)),
        "a bootstrapped cluster is settled"
    );
}
