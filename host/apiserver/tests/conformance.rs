//! Conformance scenarios written against the `kube` crate. They run against `KUBECONFIG` when it
//! is set, else against the embedded server in memory.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{TestCluster, api_error, eventually, suffix};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
use kube::core::Status;
use serde_json::{Value, json};
use std::time::Duration;

/// Every ConfigMap the suite creates carries this label, so that lists can ignore what a real
/// cluster puts into namespaces by itself (such as `kube-root-ca.crt`).
const OURS: &str = "lethe-test=yes";

fn ours() -> ListParams {
    ListParams::default().labels(OURS)
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    let mut labels = labels;
    labels["lethe-test"] = json!("yes");
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }))
    .unwrap()
}

fn cm_with(meta: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": meta, "data": {"k": "v"}})).unwrap()
}

fn status_of(e: kube::Error) -> Status {
    api_error(e)
}

/// Creates a CRD with a unique group and returns its resource; waits until it is served.
async fn make_crd(c: &TestCluster, namespaced: bool) -> ApiResource {
    let s = suffix();
    let group = format!("t{s}.lethe.test");
    let kind = format!("Widget{s}");
    let plural = format!("widget{s}s");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "names": {"plural": plural, "singular": format!("widget{s}"), "kind": kind},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(c.client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", &kind), &plural);
    let probe: Api<DynamicObject> = Api::all_with(c.client.clone(), &ar);
    eventually(10, || {
        let probe = probe.clone();
        async move { probe.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    ar
}

/// Creates Role `name` with `rules` in `ns` and binds it to `user`.
async fn bind_role(c: &TestCluster, ns: &str, name: &str, rules: Value, user: &str) {
    let role: Role =
        serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).unwrap();
    Api::<Role>::namespaced(c.client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(c.client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

fn widget(ar: &ApiResource, name: &str, data: Value) -> DynamicObject {
    DynamicObject::new(name, ar).data(data)
}

#[tokio::test]
async fn configmap_create_get_list_replace_patch_delete() {
    let c = TestCluster::new().await;
    let ns = c.namespace("crud").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &cm("a", json!({"app": "x"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| !u.is_empty()));
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();
    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");
    let list = api.list(&ours()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    assert!(list_rv >= rv1);
    let mut changed = api.get("a").await.unwrap();
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let replaced = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = replaced.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv2 > rv1);
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.as_ref().unwrap()["extra"], "1");
    assert_eq!(patched.data.as_ref().unwrap()["k"], "w");
    let deleted = api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(
        deleted.is_right(),
        "an object without finalizers is gone at once"
    );
    let e = status_of(api.get("a").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "configmaps \"a\" not found");
    c.shutdown().await;
}

#[tokio::test]
async fn creating_an_existing_name_is_already_exists() {
    let c = TestCluster::new().await;
    let ns = c.namespace("exists").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("dup", json!({})))
        .await
        .unwrap();
    let e = status_of(
        api.create(&PostParams::default(), &cm("dup", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"dup\" already exists");
    c.shutdown().await;
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_conflict() {
    let c = TestCluster::new().await;
    let ns = c.namespace("conflict").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let first = api
        .create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    let mut newer = first.clone();
    newer.data = Some([("k".to_string(), "2".to_string())].into());
    api.replace("c", &PostParams::default(), &newer)
        .await
        .unwrap();
    let mut stale = first.clone();
    stale.data = Some([("k".to_string(), "3".to_string())].into());
    let e = status_of(
        api.replace("c", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn an_invalid_name_is_422_invalid() {
    let c = TestCluster::new().await;
    let ns = c.namespace("invalid").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let e = status_of(
        api.create(&PostParams::default(), &cm("Bad_Name", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{}", e.message);
    let details = e.details.unwrap();
    assert_eq!(details.kind, "ConfigMap");
    assert_eq!(details.causes[0].field, "metadata.name");
    c.shutdown().await;
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_404() {
    let c = TestCluster::new().await;
    let missing = format!("nope-{}", suffix());
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &missing);
    let e = status_of(
        api.create(&PostParams::default(), &cm("x", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, format!("namespaces \"{missing}\" not found"));
    c.shutdown().await;
}

#[tokio::test]
async fn creating_in_a_terminating_namespace_is_403() {
    let c = TestCluster::new().await;
    let ns = c.namespace("term").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &cm_with(json!({"name": "held", "finalizers": ["lethe.test/hold"]})),
    )
    .await
    .unwrap();
    let nss: Api<Namespace> = Api::all(c.client.clone());
    nss.delete(&ns, &DeleteParams::default()).await.unwrap();
    let e = eventually(10, || {
        let api = api.clone();
        async move {
            match api
                .create(&PostParams::default(), &cm("late", json!({})))
                .await
            {
                Err(kube::Error::Api(s)) if s.code == 403 => Some(*s),
                _ => None,
            }
        }
    })
    .await;
    assert_eq!(e.reason, "Forbidden");
    assert_eq!(
        e.message,
        format!(
            "configmaps \"late\" is forbidden: unable to create new content in namespace {ns} because it is being terminated"
        )
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    c.shutdown().await;
}

#[tokio::test]
async fn finalizers_hold_deletion_until_the_last_one_is_removed() {
    let c = TestCluster::new().await;
    let ns = c.namespace("fin").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &cm_with(json!({"name": "f", "finalizers": ["a.test/one", "a.test/two"]})),
    )
    .await
    .unwrap();
    let res = api.delete("f", &DeleteParams::default()).await.unwrap();
    let obj = res
        .left()
        .expect("the object comes back while finalizers are pending");
    assert!(obj.metadata.deletion_timestamp.is_some());
    assert_eq!(obj.metadata.deletion_grace_period_seconds, Some(0));
    let got = api.get("f").await.unwrap();
    assert!(got.metadata.deletion_timestamp.is_some());
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers/0"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert!(api.get("f").await.is_ok(), "one finalizer left");
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let e = status_of(api.get("f").await.unwrap_err());
    assert_eq!(e.code, 404);
    c.shutdown().await;
}

#[tokio::test]
async fn finalizers_cannot_be_added_once_deletion_started() {
    let c = TestCluster::new().await;
    let ns = c.namespace("finadd").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &cm_with(json!({"name": "f", "finalizers": ["a.test/one"]})),
    )
    .await
    .unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let e = status_of(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["a.test/one", "a.test/new"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        e.message
    );
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    c.shutdown().await;
}

#[tokio::test]
async fn delete_preconditions_on_uid_and_resource_version_conflict_on_mismatch() {
    let c = TestCluster::new().await;
    let ns = c.namespace("precond").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &cm("p", json!({})))
        .await
        .unwrap();
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("00000000-0000-0000-0000-000000000000".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let e = status_of(api.delete("p", &wrong_uid).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"p\": the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record ({}). The object might have been deleted and then recreated",
            created.metadata.uid.as_deref().unwrap()
        )
    );
    assert_eq!(
        e.details.as_ref().map(|d| d.kind.as_str()),
        Some("ConfigMap")
    );
    let wrong_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..Default::default()
    };
    let e = status_of(api.delete("p", &wrong_rv).await.unwrap_err());
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"p\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({}). The object might have been modified",
            created.metadata.resource_version.as_deref().unwrap()
        )
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: created.metadata.uid.clone(),
            resource_version: created.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    api.delete("p", &right).await.unwrap();
    assert_eq!(status_of(api.get("p").await.unwrap_err()).code, 404);
    c.shutdown().await;
}

async fn owner_and_dependent(api: &Api<ConfigMap>) -> ConfigMap {
    let owner = api
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    let dep = cm_with(json!({
        "name": "dependent",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid.clone().unwrap()}],
    }));
    api.create(&PostParams::default(), &dep).await.unwrap();
    owner
}

#[tokio::test]
async fn background_propagation_garbage_collects_dependents() {
    let c = TestCluster::new().await;
    let ns = c.namespace("bg").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    owner_and_dependent(&api).await;
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(20, || {
        let api = api.clone();
        async move {
            api.get_opt("dependent")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn orphan_propagation_keeps_dependents_and_strips_owner_references() {
    let c = TestCluster::new().await;
    let ns = c.namespace("orphan").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    owner_and_dependent(&api).await;
    api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    eventually(20, || {
        let api = api.clone();
        async move { api.get_opt("owner").await.unwrap().is_none().then_some(()) }
    })
    .await;
    let dep = api.get("dependent").await.unwrap();
    assert!(dep.metadata.owner_references.unwrap_or_default().is_empty());
    c.shutdown().await;
}

#[tokio::test]
async fn foreground_propagation_deletes_dependents_before_the_owner() {
    let c = TestCluster::new().await;
    let ns = c.namespace("fg").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let owner_uid = owner_and_dependent(&api).await.metadata.uid.unwrap();
    // A finalizer on a blocking dependent keeps the owner waiting in foreground deletion.
    api.patch(
        "dependent",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {
            "finalizers": ["a.test/hold"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid, "blockOwnerDeletion": true}],
        }})),
    )
    .await
    .unwrap();
    let res = api
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let owner = res.left().expect("the owner waits for its dependents");
    assert!(
        owner
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"foregroundDeletion".to_string())
    );
    eventually(20, || {
        let api = api.clone();
        async move {
            let d = api.get("dependent").await.ok()?;
            d.metadata.deletion_timestamp.is_some().then_some(())
        }
    })
    .await;
    let still = api.get("owner").await.unwrap();
    assert_eq!(still.metadata.uid.unwrap(), owner_uid);
    api.patch(
        "dependent",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(20, || {
        let api = api.clone();
        async move { api.get_opt("owner").await.unwrap().is_none().then_some(()) }
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn namespace_deletion_removes_contents_then_the_namespace() {
    let c = TestCluster::new().await;
    let ns = c.namespace("cascade").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("plain", json!({})))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &cm_with(json!({"name": "held", "finalizers": ["a.test/hold"]})),
    )
    .await
    .unwrap();
    let nss: Api<Namespace> = Api::all(c.client.clone());
    let created = nss.get(&ns).await.unwrap();
    assert_eq!(
        created.spec.unwrap().finalizers.unwrap(),
        vec!["kubernetes".to_string()]
    );
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let res = nss.delete(&ns, &DeleteParams::default()).await.unwrap();
    let terminating = res
        .left()
        .expect("the namespace comes back while terminating");
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    eventually(20, || {
        let api = api.clone();
        async move { api.get_opt("plain").await.unwrap().is_none().then_some(()) }
    })
    .await;
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    // The held object keeps its namespace: a moment later, both are still there.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(nss.get_opt(&ns).await.unwrap().is_some());
    assert!(api.get_opt("held").await.unwrap().is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(30, || {
        let nss = nss.clone();
        let ns = ns.clone();
        async move { nss.get_opt(&ns).await.unwrap().is_none().then_some(()) }
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn label_selectors_support_every_operator() {
    let c = TestCluster::new().await;
    let ns = c.namespace("labels").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &cm("a", json!({"app": "web", "tier": "front"})),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("b", json!({"app": "db"})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("c", json!({"other": "x"})))
        .await
        .unwrap();
    let names = |sel: &'static str| {
        let api = api.clone();
        async move {
            let mut n: Vec<String> = api
                .list(&ListParams::default().labels(&format!("{OURS},{sel}")))
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|o| o.metadata.name.unwrap())
                .collect();
            n.sort();
            n
        }
    };
    assert_eq!(names("app=web").await, ["a"]);
    assert_eq!(names("app==db").await, ["b"]);
    assert_eq!(names("app!=web").await, ["b", "c"]);
    assert_eq!(names("app in (web,db)").await, ["a", "b"]);
    assert_eq!(names("app notin (web)").await, ["b", "c"]);
    assert_eq!(names("tier").await, ["a"]);
    assert_eq!(names("!app").await, ["c"]);
    assert_eq!(names("app,!tier").await, ["b"]);
    c.shutdown().await;
}

#[tokio::test]
async fn field_selectors_on_name_and_namespace() {
    let c = TestCluster::new().await;
    let ns = c.namespace("fields").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("one", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("two", json!({})))
        .await
        .unwrap();
    let l = api
        .list(&ListParams::default().fields("metadata.name=two"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].metadata.name.as_deref(), Some("two"));
    let all: Api<ConfigMap> = Api::all(c.client.clone());
    let l = all
        .list(&ours().fields(&format!("metadata.namespace={ns},metadata.name!=two")))
        .await
        .unwrap();
    let names: Vec<_> = l
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["one"]);
    c.shutdown().await;
}

#[tokio::test]
async fn list_pagination_with_limit_and_continue() {
    let c = TestCluster::new().await;
    let ns = c.namespace("pages").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("item-{i}"), json!({})))
            .await
            .unwrap();
    }
    let mut seen = vec![];
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ours().limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        assert!(page.items.len() <= 3);
        pages += 1;
        seen.extend(page.items.into_iter().map(|o| o.metadata.name.unwrap()));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    let want: Vec<String> = (0..7).map(|i| format!("item-{i}")).collect();
    assert_eq!(seen, want);
    c.shutdown().await;
}

/// Later pages of a paginated list come from the snapshot the first page was read at, as etcd
/// serves them: objects created after the first page are absent, deleted ones still there,
/// changed ones as they were, and every page reports the first page's resourceVersion.
#[tokio::test]
async fn continue_pages_come_from_the_first_pages_snapshot() {
    let c = TestCluster::new().await;
    let ns = c.namespace("snapshot").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for i in 0..4 {
        api.create(&PostParams::default(), &cm(&format!("item-{i}"), json!({})))
            .await
            .unwrap();
    }
    // A list at any version ("0") is the watch cache's, which has no pages: the limit is
    // ignored. (kube-rs leaves the version out when it sets a limit, so this is sent raw.)
    let cached = c
        .client
        .request::<Value>(
            http::Request::get(format!(
                "/api/v1/namespaces/{ns}/configmaps?labelSelector={OURS}&limit=1&resourceVersion=0"
            ))
            .body(Vec::new())
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(cached["items"].as_array().map(Vec::len), Some(4));
    assert!(
        cached["metadata"]["continue"]
            .as_str()
            .is_none_or(str::is_empty)
    );
    let first = api.list(&ours().limit(1)).await.unwrap();
    let first_rv = first.metadata.resource_version.clone().unwrap();
    let mut token = first.metadata.continue_.clone();
    let mut seen: Vec<ConfigMap> = first.items;
    // Changes after the first page.
    api.create(&PostParams::default(), &cm("item-1a", json!({})))
        .await
        .unwrap();
    api.delete("item-2", &DeleteParams::default())
        .await
        .unwrap();
    api.patch(
        "item-3",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .unwrap();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api.list(&ours().limit(1).continue_token(&t)).await.unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(first_rv.as_str())
        );
        token = page.metadata.continue_.clone();
        seen.extend(page.items);
    }
    let names: Vec<_> = seen
        .iter()
        .filter_map(|o| o.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["item-0", "item-1", "item-2", "item-3"]);
    assert_eq!(seen[3].data.as_ref().unwrap()["k"], "v");
    // A new list sees the present.
    let now = api.list(&ours()).await.unwrap();
    let names: Vec<_> = now
        .items
        .iter()
        .filter_map(|o| o.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["item-0", "item-1", "item-1a", "item-3"]);
    c.shutdown().await;
}

/// `resourceVersionMatch=Exact` lists the past; too old is 410, not reached yet is 504; a
/// continue token cannot be combined with a resourceVersion.
#[tokio::test]
async fn an_exact_list_shows_the_past_and_refuses_what_it_cannot_show() {
    use kube::api::VersionMatch;
    let c = TestCluster::new().await;
    let ns = c.namespace("exact").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let then = api.list(&ours()).await.unwrap();
    let then_rv = then.metadata.resource_version.clone().unwrap();
    api.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let names = |l: &kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect()
    };
    let past = api
        .list(&ours().at(&then_rv).matching(VersionMatch::Exact))
        .await
        .unwrap();
    assert_eq!(names(&past), ["a"]);
    assert_eq!(
        past.metadata.resource_version.as_deref(),
        Some(then_rv.as_str())
    );
    // The legacy form: a limit with a resourceVersion and no match is exact too.
    let legacy = api.list(&ours().at(&then_rv).limit(10)).await.unwrap();
    assert_eq!(names(&legacy), ["a"]);
    // Without a limit, a resourceVersion only says "not older than": the present.
    let not_older = api.list(&ours().at(&then_rv)).await.unwrap();
    assert_eq!(names(&not_older), ["b"]);

    let future: u64 = then_rv.parse::<u64>().unwrap() + 1_000_000_000;
    let e = status_of(
        api.list(&ours().at(&future.to_string()).matching(VersionMatch::Exact))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    assert!(
        e.message.contains("Too large resource version"),
        "{}",
        e.message
    );
    // "Not older than" a version not reached waits a little for it (as the watch cache does),
    // then says the same, with a hint to retry.
    let e = status_of(api.list(&ours().at(&future.to_string())).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    assert_eq!(e.details.map(|d| d.retry_after_seconds), Some(1));

    let page = api.list(&ours().limit(1)).await.unwrap();
    if let Some(token) = page.metadata.continue_.filter(|t| !t.is_empty()) {
        let e = status_of(
            api.list(&ours().limit(1).continue_token(&token).at(&then_rv))
                .await
                .unwrap_err(),
        );
        assert_eq!(e.code, 400);
        assert!(
            e.message
                .contains("specifying resource version is not allowed when using continue"),
            "{}",
            e.message
        );
    }
    if common::compact(&c).await {
        let e = status_of(
            api.list(&ours().at(&then_rv).matching(VersionMatch::Exact))
                .await
                .unwrap_err(),
        );
        assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
        assert_eq!(
            e.message,
            "The resourceVersion for the provided list is too old."
        );
    }
    c.shutdown().await;
}

#[tokio::test]
async fn watch_from_a_resource_version_sees_added_modified_deleted() {
    let c = TestCluster::new().await;
    let ns = c.namespace("watch").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.create(&PostParams::default(), &cm("w", json!({})))
        .await
        .unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let stream = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap();
    let events: Vec<WatchEvent<ConfigMap>> = stream.take(3).try_collect().await.unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        })
        .collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    c.shutdown().await;
}

#[tokio::test]
async fn watch_sees_live_events_after_it_starts() {
    let c = TestCluster::new().await;
    let ns = c.namespace("live").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("late", json!({})))
        .await
        .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("an event arrives")
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("late")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test]
async fn watch_from_a_compacted_version_is_410_gone() {
    let c = TestCluster::new().await;
    let ns = c.namespace("gone").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    // A lethe server compacts on request; a real cluster has long compacted version 1.
    common::compact(&c).await;
    let stream = api
        .watch(&WatchParams::default().timeout(10), "1")
        .await
        .unwrap();
    let first = stream.boxed().try_next().await.unwrap().expect("one event");
    match first {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
            assert!(
                s.message.starts_with("too old resource version: 1"),
                "{}",
                s.message
            );
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test]
async fn a_continue_token_from_before_a_compaction_is_410_expired() {
    let c = TestCluster::new().await;
    let ns = c.namespace("expired").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("i{i}"), json!({})))
            .await
            .unwrap();
    }
    let page = api.list(&ListParams::default().limit(1)).await.unwrap();
    let token = page.metadata.continue_.unwrap();
    api.create(&PostParams::default(), &cm("newer", json!({})))
        .await
        .unwrap();
    if !common::compact(&c).await {
        eprintln!("skipped: this cluster cannot be made to compact on request");
        return;
    }
    let e = status_of(
        api.list(&ListParams::default().limit(1).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    c.shutdown().await;
}

/// A watch from a resourceVersion the server has not reached waits for it ("the API server may
/// wait indefinitely (until the request timeout)", in the API concepts).
#[tokio::test]
async fn a_watch_from_a_version_not_reached_waits_for_it() {
    let c = TestCluster::new().await;
    let ns = c.namespace("future-watch").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let now: u64 = api
        .list(&ours())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    // Unlike a list, a watch may wait for its version until it times out: nothing that happens
    // before that version is reported, and there is no error.
    let future = (now + 1_000_000_000).to_string();
    let events = api
        .watch(&WatchParams::default().timeout(2), &future)
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("before-it", json!({})))
        .await
        .unwrap();
    let seen: Vec<_> = events.try_collect().await.unwrap();
    assert!(seen.is_empty(), "{seen:?}");
    c.shutdown().await;
}

/// A watch that allows bookmarks gets them as the watch cache sends them: about once a minute,
/// and one 2 s before the watch times out (so a 4 s watch gets exactly one of those), besides the
/// one that ends a watch-list's initial events.
#[tokio::test]
async fn watch_sends_bookmarks_when_allowed() {
    let c = TestCluster::new().await;
    let Some(s) = c.embedded_server() else {
        eprintln!("skipped: bookmark timing is checked on the embedded server only");
        return;
    };
    let ns = c.namespace("bookmarks").await;
    let r = common::raw_request(
        s.url(),
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps?watch=true&allowWatchBookmarks=true&timeoutSeconds=4"),
        Some(s.admin_token()),
        None,
    )
    .await
    .unwrap();
    let body = String::from_utf8(r.body).unwrap();
    let bookmarks: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "BOOKMARK")
        .collect();
    // A watch from "now" is a watch-list (WatchList is on in v1.32): its initial events end with
    // a bookmark, and one more comes before the timeout.
    assert_eq!(bookmarks.len(), 2, "{body}");
    assert_eq!(
        bookmarks[0]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let bookmark = &bookmarks[1];
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    assert!(
        bookmark["object"]["metadata"]["resourceVersion"]
            .as_str()
            .is_some()
    );
    c.shutdown().await;
}

#[tokio::test]
async fn rbac_role_binding_allows_listed_verbs_and_denies_others() {
    let c = TestCluster::new().await;
    let ns = c.namespace("rbac").await;
    let user = format!("alice-{}", suffix());
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(c.client.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(c.client.clone(), &ns)
        .create(&PostParams::default(), &rb)
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(c.client.clone(), &ns)
        .create(&PostParams::default(), &cm("visible", json!({})))
        .await
        .unwrap();
    let as_user: Api<ConfigMap> = Api::namespaced(c.client_as(&user, &[]).await, &ns);
    let got = eventually(10, || {
        let a = as_user.clone();
        async move { a.get("visible").await.ok() }
    })
    .await;
    assert_eq!(got.metadata.name.as_deref(), Some("visible"));
    assert_eq!(as_user.list(&ours()).await.unwrap().items.len(), 1);
    let e = status_of(
        as_user
            .delete("visible", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        format!(
            "configmaps \"visible\" is forbidden: User \"{user}\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"{ns}\""
        )
    );
    let other_ns: Api<ConfigMap> = Api::namespaced(c.client_as(&user, &[]).await, "default");
    let e = status_of(other_ns.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    c.shutdown().await;
}

#[tokio::test]
async fn a_cluster_role_through_a_group_binding_applies_cluster_wide() {
    let c = TestCluster::new().await;
    let s = suffix();
    let group = format!("readers-{s}");
    let cr: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": format!("ns-reader-{s}")},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]},
                  {"apiGroups": ["batch"], "resources": ["cronjobs/status"], "verbs": ["get"]}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(c.client.clone())
        .create(&PostParams::default(), &cr)
        .await
        .unwrap();
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("ns-reader-{s}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("ns-reader-{s}")},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(c.client.clone())
        .create(&PostParams::default(), &crb)
        .await
        .unwrap();
    let as_member: Api<Namespace> = Api::all(c.client_as(&format!("bob-{s}"), &[&group]).await);
    eventually(10, || {
        let a = as_member.clone();
        async move { a.list(&ListParams::default()).await.ok() }
    })
    .await;
    let as_other: Api<Namespace> = Api::all(c.client_as(&format!("carol-{s}"), &[]).await);
    let e = status_of(as_other.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    assert!(
        e.message.ends_with(
            "cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        ),
        "{}",
        e.message
    );
    c.shutdown().await;
}

#[tokio::test]
async fn self_subject_access_review_answers_for_the_caller() {
    let c = TestCluster::new().await;
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "delete", "resource": "configmaps", "namespace": "default"}},
    });
    let req = http::Request::post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&review).unwrap())
        .unwrap();
    let admin: Value = c.client.request(req).await.unwrap();
    assert_eq!(admin["status"]["allowed"], true);
    let req = http::Request::post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&review).unwrap())
        .unwrap();
    let nobody: Value = c
        .client_as(&format!("nobody-{}", suffix()), &[])
        .await
        .request(req)
        .await
        .unwrap();
    assert_eq!(nobody["status"]["allowed"], false);
    // An allowed review says which binding allowed it, as RBAC words it.
    let ns = c.namespace("review").await;
    let reader = format!("reader-{}", suffix());
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "readers"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": reader, "apiGroup": "rbac.authorization.k8s.io"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(c.client.clone(), &ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": ns}},
    });
    let req = http::Request::post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&review).unwrap())
        .unwrap();
    let read: Value = c
        .client_as(&reader, &["system:authenticated"])
        .await
        .request(req)
        .await
        .unwrap();
    assert_eq!(
        read["status"],
        json!({"allowed": true, "reason": format!(
            "RBAC: allowed by RoleBinding \"readers/{ns}\" of ClusterRole \"view\" to User \"{reader}\""
        )})
    );
    c.shutdown().await;
}

