use super::namespace_defaults::ROOT_CA_CONFIGMAP;
use super::{ClusterInfo, all, pass};
use crate::store::Store;

#[test]
fn a_fresh_cluster_has_its_kubernetes_service_and_each_namespace_its_defaults() {
    let store = Store::open(None).unwrap();
    // Plain HTTP: no CA to publish, so the bundle is empty, as a controller manager
    // without a root CA would publish it.
    let info = ClusterInfo {
        ca_pem: String::new(),
        api_port: 6443,
        signer: None,
    };
    crate::bootstrap(&store, &info).unwrap();
    let svc = store
        .get("/services", "default", "kubernetes", false)
        .unwrap();
    assert_eq!(svc.value["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(svc.value["spec"]["ports"][0]["targetPort"], 6443);
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
    // A restart on another port points the Service there, keeping its address.
    let moved = ClusterInfo {
        ca_pem: "PEM".into(),
        api_port: 7000,
        signer: None,
    };
    while pass(&store, &all(&moved)) {}
    let svc = store
        .get("/services", "default", "kubernetes", false)
        .unwrap();
    assert_eq!(svc.value["spec"]["ports"][0]["targetPort"], 7000);
    assert_eq!(svc.value["spec"]["clusterIP"], "10.96.0.1");
    let cm = store
        .get("/configmaps", "default", ROOT_CA_CONFIGMAP, false)
        .unwrap();
    assert_eq!(cm.value["data"]["ca.crt"], "PEM");
}
