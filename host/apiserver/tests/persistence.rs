//! A restart on the same data directory keeps every object, the resourceVersion counter, the
//! admin token and added tokens.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{TestCluster, config_from_yaml};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use lethe_apiserver::{ApiServerConfig, start};
use serde_json::json;

#[tokio::test]
async fn a_restart_keeps_objects_counter_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || ApiServerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let c = TestCluster::embedded(cfg()).await;
    let (admin, last_rv) = {
        let server = c.server.as_ref().unwrap();
        assert_eq!(
            server.kubeconfig_path(),
            Some(dir.path().join("kubeconfig").as_path())
        );
        assert!(dir.path().join("cluster.db").exists());
        assert!(
            std::fs::read_to_string(dir.path().join("tokens.csv"))
                .unwrap()
                .contains("system:masters")
        );
        server.add_token("persisted-token", "pat", "pat-uid", &["devs"]);
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "keep"}})).unwrap();
        Api::<Namespace>::all(c.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": "cm", "finalizers": ["a.test/x"]}, "data": {"a": "1"}}),
        )
        .unwrap();
        Api::<ConfigMap>::namespaced(c.client.clone(), "keep")
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "things.lethe.test"},
            "spec": {"group": "lethe.test", "scope": "Namespaced",
                     "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
        }))
        .unwrap();
        Api::<CustomResourceDefinition>::all(c.client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("lethe.test", "v1", "Thing"),
            "things",
        );
        let thing = DynamicObject::new("t1", &ar).data(json!({"spec": {"n": 1}}));
        let created = Api::<DynamicObject>::namespaced_with(c.client.clone(), "keep", &ar)
            .create(&PostParams::default(), &thing)
            .await
            .unwrap();
        let rv: u64 = created.metadata.resource_version.unwrap().parse().unwrap();
        (server.admin_token().to_string(), rv)
    };
    c.shutdown().await;

    let server = start(cfg()).await.unwrap();
    assert_eq!(
        server.admin_token(),
        admin,
        "the admin token survives a restart"
    );
    let config =
        config_from_yaml(&std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap()).await;
    let client = kube::Client::try_from(config).unwrap();
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "keep")
        .get("cm")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["a"], "1");
    assert_eq!(
        cm.metadata.finalizers.unwrap(),
        vec!["a.test/x".to_string()]
    );
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("lethe.test", "v1", "Thing"),
        "things",
    );
    let things = Api::<DynamicObject>::namespaced_with(client.clone(), "keep", &ar);
    assert_eq!(things.get("t1").await.unwrap().data["spec"]["n"], 1);
    let list_rv: u64 = things
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    assert!(list_rv >= last_rv);
    let cm2: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "after"}})).unwrap();
    let after = Api::<ConfigMap>::namespaced(client.clone(), "keep")
        .create(&PostParams::default(), &cm2)
        .await
        .unwrap();
    let new_rv: u64 = after.metadata.resource_version.unwrap().parse().unwrap();
    assert!(
        new_rv > last_rv,
        "the counter continues: {new_rv} > {last_rv}"
    );
    let pat_yaml = server
        .kubeconfig_yaml()
        .replace(server.admin_token(), "persisted-token");
    let pat = kube::Client::try_from(config_from_yaml(&pat_yaml).await).unwrap();
    let e = Api::<ConfigMap>::namespaced(pat, "keep")
        .list(&ListParams::default())
        .await
        .unwrap_err();
    match e {
        kube::Error::Api(s) => assert_eq!(
            s.code, 403,
            "the added token authenticates (and is not authorized)"
        ),
        other => panic!("unexpected {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn the_tls_ca_survives_a_restart_so_old_kubeconfigs_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || ApiServerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        tls: true,
        ..Default::default()
    };
    let first = start(cfg()).await.unwrap();
    let old_yaml = first.kubeconfig_yaml();
    let port = first.url().rsplit(':').next().unwrap().to_string();
    first.shutdown().await;
    let second = start(ApiServerConfig {
        listen: format!("127.0.0.1:{port}").parse().unwrap(),
        ..cfg()
    })
    .await
    .unwrap();
    // The CA certificate itself is the same, so kubeconfigs do not change either.
    assert_eq!(second.kubeconfig_yaml(), old_yaml);
    let client = kube::Client::try_from(config_from_yaml(&old_yaml).await).unwrap();
    let nss = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        nss.items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("default"))
    );
    second.shutdown().await;
}