/// A server that delegates authentication and authorization (lethe's admin listener) asks a
/// TokenReview who a token is, then a SubjectAccessReview what that user may do: a
/// ServiceAccount's token names the account and its groups; an unknown token is not
/// authenticated; the user may `get` a non-resource URL only once a ClusterRole grants it.
#[tokio::test]
async fn token_and_subject_access_reviews_answer_for_a_token_and_a_named_user() {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let c = TestCluster::new().await;
    let post = |path: &'static str, body: Value| {
        let client = c.client.clone();
        async move {
            let req = http::Request::post(path)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap();
            client.request::<Value>(req).await
        }
    };
    fn token_review(token: &str) -> Value {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
    }
    const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
    const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

    let unknown = post(TOKEN_REVIEWS, token_review("no-such-token"))
        .await
        .unwrap();
    assert_ne!(unknown["status"]["authenticated"], true, "{unknown}");
    let e = api_error(post(TOKEN_REVIEWS, token_review("")).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "token is required for TokenReview in authentication.k8s.io"
        )
    );

    let ns = c.namespace("reviews").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(c.client.clone(), &ns);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "scraper"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let granted = accounts
        .create_subresource::<Value, TokenRequest>(
            "token",
            "scraper",
            &PostParams::default(),
            &request,
        )
        .await
        .unwrap();
    let token = granted.status.and_then(|s| s.token).unwrap_or_default();
    let reviewed = post(TOKEN_REVIEWS, token_review(&token)).await.unwrap();
    let user = &reviewed["status"]["user"];
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    let name = format!("system:serviceaccount:{ns}:scraper");
    assert_eq!(user["username"], name.as_str(), "{reviewed}");
    let groups = user["groups"].clone();
    for group in ["system:serviceaccounts", "system:authenticated"] {
        assert!(
            groups.as_array().unwrap().iter().any(|g| g == group),
            "{reviewed}"
        );
    }

    let may_read = |path: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": name, "groups": groups, "nonResourceAttributes": {"path": path, "verb": "get"},
        }})
    };
    let denied = post(ACCESS_REVIEWS, may_read("/metrics")).await.unwrap();
    assert_ne!(denied["status"]["allowed"], true, "{denied}");
    let role = format!("metrics-reader-{}", suffix());
    let cr: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": role},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(c.client.clone())
        .create(&PostParams::default(), &cr)
        .await
        .unwrap();
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(c.client.clone())
        .create(&PostParams::default(), &crb)
        .await
        .unwrap();
    // On a real cluster the RBAC authorizer's cache sees the binding a moment later.
    eventually(30, || async {
        let allowed = post(ACCESS_REVIEWS, may_read("/metrics")).await.unwrap();
        (allowed["status"]["allowed"] == true).then_some(())
    })
    .await;
    let other = post(ACCESS_REVIEWS, may_read("/lethe/status"))
        .await
        .unwrap();
    assert_ne!(other["status"]["allowed"], true, "{other}");

    let nobody = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }});
    let e = api_error(post(ACCESS_REVIEWS, nobody).await.unwrap_err());
    assert_eq!(e.code, 422, "{}", e.message);
    assert!(
        e.message
            .contains("at least one of user or group must be specified"),
        "{}",
        e.message
    );
    c.shutdown().await;
}

