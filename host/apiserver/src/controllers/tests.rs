use super::namespace_defaults::ROOT_CA_CONFIGMAP;
use super::{ClusterInfo, all, pass};
use crate::store::Store;

#[test]
fn a_fresh_cluster_has_each_namespace_its_defaults() {
    let store = Store::open(None).unwrap();
    // Plain HTTP: no CA to publish, so the bundle is empty, as a controller manager
    // without a root CA would publish it.
    let info = ClusterInfo {
        ca_pem: String::new(),
        signer: None,
    };
    crate::bootstrap(&store, &info).unwrap();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let cm = store
            .get("/configmaps", ns, ROOT_CA_CONFIGMAP, false)
            .unwrap_or_else(|| panic!("no root CA in {ns}"));
        assert_eq!(cm.value["data"], serde_json::json!({"ca.crt": ""}));
        assert!(
            store
                .get("/serviceaccounts", ns, "default", false)
                .is_some()
        );
    }
    // A restart with a CA publishes it.
    let moved = ClusterInfo {
        ca_pem: "PEM".into(),
        signer: None,
    };
    while pass(&store, &all(&moved)) {}
    let cm = store
        .get("/configmaps", "default", ROOT_CA_CONFIGMAP, false)
        .unwrap();
    assert_eq!(cm.value["data"]["ca.crt"], "PEM");
}