#[tokio::test]
async fn a_namespace_terminating_at_shutdown_finishes_after_a_restart() {
    use kube::api::{DeleteParams, Patch, PatchParams};
    let dir = tempfile::tempdir().unwrap();
    let cfg = || ApiServerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let c = TestCluster::embedded(cfg()).await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    let nss = Api::<Namespace>::all(c.client.clone());
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "held", "finalizers": ["a.test/hold"]}}),
    )
    .unwrap();
    Api::<ConfigMap>::namespaced(c.client.clone(), "doomed")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    nss.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    c.shutdown().await;

    let c = TestCluster::embedded(cfg()).await;
    let nss = Api::<Namespace>::all(c.client.clone());
    let n = nss.get("doomed").await.unwrap();
    assert_eq!(n.status.unwrap().phase.as_deref(), Some("Terminating"));
    Api::<ConfigMap>::namespaced(c.client.clone(), "doomed")
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while nss.get_opt("doomed").await.unwrap().is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the namespace was not finalized"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    c.shutdown().await;
}

/// `kubectl create token`'s request, answered with a signed token.
async fn request_token(client: &kube::Client, ns: &str, account: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}
    });
    let tr: TokenRequest = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_subresource("token", account, &PostParams::default(), &body)
        .await
        .unwrap();
    tr.status.and_then(|s| s.token).unwrap()
}

/// What a bearer token gets from a read it has no RBAC for: 403 when it authenticates.
async fn answer_for(kubeconfig_yaml: &str, admin: &str, token: &str) -> u16 {
    let yaml = kubeconfig_yaml.replace(admin, token);
    let client = kube::Client::try_from(config_from_yaml(&yaml).await).unwrap();
    match Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
    {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(other) => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn service_account_tokens_survive_a_restart_and_die_with_their_account() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::DeleteParams;
    let dir = tempfile::tempdir().unwrap();
    let cfg = || ApiServerConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let c = TestCluster::embedded(cfg()).await;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    let sas = Api::<ServiceAccount>::namespaced(c.client.clone(), "default");
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let token = request_token(&c.client, "default", "robot").await;
    assert_eq!(token.split('.').count(), 3, "a JWT");
    let server = c.server.as_ref().unwrap();
    let (yaml, admin) = (server.kubeconfig_yaml(), server.admin_token().to_string());
    assert_eq!(answer_for(&yaml, &admin, &token).await, 403);
    assert!(dir.path().join("sa.key").exists());
    c.shutdown().await;

    let c = TestCluster::embedded(cfg()).await;
    let server = c.server.as_ref().unwrap();
    let yaml = server.kubeconfig_yaml();
    assert_eq!(
        answer_for(&yaml, &admin, &token).await,
        403,
        "the token still authenticates after a restart"
    );
    // A ServiceAccount deleted and created again under the same name is another account.
    let sas = Api::<ServiceAccount>::namespaced(c.client.clone(), "default");
    sas.delete("robot", &DeleteParams::default()).await.unwrap();
    assert_eq!(answer_for(&yaml, &admin, &token).await, 401);
    sas.create(&PostParams::default(), &sa).await.unwrap();
    assert_eq!(answer_for(&yaml, &admin, &token).await, 401);
    let fresh = request_token(&c.client, "default", "robot").await;
    assert_eq!(answer_for(&yaml, &admin, &fresh).await, 403);
    c.shutdown().await;
}