#[tokio::test]
async fn custom_resources_have_status_subresource_and_generation() {
    let c = TestCluster::new().await;
    let ns = c.namespace("cr").await;
    let ar = make_crd(&c, true).await;
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    let created = api
        .create(
            &PostParams::default(),
            &widget(
                &ar,
                "w",
                json!({"spec": {"size": 1}, "status": {"ready": true}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );
    let upd = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(upd.metadata.generation, Some(2));
    assert!(
        upd.data.get("status").is_none(),
        "status changes on the main resource are ignored"
    );
    let labelled = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(2),
        "metadata changes do not bump generation"
    );
    let st = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 9}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["ready"], true);
    assert_eq!(
        st.data["spec"]["size"], 2,
        "spec changes through /status are ignored"
    );
    assert_eq!(
        st.metadata.generation,
        Some(2),
        "status changes do not bump generation"
    );
    let got = api.get_status("w").await.unwrap();
    assert_eq!(got.data["status"]["ready"], true);
    c.shutdown().await;
}

#[tokio::test]
async fn cluster_scoped_custom_resources_and_crd_deletion_removes_them() {
    let c = TestCluster::new().await;
    let ar = make_crd(&c, false).await;
    let api: Api<DynamicObject> = Api::all_with(c.client.clone(), &ar);
    api.create(
        &PostParams::default(),
        &widget(&ar, "global", json!({"spec": {}})),
    )
    .await
    .unwrap();
    // An instance held by a finalizer keeps the CRD terminating.
    let mut held = widget(&ar, "held", json!({"spec": {}}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
    let crd_name = format!("{}.{}", ar.plural, ar.group);
    let crd = crds.get(&crd_name).await.unwrap();
    let established = crd
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    assert!(established);
    crds.delete(&crd_name, &DeleteParams::default())
        .await
        .unwrap();
    // The instance holds its finalizer, so the CRD waits for it.
    let gone = crds.get(&crd_name).await.unwrap();
    assert!(gone.metadata.deletion_timestamp.is_some());
    // No new instances while the old ones go.
    let refused = api
        .create(
            &PostParams::default(),
            &widget(&ar, "late", json!({"spec": {}})),
        )
        .await
        .unwrap_err();
    match refused {
        kube::Error::Api(s) => assert_eq!(
            (s.code, s.message.as_str()),
            (
                405,
                "create not allowed while custom resource definition is terminating"
            )
        ),
        other => panic!("{other:?}"),
    }
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(30, || {
        let crds = crds.clone();
        let n = crd_name.clone();
        async move { crds.get_opt(&n).await.unwrap().is_none().then_some(()) }
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn cronjob_generation_bumps_on_spec_changes_only() {
    let c = TestCluster::new().await;
    let ns = c.namespace("cj").await;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), &ns);
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "job"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &cj).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let p = api
        .patch(
            "job",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"schedule": "*/10 * * * *"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    let p = api
        .patch(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    let s = api
        .patch_status(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"lastScheduleTime": "2026-01-01T00:00:00Z"}})),
        )
        .await
        .unwrap();
    assert_eq!(s.metadata.generation, Some(2));
    assert!(s.status.unwrap().last_schedule_time.is_some());
    c.shutdown().await;
}

#[tokio::test]
async fn lease_update_with_resource_version_is_optimistic() {
    let c = TestCluster::new().await;
    let ns = c.namespace("lease").await;
    let api: Api<Lease> = Api::namespaced(c.client.clone(), &ns);
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10},
    }))
    .unwrap();
    let l = api.create(&PostParams::default(), &lease).await.unwrap();
    let mut a = l.clone();
    a.spec.as_mut().unwrap().holder_identity = Some("b".into());
    api.replace("leader", &PostParams::default(), &a)
        .await
        .unwrap();
    let mut stale = l.clone();
    stale.spec.as_mut().unwrap().holder_identity = Some("c".into());
    assert_eq!(
        status_of(
            api.replace("leader", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        )
        .code,
        409
    );
    assert_eq!(
        api.get("leader")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("b")
    );
    c.shutdown().await;
}

#[tokio::test]
async fn server_side_apply_creates_then_updates() {
    let c = TestCluster::new().await;
    let ns = c.namespace("ssa").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    let pp = PatchParams::apply("lethe-test");
    let first = api
        .patch("applied", &pp, &Patch::Apply(&obj))
        .await
        .unwrap();
    assert_eq!(first.data.unwrap()["a"], "1");
    let obj2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "2"}});
    let second = api
        .patch("applied", &pp, &Patch::Apply(&obj2))
        .await
        .unwrap();
    assert_eq!(second.data.unwrap()["a"], "2");
    c.shutdown().await;
}

#[tokio::test]
async fn discovery_lists_the_served_kinds() {
    let c = TestCluster::new().await;
    let d = kube::discovery::Discovery::new(c.client.clone())
        .run()
        .await
        .unwrap();
    let mut kinds = vec![];
    for g in d.groups() {
        for (ar, _) in g.recommended_resources() {
            kinds.push(format!("{}/{}", ar.group, ar.kind));
        }
    }
    for want in [
        "/Namespace",
        "/ConfigMap",
        "/Secret",
        "batch/CronJob",
        "coordination.k8s.io/Lease",
        "rbac.authorization.k8s.io/ClusterRole",
        "apiextensions.k8s.io/CustomResourceDefinition",
    ] {
        assert!(
            kinds.iter().any(|k| k == want),
            "{want} missing from {kinds:?}"
        );
    }
    // Kinds this server does not serve are absent, and their paths are 404, as on a real
    // cluster without their API.
    for (absent, path) in [
        ("/Pod", "/api/v1/namespaces/default/pods"),
        ("/Node", "/api/v1/nodes"),
        ("batch/Job", "/apis/batch/v1/namespaces/default/jobs"),
    ] {
        assert!(!kinds.iter().any(|k| k == absent), "{absent} is served");
        let e = c
            .client
            .request::<Value>(http::Request::get(path).body(Vec::new()).unwrap())
            .await
            .unwrap_err();
        assert_eq!(status_of(e).code, 404, "{path}");
    }
    c.shutdown().await;
}

#[tokio::test]
async fn a_bad_token_is_401_and_no_token_is_the_anonymous_user() {
    let c = TestCluster::new().await;
    let Some(s) = c.embedded_server() else {
        eprintln!("skipped: needs the embedded server's plain-HTTP endpoint");
        return;
    };
    let r = common::raw_request(
        s.url(),
        "GET",
        "/api/v1/namespaces",
        Some("not-a-token"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    // Anonymous requests are on by default in kube-apiserver; RBAC refuses them.
    let r = common::raw_request(s.url(), "GET", "/api/v1/namespaces", None, None)
        .await
        .unwrap();
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope",
               "reason": "Forbidden", "details": {"kind": "namespaces"}, "code": 403})
    );
    let r = common::raw_request(s.url(), "GET", "/api", None, None)
        .await
        .unwrap();
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/api\""
    );
    c.shutdown().await;
}

/// Authorization comes before routing: a resource the server does not serve is 404 to a user
/// who may ask for it and 403 to one who may not.
#[tokio::test]
async fn unknown_resources_are_forbidden_before_they_are_not_found() {
    let c = TestCluster::new().await;
    let get = |client: kube::Client, path: &'static str| async move {
        client
            .request::<Value>(http::Request::get(path).body(Vec::new()).unwrap())
            .await
            .unwrap_err()
    };
    let nobody = c
        .client_as(&format!("nobody-{}", suffix()), &["system:authenticated"])
        .await;
    match get(nobody.clone(), "/api/v1/notathings").await {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
            assert!(
                s.message
                    .starts_with("notathings is forbidden: User \"nobody-")
                    && s.message.ends_with(
                        "cannot list resource \"notathings\" in API group \"\" at the cluster scope"
                    ),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    match get(nobody, "/apis/example.com/v1/namespaces/default/widgets/w1").await {
        kube::Error::Api(s) => assert_eq!(s.code, 403, "{}", s.message),
        other => panic!("{other:?}"),
    }
    match get(c.client.clone(), "/api/v1/notathings").await {
        kube::Error::Api(s) => assert_eq!(s.code, 404, "{}", s.message),
        other => panic!("{other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test]
async fn namespaces_have_no_collection_delete() {
    let c = TestCluster::new().await;
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    let err = namespaces
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect_err("namespaces are deleted one by one");
    match err {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (405, "MethodNotAllowed")),
        other => panic!("{other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test]
async fn not_found_body_is_shaped_like_the_real_server() {
    let c = TestCluster::new().await;
    let Some(s) = c.embedded_server() else {
        eprintln!("skipped: needs the embedded server's plain-HTTP endpoint");
        return;
    };
    let r = common::raw_request(
        s.url(),
        "GET",
        "/apis/batch/v1/namespaces/default/cronjobs/missing",
        Some(s.admin_token()),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "cronjobs.batch \"missing\" not found", "reason": "NotFound",
               "details": {"name": "missing", "group": "batch", "kind": "cronjobs"}, "code": 404})
    );
    c.shutdown().await;
}

#[tokio::test]
async fn a_filtered_watch_reports_objects_leaving_the_selector_as_deleted() {
    let c = TestCluster::new().await;
    let ns = c.namespace("selwatch").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.create(&PostParams::default(), &cm("m", json!({"team": "a"})))
        .await
        .unwrap();
    api.patch(
        "m",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "m",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .unwrap();
    let stream = api
        .watch(&WatchParams::default().labels("team=a").timeout(10), &rv)
        .await
        .unwrap();
    // Each event carries the object as it matched: the DELETED one has the labels it left with,
    // so a consumer filtering on the selector still sees it go.
    let team = |o: &ConfigMap| o.metadata.labels.clone().unwrap_or_default()["team"].clone();
    let events: Vec<(&str, String)> = stream
        .take(3)
        .map_ok(|e| match e {
            WatchEvent::Added(o) => ("ADDED", team(&o)),
            WatchEvent::Modified(o) => ("MODIFIED", team(&o)),
            WatchEvent::Deleted(o) => ("DELETED", team(&o)),
            WatchEvent::Bookmark(_) => ("BOOKMARK", String::new()),
            WatchEvent::Error(_) => ("ERROR", String::new()),
        })
        .try_collect()
        .await
        .unwrap();
    let teams: Vec<(&str, &str)> = events.iter().map(|(k, t)| (*k, t.as_str())).collect();
    assert_eq!(teams, [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "a")]);
    c.shutdown().await;
}

#[tokio::test]
async fn the_kube_runtime_watcher_lists_then_follows_changes() {
    use kube::runtime::{WatchStreamExt, watcher};
    let c = TestCluster::new().await;
    let ns = c.namespace("runtime").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("before", json!({})))
        .await
        .unwrap();
    let mut names = watcher(api.clone(), watcher::Config::default().labels(OURS))
        .applied_objects()
        .map_ok(|o| o.metadata.name.unwrap_or_default())
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(10), names.try_next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.as_deref(), Some("before"));
    api.create(&PostParams::default(), &cm("after", json!({})))
        .await
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), names.try_next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.as_deref(), Some("after"));
    c.shutdown().await;
}

#[tokio::test]
async fn the_kube_runtime_watcher_works_with_streaming_lists() {
    use kube::runtime::{WatchStreamExt, watcher};
    let c = TestCluster::new().await;
    let ns = c.namespace("streaming").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("existing", json!({})))
        .await
        .unwrap();
    let mut names = watcher(
        api.clone(),
        watcher::Config::default().labels(OURS).streaming_lists(),
    )
    .applied_objects()
    .map_ok(|o| o.metadata.name.unwrap_or_default())
    .boxed();
    let first = tokio::time::timeout(Duration::from_secs(10), names.try_next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.as_deref(), Some("existing"));
    api.create(&PostParams::default(), &cm("new", json!({})))
        .await
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), names.try_next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.as_deref(), Some("new"));
    c.shutdown().await;
}

#[tokio::test]
async fn put_creates_a_missing_lease_but_not_a_missing_configmap() {
    let c = TestCluster::new().await;
    let ns = c.namespace("upsert").await;
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), &ns);
    let lease: Lease = serde_json::from_value(
        json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
    )
    .unwrap();
    let created = leases
        .replace("l", &PostParams::default(), &lease)
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let e = status_of(
        cms.replace("nope", &PostParams::default(), &cm("nope", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
    c.shutdown().await;
}

#[tokio::test]
async fn the_kube_client_works_over_https_with_the_generated_ca() {
    if std::env::var_os("KUBECONFIG").is_some() {
        eprintln!("skipped: exercises the embedded server's TLS");
        return;
    }
    let c = TestCluster::embedded(lethe_apiserver::ApiServerConfig {
        tls: true,
        ..Default::default()
    })
    .await;
    assert!(
        c.server
            .as_ref()
            .unwrap()
            .url()
            .starts_with("https://127.0.0.1:")
    );
    assert!(
        c.server
            .as_ref()
            .unwrap()
            .kubeconfig_yaml()
            .contains("certificate-authority-data:")
    );
    let ns = c.namespace("tls").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("secure", json!({})))
        .await
        .unwrap();
    assert_eq!(api.list(&ours()).await.unwrap().items.len(), 1);
    c.shutdown().await;
}

#[tokio::test]
async fn cronjobs_get_the_real_servers_defaults() {
    let c = TestCluster::new().await;
    let ns = c.namespace("cjdef").await;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), &ns);
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"schedule": "@hourly", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}},
    }))
    .unwrap();
    let v = serde_json::to_value(api.create(&PostParams::default(), &cj).await.unwrap()).unwrap();
    assert_eq!(v["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(v["spec"]["suspend"], false);
    assert_eq!(v["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(v["spec"]["failedJobsHistoryLimit"], 1);
    let pod = &v["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        pod["containers"][0]["terminationMessagePath"],
        "/dev/termination-log"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn an_invalid_cronjob_is_422_with_causes() {
    let c = TestCluster::new().await;
    let ns = c.namespace("cjbad").await;
    let api: Api<CronJob> = Api::namespaced(c.client.clone(), &ns);
    let cj: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "bad"},
        "spec": {"schedule": "not a schedule", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Always", "containers": [{"name": "main", "image": "busybox"}]}}}}},
    }))
    .unwrap();
    let e = status_of(api.create(&PostParams::default(), &cj).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let causes = e.details.unwrap().causes;
    // The cron parser's own words, as the real server passes them on.
    assert!(
        causes.iter().any(|c| c.field == "spec.schedule"
            && c.message
                == "Invalid value: \"not a schedule\": expected exactly 5 fields, found 3: [not a schedule]"),
        "{causes:?}"
    );
    // A Job's pods may not restart `Always`, which is what the pod defaults would fill in.
    assert!(
        causes.iter().any(
            |c| c.field == "spec.jobTemplate.spec.template.spec.restartPolicy"
                && c.reason == "FieldValueRequired"
                && c.message == "Required value: valid values: \"OnFailure\", \"Never\""
        ),
        "{causes:?}"
    );

    // Time zones are names from the IANA database, spelled exactly.
    let zoned = |zone: &str| -> CronJob {
        serde_json::from_value(json!({
            "metadata": {"name": "zoned"},
            "spec": {"schedule": "0 3 * * *", "timeZone": zone,
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}}}},
        }))
        .unwrap()
    };
    for zone in ["Mars/Olympus", "europe/berlin"] {
        let e = status_of(
            api.create(&PostParams::default(), &zoned(zone))
                .await
                .unwrap_err(),
        );
        assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
        let causes = e.details.unwrap().causes;
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.timeZone");
        assert_eq!(
            causes[0].message,
            format!("Invalid value: \"{zone}\": unknown time zone {zone}")
        );
    }
    let created = api
        .create(&PostParams::default(), &zoned("Europe/Berlin"))
        .await
        .unwrap();
    assert_eq!(created.spec.time_zone.as_deref(), Some("Europe/Berlin"));
    c.shutdown().await;
}

#[tokio::test]
async fn bodies_are_decoded_as_go_types_before_anything_else() {
    let c = TestCluster::new().await;
    let ns = c.namespace("decode").await;
    let post = |body: Value| {
        http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    // The type is read first, into two strings.
    let e = status_of(
        c.client
            .request::<Value>(post(
                json!({"apiVersion": "v1", "kind": 7, "metadata": {"name": "x"}}),
            ))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert!(
        e.message.starts_with(
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ("
        ),
        "{}",
        e.message
    );
    // Then the object, into its kind's Go type.
    let e = status_of(
        c.client
            .request::<Value>(post(json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": 1},
            })))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn invalid_label_values_are_422() {
    let c = TestCluster::new().await;
    let ns = c.namespace("badlabel").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let e = status_of(
        api.create(
            &PostParams::default(),
            &cm("l", json!({"app": "not valid!"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(e.details.unwrap().causes[0].field, "metadata.labels");
    c.shutdown().await;
}

#[tokio::test]
async fn foreground_deletion_does_not_wait_for_non_blocking_dependents() {
    let c = TestCluster::new().await;
    let ns = c.namespace("fgnb").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    owner_and_dependent(&api).await;
    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually(20, || {
        let api = api.clone();
        async move {
            let owner_gone = api.get_opt("owner").await.unwrap().is_none();
            let dep_gone = api.get_opt("dependent").await.unwrap().is_none();
            (owner_gone && dep_gone).then_some(())
        }
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn removing_the_last_finalizer_emits_deleted_with_the_final_state() {
    let c = TestCluster::new().await;
    let ns = c.namespace("finwatch").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &cm_with(
            json!({"name": "f", "labels": {"lethe-test": "yes"}, "finalizers": ["a.test/one"]}),
        ),
    )
    .await
    .unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let rv = api
        .get("f")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Deleted(o)) => {
            assert!(o.metadata.deletion_timestamp.is_some());
            assert!(o.metadata.finalizers.unwrap_or_default().is_empty());
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test]
async fn custom_resources_are_pruned_defaulted_and_validated_by_the_crd_schema() {
    let c = TestCluster::new().await;
    let ns = c.namespace("schema").await;
    let s = suffix();
    let group = format!("s{s}.lethe.test");
    let plural = format!("shape{s}s");
    let kind = format!("Shape{s}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["sides"], "properties": {
                        "sides": {"type": "integer"},
                        "color": {"type": "string", "default": "blue", "enum": ["blue", "red"]},
                    }},
                }}},
            }],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(c.client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", &kind), &plural);
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    let created = eventually(10, || {
        let api = api.clone();
        let obj = widget(
            &ar,
            "sq",
            json!({"spec": {"sides": 4, "unknown": "x"}, "extra": 1}),
        );
        async move { api.create(&PostParams::default(), &obj).await.ok() }
    })
    .await;
    assert_eq!(created.data["spec"], json!({"sides": 4, "color": "blue"}));
    assert!(created.data.get("extra").is_none());
    let e = status_of(
        api.create(
            &PostParams::default(),
            &widget(
                &ar,
                "bad",
                json!({"spec": {"sides": "four", "color": "green"}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let fields: Vec<String> = e
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert!(fields.contains(&"spec.sides".to_string()), "{fields:?}");
    assert!(fields.contains(&"spec.color".to_string()), "{fields:?}");
    Api::<CustomResourceDefinition>::all(c.client.clone())
        .delete(&format!("{plural}.{group}"), &DeleteParams::default())
        .await
        .unwrap();
    c.shutdown().await;
}

#[tokio::test]
async fn delete_collection_removes_the_selected_objects() {
    let c = TestCluster::new().await;
    let ns = c.namespace("dc").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for (n, team) in [("a", "x"), ("b", "x"), ("c", "y")] {
        api.create(&PostParams::default(), &cm(n, json!({"team": team})))
            .await
            .unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("team=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ours())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(left, ["c"]);
    c.shutdown().await;
}

#[tokio::test]
async fn the_namespace_finalize_subresource_releases_a_terminating_namespace() {
    let c = TestCluster::new().await;
    let ns = c.namespace("fz").await;
    let nss: Api<Namespace> = Api::all(c.client.clone());
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &cm_with(
            json!({"name": "held", "labels": {"lethe-test": "yes"}, "finalizers": ["a.test/hold"]}),
        ),
    )
    .await
    .unwrap();
    nss.delete(&ns, &DeleteParams::default()).await.unwrap();
    let mut n = nss.get(&ns).await.unwrap();
    assert_eq!(
        n.status.as_ref().unwrap().phase.as_deref(),
        Some("Terminating")
    );
    n.spec.as_mut().unwrap().finalizers = Some(vec![]);
    // Unconditional: the namespace controller keeps updating the status meanwhile.
    n.metadata.resource_version = None;
    let body = serde_json::to_vec(&n).unwrap();
    let req = http::Request::put(format!("/api/v1/namespaces/{ns}/finalize"))
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let _: Value = c.client.request(req).await.unwrap();
    eventually(20, || {
        let nss = nss.clone();
        let ns = ns.clone();
        async move { nss.get_opt(&ns).await.unwrap().is_none().then_some(()) }
    })
    .await;
    c.shutdown().await;
}

#[tokio::test]
async fn metadata_only_get_list_and_watch() {
    let c = TestCluster::new().await;
    let ns = c.namespace("meta").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    api.create(&PostParams::default(), &cm("m1", json!({})))
        .await
        .unwrap();
    let m = api.get_metadata("m1").await.unwrap();
    assert_eq!(m.metadata.name.as_deref(), Some("m1"));
    assert_eq!(m.types.unwrap().kind, "PartialObjectMetadata");
    let l = api.list_metadata(&ours()).await.unwrap();
    assert_eq!(l.items.len(), 1);
    let rv = l.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("m2", json!({})))
        .await
        .unwrap();
    let mut w = api
        .watch_metadata(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    match w.try_next().await.unwrap() {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("m2")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test]
async fn strategic_merge_patch_is_refused_for_custom_resources() {
    let c = TestCluster::new().await;
    let ns = c.namespace("smpcr").await;
    let ar = make_crd(&c, true).await;
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &ns, &ar);
    api.create(
        &PostParams::default(),
        &widget(&ar, "w", json!({"spec": {"a": 1}})),
    )
    .await
    .unwrap();
    let e = status_of(
        api.patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"a": 2}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (415, "UnsupportedMediaType"));
    let ok = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"a": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(ok.data["spec"]["a"], 2);
    c.shutdown().await;
}

#[tokio::test]
async fn concurrent_read_modify_write_with_conflict_retries_loses_no_update() {
    let c = TestCluster::new().await;
    let ns = c.namespace("race").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let mut counter = cm("counter", json!({}));
    counter.data = Some([("n".to_string(), "0".to_string())].into());
    api.create(&PostParams::default(), &counter).await.unwrap();
    let workers = 8;
    let increments = 10;
    let mut tasks = vec![];
    for _ in 0..workers {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..increments {
                loop {
                    let mut cur = api.get("counter").await.unwrap();
                    let data = cur.data.get_or_insert_default();
                    let n: u64 = data["n"].parse().unwrap();
                    data.insert("n".into(), (n + 1).to_string());
                    match api.replace("counter", &PostParams::default(), &cur).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 409 => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    let n = api.get("counter").await.unwrap().data.unwrap()["n"].clone();
    assert_eq!(
        n,
        (workers * increments).to_string(),
        "after {conflicts} conflicts"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn resource_versions_come_from_one_increasing_counter_across_kinds() {
    use k8s_openapi::api::core::v1::Secret;
    let c = TestCluster::new().await;
    let ns = c.namespace("rv").await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), &ns);
    let rv = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| -> u64 {
        m.resource_version.as_deref().unwrap().parse().unwrap()
    };
    let a = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}))
            .unwrap();
    let b = secrets.create(&PostParams::default(), &s).await.unwrap();
    let c2 = cms
        .create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    assert!(rv(&a.metadata) < rv(&b.metadata) && rv(&b.metadata) < rv(&c2.metadata));
    assert_eq!(
        b.data.unwrap()["k"].0,
        b"v".to_vec(),
        "stringData is folded into data"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn the_default_namespace_may_not_be_deleted() {
    let c = TestCluster::new().await;
    let nss: Api<Namespace> = Api::all(c.client.clone());
    let e = status_of(
        nss.delete("default", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "namespaces \"default\" is forbidden: this namespace may not be deleted"
    );
    c.shutdown().await;
}

#[tokio::test]
async fn aggregated_discovery_lists_groups_and_resources() {
    let c = TestCluster::new().await;
    let ar = make_crd(&c, true).await;
    let d = kube::discovery::Discovery::new(c.client.clone())
        .run_aggregated()
        .await
        .unwrap();
    let mut kinds = vec![];
    for g in d.groups() {
        for (r, _) in g.recommended_resources() {
            kinds.push(format!("{}/{}", r.group, r.kind));
        }
    }
    for want in [
        "/ConfigMap",
        "/Namespace",
        "batch/CronJob",
        "coordination.k8s.io/Lease",
        &format!("{}/{}", ar.group, ar.kind),
    ] {
        assert!(
            kinds.iter().any(|k| k == want),
            "{want} missing from {kinds:?}"
        );
    }
    c.shutdown().await;
}

/// A Table's rows carry what `includeObject` asks for: kubectl asks for whole objects to sort by
/// one of their fields.
#[tokio::test]
async fn table_rows_carry_the_object_include_object_asks_for() {
    let c = TestCluster::new().await;
    let ns = c.namespace("tables").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "t1"}, "data": {"a": "b"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let table = |include: &str| {
        http::Request::get(format!(
            // Only t1: the namespace also holds the root-CA publisher's kube-root-ca.crt.
            "/api/v1/namespaces/{ns}/configmaps?fieldSelector=metadata.name%3Dt1&includeObject={include}"
        ))
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap()
    };
    let whole = c.client.request::<Value>(table("Object")).await.unwrap();
    let object = &whole["rows"][0]["object"];
    assert_eq!(
        (&object["kind"], &object["data"]["a"]),
        (&json!("ConfigMap"), &json!("b"))
    );
    let meta = c.client.request::<Value>(table("Metadata")).await.unwrap();
    let object = &meta["rows"][0]["object"];
    assert_eq!(object["kind"], "PartialObjectMetadata");
    assert!(object.get("data").is_none(), "{object}");
    let none = c.client.request::<Value>(table("None")).await.unwrap();
    assert!(none["rows"][0]["object"].is_null(), "{none}");
    let e = status_of(
        c.client
            .request::<Value>(table("Everything"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "unrecognized includeObject value: \"Everything\"")
    );
    c.shutdown().await;
}

/// Write options are checked before anything is written: an unknown dry-run mode or field
/// validation, `force` on a patch that is not an apply, or both deletion styles at once are
/// refused with the options' own 422, and nothing changes.
#[tokio::test]
async fn write_options_are_validated_before_anything_is_written() {
    let c = TestCluster::new().await;
    let ns = c.namespace("options").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let invalid = |req: http::Request<Vec<u8>>| {
        let client = c.client.clone();
        async move { status_of(client.request::<Value>(req).await.unwrap_err()) }
    };
    let create = |query: &str| {
        http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps?{query}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&json!({"metadata": {"name": "o1"}})).unwrap())
            .unwrap()
    };
    let e = invalid(create("dryRun=Foo")).await;
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Foo\"}: supported values: \"All\""
    );
    let e = invalid(create("fieldValidation=Loose")).await;
    assert_eq!(
        e.message,
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loose\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
    assert!(api.get_opt("o1").await.unwrap().is_none());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "o1"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let e = invalid(
        http::Request::patch(format!("/api/v1/namespaces/{ns}/configmaps/o1?force=true"))
            .header("content-type", "application/merge-patch+json")
            .body(br#"{"data":{"a":"b"}}"#.to_vec())
            .unwrap(),
    )
    .await;
    assert_eq!(
        e.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
    let delete = |query: &str, body: Value| {
        http::Request::delete(format!("/api/v1/namespaces/{ns}/configmaps/o1?{query}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    let e = invalid(delete(
        "",
        json!({"orphanDependents": true, "propagationPolicy": "Background"}),
    ))
    .await;
    assert_eq!(
        e.message,
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Background\": orphanDependents and deletionPropagation cannot be both set"
    );
    let e = invalid(delete("dryRun=Foo", json!({}))).await;
    assert_eq!(
        e.message,
        "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Foo\"}: supported values: \"All\""
    );
    let kept = api.get("o1").await.unwrap();
    assert!(kept.data.is_none() && kept.metadata.deletion_timestamp.is_none());
    c.shutdown().await;
}

/// An immutable ConfigMap or Secret keeps its contents, and a Secret keeps its type.
#[tokio::test]
async fn immutable_config_maps_and_secrets_keep_their_contents() {
    use k8s_openapi::api::core::v1::Secret;
    let c = TestCluster::new().await;
    let ns = c.namespace("immutable").await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "imm"}, "data": {"a": "b"}, "immutable": true}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let change = |patch: Value| {
        let cms = cms.clone();
        async move {
            status_of(
                cms.patch("imm", &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .unwrap_err(),
            )
        }
    };
    let e = change(json!({"data": {"a": "c"}})).await;
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "ConfigMap \"imm\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let e = change(json!({"immutable": false})).await;
    assert_eq!(
        e.message,
        "ConfigMap \"imm\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set"
    );
    // Labels may still change.
    cms.patch(
        "imm",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), &ns);
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}))
            .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let e = status_of(
        secrets
            .patch(
                "s",
                &PatchParams::default(),
                &Patch::Merge(json!({"type": "example.com/other"})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "Secret \"s\" is invalid: type: Invalid value: \"example.com/other\": field is immutable"
    );
    c.shutdown().await;
}

/// Storage refuses a resourceVersion on a new object (a plain 500, as the real server gives),
/// and custom resources and Leases are only replaced at a stated version.
#[tokio::test]
async fn versions_are_refused_on_create_and_required_where_updates_are_conditional() {
    let c = TestCluster::new().await;
    let ns = c.namespace("versions").await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "v1", "resourceVersion": "5"}}))
            .unwrap();
    let e = status_of(cms.create(&PostParams::default(), &cm).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            500,
            "resourceVersion should not be set on objects to be created"
        )
    );
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), &ns);
    let lease: Lease = serde_json::from_value(
        json!({"metadata": {"name": "l1"}, "spec": {"holderIdentity": "a"}}),
    )
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let e = status_of(
        leases
            .replace("l1", &PostParams::default(), &lease)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "leases.coordination.k8s.io \"l1\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    // ConfigMaps may be replaced unconditionally.
    let plain: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "v2"}})).unwrap();
    cms.create(&PostParams::default(), &plain).await.unwrap();
    cms.replace("v2", &PostParams::default(), &plain)
        .await
        .unwrap();
    c.shutdown().await;
}

/// What a terminating namespace answers: a create is refused with the cause controllers look
/// for, a second delete is a conflict while its content is being removed, and a name whose
/// object is still being deleted says so.
#[tokio::test]
async fn a_terminating_namespace_says_why_it_refuses() {
    let c = TestCluster::new().await;
    let ns = c.namespace("terminating").await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let held: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &held).await.unwrap();
    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let e = status_of(cms.create(&PostParams::default(), &held).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            409,
            "object is being deleted: configmaps \"held\" already exists"
        )
    );
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    let fresh: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "fresh"}})).unwrap();
    let e = status_of(
        cms.create(&PostParams::default(), &fresh)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    let causes = e.details.unwrap().causes;
    assert!(
        causes.iter().any(|c| c.reason == "NamespaceTerminating"
            && c.field == "metadata.namespace"
            && c.message == format!("namespace {ns} is being terminated")),
        "{causes:?}"
    );
    let e = status_of(
        namespaces
            .delete(&ns, &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message),
        (
            409,
            format!(
                "Operation cannot be fulfilled on namespaces \"{ns}\": The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system."
            )
        )
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    c.shutdown().await;
}

/// A replacement's uid is a precondition and a patch's is validated; a version in an applied
/// configuration must be current; a JSON patch that does not apply is the library's error passed
/// on as an unexpected server response.
#[tokio::test]
async fn identity_and_version_preconditions_of_updates() {
    let c = TestCluster::new().await;
    let ns = c.namespace("preconds").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "p1"}, "data": {"a": "b"}})).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let mut other = created.clone();
    other.metadata.uid = Some("not-the-uid".into());
    let e = status_of(
        api.replace("p1", &PostParams::default(), &other)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.ends_with(&format!(
            "Precondition failed: UID in precondition: not-the-uid, UID in object meta: {uid}"
        )),
        "{}",
        e.message
    );
    let e = status_of(
        api.patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"uid": "not-the-uid"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            422,
            "ConfigMap \"p1\" is invalid: metadata.uid: Invalid value: \"not-the-uid\": field is immutable"
        )
    );
    let e = status_of(
        api.patch(
            "p1",
            &PatchParams::apply("preconds").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "p1", "resourceVersion": "1"}, "data": {"a": "c"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.ends_with(
            "the object has been modified; please apply your changes to the latest version and try again"
        ),
        "{}",
        e.message
    );
    let e = status_of(
        api.patch(
            "p1",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "test", "path": "/data/a", "value": "z"}]))
                    .unwrap(),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (
            422,
            "Invalid",
            "the server rejected our request due to an error in our request"
        )
    );
    let causes = e.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(
        (causes[0].reason.as_str(), causes[0].message.as_str()),
        (
            "UnexpectedServerResponse",
            "testing value /data/a failed: test failed"
        )
    );
    assert_eq!(api.get("p1").await.unwrap().data, created.data);
    c.shutdown().await;
}

/// A namespace keeps its name label, the spec finalizers its creator asked for (with
/// `kubernetes` after them), a phase that matches its deletion, and only valid finalizer names.
#[tokio::test]
async fn namespaces_keep_their_name_label_finalizers_and_phase() {
    let c = TestCluster::new().await;
    let name = format!("nsrules-{}", suffix());
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    let ns: Namespace = serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    assert_eq!(
        created.spec.unwrap().finalizers.unwrap(),
        ["example.com/hold", "kubernetes"]
    );
    let relabelled = namespaces
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"kubernetes.io/metadata.name": "other"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        relabelled.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        name
    );
    let e = status_of(
        namespaces
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Terminating"}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message),
        (
            422,
            format!(
                "Namespace \"{name}\" is invalid: status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
            )
        )
    );
    let mut finalize = namespaces.get(&name).await.unwrap();
    finalize.spec.as_mut().unwrap().finalizers = Some(vec!["kubernetes".into(), "foo".into()]);
    let e = status_of(
        c.client
            .request::<Value>(
                http::Request::put(format!("/api/v1/namespaces/{name}/finalize"))
                    .header("content-type", "application/json")
                    .body(serde_json::to_vec(&finalize).unwrap())
                    .unwrap(),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message),
        (
            422,
            format!(
                "Namespace \"{name}\" is invalid: spec.finalizers[1]: Invalid value: \"foo\": name is neither a standard finalizer name nor is it fully qualified"
            )
        )
    );
    // Leave only the namespace controller's finalizer, so that the namespace can go.
    finalize.spec.as_mut().unwrap().finalizers = Some(vec!["kubernetes".into()]);
    c.client
        .request::<Value>(
            http::Request::put(format!("/api/v1/namespaces/{name}/finalize"))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&finalize).unwrap())
                .unwrap(),
        )
        .await
        .unwrap();
    namespaces
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    c.shutdown().await;
}

/// Server-side apply takes YAML, as its media type says, and writes take `application/yaml`.
#[tokio::test]
async fn yaml_bodies_are_applied_and_created() {
    let c = TestCluster::new().await;
    let ns = c.namespace("yaml").await;
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    let applied = c
        .client
        .request::<Value>(
            http::Request::patch(format!(
                "/api/v1/namespaces/{ns}/configmaps/y1?fieldManager=yaml-test"
            ))
            .header("content-type", "application/apply-patch+yaml")
            .body(
                b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y1\ndata:\n  colour: blue # a comment\n"
                    .to_vec(),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(applied["data"]["colour"], "blue");
    let created = c
        .client
        .request::<Value>(
            http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps"))
                .header("content-type", "application/yaml")
                .body(
                    b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y2}\ndata: {a: b}\n"
                        .to_vec(),
                )
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(created["metadata"]["name"], "y2");
    assert_eq!(api.get("y2").await.unwrap().data.unwrap()["a"], "b");
    c.shutdown().await;
}

/// CRD names are checked as the real server checks them; a group's versions are listed and
/// preferred by Kubernetes version priority; a stored version cannot leave the spec; a kind is
/// immutable.
#[tokio::test]
async fn crd_names_versions_and_stored_versions_are_checked() {
    let c = TestCluster::new().await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.client.clone());
    let s = suffix();
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    let crd = |group: &str,
               kind: &str,
               list_kind: &str,
               versions: Vec<Value>|
     -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": format!("gizmo{s}s.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": format!("gizmo{s}s"), "kind": kind, "listKind": list_kind},
                "versions": versions},
        }))
        .unwrap()
    };
    let e = status_of(
        crds.create(
            &PostParams::default(),
            &crd("nodot", "Gizmo", "GizmoList", vec![version("v1", true)]),
        )
        .await
        .unwrap_err(),
    );
    let causes = e.details.unwrap().causes;
    assert!(
        causes.iter().any(|c| c.field == "spec.group"
            && c.message == "Invalid value: \"nodot\": should be a domain with at least one dot"),
        "{causes:?}"
    );
    let group = format!("g{s}.lethe.test");
    let e = status_of(
        crds.create(
            &PostParams::default(),
            &crd(&group, "Gizmo", "Gizmo", vec![version("V1", true)]),
        )
        .await
        .unwrap_err(),
    );
    let causes = e.details.unwrap().causes;
    let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
    assert!(fields.contains(&"spec.versions[0].name"), "{causes:?}");
    assert!(
        causes.iter().any(|c| c.field == "spec.names.listKind"
            && c.message == "Invalid value: \"Gizmo\": kind and listKind may not be the same"),
        "{causes:?}"
    );
    // v1 stores, v2 is served too: discovery prefers v2.
    crds.create(
        &PostParams::default(),
        &crd(
            &group,
            "Gizmo",
            "GizmoList",
            vec![version("v1", true), version("v2", false)],
        ),
    )
    .await
    .unwrap();
    let discovered = eventually(10, || {
        let client = c.client.clone();
        let group = group.clone();
        async move {
            let g: Value = client
                .request(
                    http::Request::get(format!("/apis/{group}"))
                        .body(Vec::new())
                        .unwrap(),
                )
                .await
                .ok()?;
            (g["versions"].as_array()?.len() == 2).then_some(g)
        }
    })
    .await;
    assert_eq!(discovered["preferredVersion"]["version"], "v2");
    assert_eq!(discovered["versions"][0]["version"], "v2");
    let name = format!("gizmo{s}s.{group}");
    let e = status_of(
        crds.patch(
            &name,
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "replace", "path": "/spec/versions", "value": [version("v2", true)]}
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.message,
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: status.storedVersions[0]: Invalid value: \"v1\": must appear in spec.versions"
        )
    );
    let e = status_of(
        crds.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"names": {"kind": "Gadget", "listKind": "GadgetList"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        e.message
            .ends_with("spec.names.kind: Invalid value: \"Gadget\": field is immutable"),
        "{}",
        e.message
    );
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
    c.shutdown().await;
}

/// Bindings are validated as the real server validates them: a binding's role cannot change, a
/// cluster binding binds only cluster roles, and a service account named without a namespace in
/// a role binding is one of the binding's namespace.
#[tokio::test]
async fn bindings_keep_their_role_and_name_their_subjects_as_on_a_real_cluster() {
    let c = TestCluster::new().await;
    let ns = c.namespace("bindings").await;
    let bindings: Api<RoleBinding> = Api::namespaced(c.client.clone(), &ns);
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "sa-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "default"}],
    }))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let account = c
        .client_as(
            &format!("system:serviceaccount:{ns}:default"),
            &["system:serviceaccounts", "system:authenticated"],
        )
        .await;
    let listed = eventually(10, || {
        let api: Api<ConfigMap> = Api::namespaced(account.clone(), &ns);
        async move { api.list(&ListParams::default()).await.ok() }
    })
    .await;
    assert!(
        listed
            .items
            .iter()
            .all(|cm| cm.metadata.namespace.as_deref() == Some(ns.as_str()))
    );
    let e = status_of(
        bindings
            .patch(
                "sa-view",
                &PatchParams::default(),
                &Patch::Merge(json!({"roleRef": {"name": "edit"}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            422,
            "RoleBinding.rbac.authorization.k8s.io \"sa-view\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
        )
    );
    let cluster_binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("bad-{}", suffix())},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"},
        "subjects": [{"kind": "ServiceAccount", "name": "default"}],
    }))
    .unwrap();
    let e = status_of(
        Api::<ClusterRoleBinding>::all(c.client.clone())
            .create(&PostParams::default(), &cluster_binding)
            .await
            .unwrap_err(),
    );
    let causes: Vec<(String, String)> = e
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| (c.field, c.message))
        .collect();
    assert_eq!(
        causes,
        vec![
            (
                "roleRef.kind".to_string(),
                "Unsupported value: \"Role\": supported values: \"ClusterRole\"".to_string()
            ),
            (
                "subjects[0].namespace".to_string(),
                "Required value".to_string()
            ),
        ]
    );
    c.shutdown().await;
}

/// A list or watch selecting one object by name is authorized as a request for that name, so a
/// role limited to some resource names can still list and watch them one by one.
#[tokio::test]
async fn lists_by_name_are_authorized_for_that_name() {
    let c = TestCluster::new().await;
    let ns = c.namespace("byname").await;
    let user = format!("named-{}", suffix());
    bind_role(
        &c,
        &ns,
        "one-map",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"],
                "verbs": ["get", "list", "watch"]}]),
        &user,
    )
    .await;
    let admin: Api<ConfigMap> = Api::namespaced(c.client.clone(), &ns);
    for name in ["mine", "theirs"] {
        admin
            .create(&PostParams::default(), &cm(name, json!({})))
            .await
            .unwrap();
    }
    let maps: Api<ConfigMap> =
        Api::namespaced(c.client_as(&user, &["system:authenticated"]).await, &ns);
    let mine = eventually(10, || {
        let maps = maps.clone();
        async move {
            maps.list(&ListParams::default().fields("metadata.name=mine"))
                .await
                .ok()
        }
    })
    .await;
    assert_eq!(mine.items.len(), 1);
    let e = status_of(
        maps.list(&ListParams::default().fields("metadata.name=theirs"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert!(
        e.message
            .starts_with("configmaps \"theirs\" is forbidden: User"),
        "{}",
        e.message
    );
    let e = status_of(maps.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(e.code, 403, "{}", e.message);
    c.shutdown().await;
}

/// RBAC's escalation prevention: a user who may write roles and bindings may still only grant
/// permissions they hold, unless they may `escalate` roles or `bind` the role.
#[tokio::test]
async fn rbac_writers_cannot_grant_what_they_do_not_hold() {
    let c = TestCluster::new().await;
    let ns = c.namespace("escalate").await;
    let user = format!("binder-{}", suffix());
    bind_role(
        &c,
        &ns,
        "rbac-writer",
        json!([
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
             "verbs": ["create", "get", "list", "update", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
        ]),
        &user,
    )
    .await;
    let writer = c.client_as(&user, &["system:authenticated"]).await;
    let roles: Api<Role> = Api::namespaced(writer.clone(), &ns);
    // Within what the writer holds: allowed.
    let held: Role = serde_json::from_value(json!({
        "metadata": {"name": "readers"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }))
    .unwrap();
    eventually(10, || {
        let roles = roles.clone();
        let held = held.clone();
        async move { roles.create(&PostParams::default(), &held).await.ok() }
    })
    .await;
    // Beyond it: refused, naming what is missing.
    let secrets: Role = serde_json::from_value(json!({
        "metadata": {"name": "secret-readers"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    let e = status_of(
        roles
            .create(&PostParams::default(), &secrets)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert!(
        e.message.starts_with(&format!(
            "roles.rbac.authorization.k8s.io \"secret-readers\" is forbidden: user \"{user}\" (groups=["
        )) && e.message.ends_with(
            "is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
        ),
        "{}",
        e.message
    );
    let admin_binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "self-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
    }))
    .unwrap();
    let e = status_of(
        Api::<RoleBinding>::namespaced(writer.clone(), &ns)
            .create(&PostParams::default(), &admin_binding)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403, "{}", e.message);
    assert!(
        e.message
            .contains("is attempting to grant RBAC permissions not currently held"),
        "{}",
        e.message
    );
    // A patch is judged on the role it would leave, and leaves the role as it was.
    for patch in [
        Patch::Merge(
            json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
        ),
        Patch::Json(
            serde_json::from_value(json!([{"op": "add", "path": "/rules/-",
                "value": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}}]))
            .unwrap(),
        ),
    ] {
        let e = status_of(
            roles
                .patch("readers", &PatchParams::default(), &patch)
                .await
                .unwrap_err(),
        );
        assert_eq!(e.code, 403, "{}", e.message);
        assert!(
            e.message.ends_with(
                "is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
            ),
            "{}",
            e.message
        );
    }
    let kept = roles.get("readers").await.unwrap();
    assert_eq!(kept.rules.unwrap_or_default().len(), 1);
    // Within what the writer holds, a patch goes through.
    roles
        .patch(
            "readers",
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})),
        )
        .await
        .unwrap();
    c.shutdown().await;
}
